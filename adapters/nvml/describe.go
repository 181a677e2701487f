package nvml

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Describe returns GPU feature discovery's node labels for the GPUs (the
// first GPU's model, memory and compute capability, as GFD does for a
// resource) and one annotation per GPU, "actorlet.io/gpu-<index>" =
// "<uuid>,<pci bus id>,<model>,<memory MiB>,mig=<enabled|disabled>". It
// makes no NVML call (discovery's figures).
func (g *GPUs) Describe() (labels, annotations map[string]string) {
	labels = map[string]string{
		"nvidia.com/gpu.present": "true",
		"nvidia.com/gpu.count":   strconv.Itoa(len(g.gpus)),
		"nvidia.com/gpu.machine": labelValue(g.machine, "unknown"),
	}
	first := g.gpus[0]
	if first.name != "" {
		labels["nvidia.com/gpu.product"] = labelValue(first.name, "")
	}
	if first.memory > 0 {
		labels["nvidia.com/gpu.memory"] = strconv.FormatUint(first.memoryMiB(), 10)
	}
	if first.ccMajor > 0 {
		labels["nvidia.com/gpu.family"] = archFamily(first.ccMajor, first.ccMinor)
		labels["nvidia.com/gpu.compute.major"] = strconv.Itoa(first.ccMajor)
		labels["nvidia.com/gpu.compute.minor"] = strconv.Itoa(first.ccMinor)
	}
	migCapable := false
	for _, d := range g.gpus {
		migCapable = migCapable || d.migCapable
	}
	labels["nvidia.com/mig.capable"] = strconv.FormatBool(migCapable)
	if parts := strings.Split(g.driverVersion, "."); len(parts) == 2 || len(parts) == 3 {
		rev := ""
		if len(parts) == 3 {
			rev = parts[2]
		}
		// GFD writes both the deprecated and the current names.
		labels["nvidia.com/cuda.driver.major"] = parts[0]
		labels["nvidia.com/cuda.driver.minor"] = parts[1]
		labels["nvidia.com/cuda.driver.rev"] = rev
		labels["nvidia.com/cuda.driver-version.major"] = parts[0]
		labels["nvidia.com/cuda.driver-version.minor"] = parts[1]
		labels["nvidia.com/cuda.driver-version.revision"] = rev
		labels["nvidia.com/cuda.driver-version.full"] = labelValue(g.driverVersion, "")
	}
	if g.cudaVersion > 0 {
		major, minor := g.cudaVersion/1000, g.cudaVersion%1000/10
		labels["nvidia.com/cuda.runtime.major"] = strconv.Itoa(major)
		labels["nvidia.com/cuda.runtime.minor"] = strconv.Itoa(minor)
		labels["nvidia.com/cuda.runtime-version.major"] = strconv.Itoa(major)
		labels["nvidia.com/cuda.runtime-version.minor"] = strconv.Itoa(minor)
		labels["nvidia.com/cuda.runtime-version.full"] = fmt.Sprintf("%d.%d", major, minor)
	}

	annotations = make(map[string]string, len(g.gpus))
	for _, d := range g.gpus {
		mig := "disabled"
		if d.migEnabled {
			mig = "enabled"
		}
		annotations[fmt.Sprintf("actorlet.io/gpu-%d", d.index)] = fmt.Sprintf("%s,%s,%s,%d,mig=%s",
			d.uuid, d.busID, strings.ReplaceAll(d.name, ",", " "), d.memoryMiB(), mig)
	}
	return labels, annotations
}

// archFamily is GFD's family name for a compute capability
// (k8s-device-plugin internal/lm/resource.go, getArchFamily), with
// Blackwell (10.x, 12.x) added.
func archFamily(major, minor int) string {
	switch major {
	case 1:
		return "tesla"
	case 2:
		return "fermi"
	case 3:
		return "kepler"
	case 5:
		return "maxwell"
	case 6:
		return "pascal"
	case 7:
		if minor < 5 {
			return "volta"
		}
		return "turing"
	case 8:
		return "ampere"
	case 9:
		return "hopper"
	case 10, 12:
		return "blackwell"
	}
	return "undefined"
}

// labelValue makes s a valid label value: spaces as '-' (as GFD), other
// characters a label value cannot hold as '_', at most 63 characters,
// starting and ending alphanumeric. Empty: def.
func labelValue(s, def string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), " ", "-")
	b := []byte(s)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	alnum := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	for len(b) > 0 && !alnum(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && !alnum(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return def
	}
	return string(b)
}

// DCGM exporter's field names, as Sample returns them.
const (
	MetricGPUUtil     = "DCGM_FI_DEV_GPU_UTIL"      // %
	MetricMemCopyUtil = "DCGM_FI_DEV_MEM_COPY_UTIL" // %
	MetricFBUsed      = "DCGM_FI_DEV_FB_USED"       // MiB
	MetricFBFree      = "DCGM_FI_DEV_FB_FREE"       // MiB
	MetricGPUTemp     = "DCGM_FI_DEV_GPU_TEMP"      // C
	MetricPowerUsage  = "DCGM_FI_DEV_POWER_USAGE"   // W
	MetricXidErrors   = "DCGM_FI_DEV_XID_ERRORS"    // the last Xid seen, 0 if none
)

// Sample reads utilisation, memory, temperature and power of every GPU,
// by UUID, under DCGM exporter's names (the Metric constants). A query that
// fails leaves its fields out. DCGM_FI_DEV_XID_ERRORS is the last Xid that
// Watch saw on the GPU (0 if none). Errors: ctx ended, or ErrClosed.
func (g *GPUs) Sample(ctx context.Context) (map[string]map[string]float64, error) {
	out := make(map[string]map[string]float64, len(g.gpus))
	for _, d := range g.gpus {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m, err := g.sampleOne(d)
		if err != nil {
			return nil, err
		}
		out[d.uuid] = m
	}
	return out, nil
}

func (g *GPUs) sampleOne(d *gpu) (map[string]float64, error) {
	if err := g.acquire(); err != nil {
		return nil, err
	}
	defer g.release()
	const mib = 1 << 20
	m := map[string]float64{}
	if u, ret := d.dev.GetUtilizationRates(); ret == nvml.SUCCESS {
		m[MetricGPUUtil] = float64(u.Gpu)
		m[MetricMemCopyUtil] = float64(u.Memory)
	}
	if mem, ret := d.dev.GetMemoryInfo(); ret == nvml.SUCCESS {
		m[MetricFBUsed] = float64(mem.Used / mib)
		m[MetricFBFree] = float64(mem.Free / mib)
	}
	if t, ret := d.dev.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
		m[MetricGPUTemp] = float64(t)
	}
	if p, ret := d.dev.GetPowerUsage(); ret == nvml.SUCCESS {
		m[MetricPowerUsage] = float64(p) / 1000
	}
	g.stateMu.Lock()
	m[MetricXidErrors] = float64(g.lastXid[d.uuid])
	g.stateMu.Unlock()
	return m, nil
}
