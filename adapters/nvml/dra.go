package nvml

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPUInfo is what a DRA ResourceSlice tells of one GPU: the attributes
// NVIDIA's DRA driver (k8s-dra-driver-gpu, driver gpu.nvidia.com)
// publishes, so DeviceClasses and claims written for it select the same
// devices here. Empty strings and zero versions are unknown (left out of
// the slice).
type GPUInfo struct {
	Name                  string // the device's name in the slice: "gpu-<index>"
	UUID                  string
	Index                 int
	Minor                 int
	ProductName           string
	Brand                 string // "Nvidia", "Tesla", ... ("" unknown)
	Architecture          string // "Hopper", "Ampere", ... ("" unknown)
	CUDAComputeCapability string // "9.0" ("" unknown)
	DriverVersion         string // "550.54.15" ("" unknown)
	CUDADriverVersion     string // "12.4" ("" unknown)
	PCIeBusID             string // "0000:1b:00.0" ("" unknown)
	MemoryBytes           uint64
}

// DeviceName is the name of the GPU of this index in a ResourceSlice
// (NVIDIA's DRA driver's canonical name).
func DeviceName(index int) string { return "gpu-" + strconv.Itoa(index) }

// GPUInfos returns every GPU's DRA attributes, in index order. Brand and
// architecture are asked of NVML (a GPU whose answer fails has them
// unknown); the rest are discovery's figures.
func (g *GPUs) GPUInfos() ([]GPUInfo, error) {
	if err := g.acquire(); err != nil {
		return nil, err
	}
	defer g.release()
	out := make([]GPUInfo, 0, len(g.gpus))
	cuda := ""
	if g.cudaVersion > 0 {
		cuda = fmt.Sprintf("%d.%d", g.cudaVersion/1000, g.cudaVersion%1000/10)
	}
	for _, d := range g.gpus {
		info := GPUInfo{
			Name:              DeviceName(d.index),
			UUID:              d.uuid,
			Index:             d.index,
			Minor:             d.minor,
			ProductName:       d.name,
			DriverVersion:     g.driverVersion,
			CUDADriverVersion: cuda,
			PCIeBusID:         d.busID,
			MemoryBytes:       d.memory,
		}
		if d.ccMajor > 0 {
			info.CUDAComputeCapability = fmt.Sprintf("%d.%d", d.ccMajor, d.ccMinor)
		}
		if b, ret := d.dev.GetBrand(); ret == nvml.SUCCESS {
			info.Brand = brandNames[b]
		}
		if a, ret := d.dev.GetArchitecture(); ret == nvml.SUCCESS {
			info.Architecture = archNames[a]
		}
		out = append(out, info)
	}
	return out, nil
}

// GPUNode returns the device node of the GPU of this UUID (host path
// under DevRoot, container path under /dev), as Allocate gives it; a
// missing node is an error.
func (g *GPUs) GPUNode(uuid string) (host, container string, err error) {
	d, ok := g.byUUID[uuid]
	if !ok {
		return "", "", fmt.Errorf("%w %q (this node has %s)", ErrUnknownDevice, uuid, g.uuidList())
	}
	node := fmt.Sprintf("nvidia%d", d.minor)
	host = filepath.Join(g.devRoot, node)
	if _, err := os.Stat(host); err != nil {
		return "", "", fmt.Errorf("device node of %s: %w", uuid, err)
	}
	return host, "/dev/" + node, nil
}

// ControlNodes returns the driver's control device nodes the host has
// (host path, container path), which every GPU container gets.
func (g *GPUs) ControlNodes() [][2]string {
	var out [][2]string
	for _, node := range controlNodes {
		host := filepath.Join(g.devRoot, node)
		if _, err := os.Stat(host); err == nil {
			out = append(out, [2]string{host, "/dev/" + node})
		}
	}
	return out
}

// brandNames are NVML's brands as NVIDIA's DRA driver writes them ("" for
// one not listed).
var brandNames = map[nvml.BrandType]string{
	nvml.BRAND_QUADRO:              "Quadro",
	nvml.BRAND_TESLA:               "Tesla",
	nvml.BRAND_NVS:                 "NVS",
	nvml.BRAND_GRID:                "Grid",
	nvml.BRAND_GEFORCE:             "GeForce",
	nvml.BRAND_TITAN:               "Titan",
	nvml.BRAND_NVIDIA_VAPPS:        "NvidiaVApps",
	nvml.BRAND_NVIDIA_VPC:          "NvidiaVPC",
	nvml.BRAND_NVIDIA_VCS:          "NvidiaVCS",
	nvml.BRAND_NVIDIA_VWS:          "NvidiaVWS",
	nvml.BRAND_NVIDIA_CLOUD_GAMING: "NvidiaCloudGaming",
	nvml.BRAND_QUADRO_RTX:          "QuadroRTX",
	nvml.BRAND_NVIDIA_RTX:          "NvidiaRTX",
	nvml.BRAND_NVIDIA:              "Nvidia",
}

// archNames are NVML's architectures as NVIDIA's DRA driver writes them
// ("" for one not listed).
var archNames = map[nvml.DeviceArchitecture]string{
	nvml.DEVICE_ARCH_KEPLER:    "Kepler",
	nvml.DEVICE_ARCH_MAXWELL:   "Maxwell",
	nvml.DEVICE_ARCH_PASCAL:    "Pascal",
	nvml.DEVICE_ARCH_VOLTA:     "Volta",
	nvml.DEVICE_ARCH_TURING:    "Turing",
	nvml.DEVICE_ARCH_AMPERE:    "Ampere",
	nvml.DEVICE_ARCH_ADA:       "Ada Lovelace",
	nvml.DEVICE_ARCH_HOPPER:    "Hopper",
	nvml.DEVICE_ARCH_BLACKWELL: "Blackwell",
	nvml.DEVICE_ARCH_RUBIN:     "Rubin",
}
