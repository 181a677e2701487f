package podspec

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// In-place pod resize (upstream's InPlacePodVerticalScaling, GA in v1.35):
// the values a container's CPU and memory come to in the runtime, and the
// way back from them to the resources a status reports.

// LegacyContainerHash is the hash agents before in-place resize wrote in
// AnnotationContainerHash: the whole container, resources included. A
// running container that carries it for its unchanged spec is kept (an
// agent upgrade restarts nothing).
func LegacyContainerHash(c *v1.Container) string { return fullHash(c) }

// ContainerHashMatches reports whether a runtime container's hash
// annotation is c's: the hash without resources, or the legacy whole-spec
// hash of an agent before in-place resize.
func ContainerHashMatches(c *v1.Container, hash string) bool {
	return hash == ContainerHash(c) || hash == LegacyContainerHash(c)
}

// ContainerLinuxResources is the CPU and memory the runtime is given for c
// (shares from the CPU request, quota from the CPU limit, memory limit), as
// ContainerConfig sets them.
func ContainerLinuxResources(c *v1.Container) *runtimeapi.LinuxContainerResources {
	return linuxResources(c)
}

// FormatLinuxResources writes the CPU and memory values of r for
// AnnotationContainerResources: "shares=2,quota=0,period=0,memory=0".
func FormatLinuxResources(r *runtimeapi.LinuxContainerResources) string {
	return fmt.Sprintf("shares=%d,quota=%d,period=%d,memory=%d",
		r.GetCpuShares(), r.GetCpuQuota(), r.GetCpuPeriod(), r.GetMemoryLimitInBytes())
}

// ParseLinuxResources reads what FormatLinuxResources wrote; nil when s is
// not such a value.
func ParseLinuxResources(s string) *runtimeapi.LinuxContainerResources {
	if s == "" {
		return nil
	}
	r := &runtimeapi.LinuxContainerResources{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			return nil
		}
		switch k {
		case "shares":
			r.CpuShares = n
		case "quota":
			r.CpuQuota = n
		case "period":
			r.CpuPeriod = n
		case "memory":
			r.MemoryLimitInBytes = n
		default:
			return nil
		}
	}
	return r
}

// SameCPU reports whether a and b give a container the same CPU (shares,
// and quota where either sets one).
func SameCPU(a, b *runtimeapi.LinuxContainerResources) bool {
	return a.GetCpuShares() == b.GetCpuShares() && quota(a) == quota(b)
}

// SameMemory reports whether a and b give a container the same memory limit
// (0: none).
func SameMemory(a, b *runtimeapi.LinuxContainerResources) bool {
	return memLimit(a) == memLimit(b)
}

func quota(r *runtimeapi.LinuxContainerResources) int64 {
	if r.GetCpuQuota() <= 0 {
		return 0 // no limit, however the runtime writes it (0 or -1)
	}
	return r.GetCpuQuota()
}

func memLimit(r *runtimeapi.LinuxContainerResources) int64 {
	if r.GetMemoryLimitInBytes() <= 0 {
		return 0
	}
	return r.GetMemoryLimitInBytes()
}

// Below these the runtime's values do not tell the allocation apart
// (upstream's cm.MinMilliCPULimit and cm.MinShares): the quota of a CPU
// limit under 10m is the kernel's minimum, a request under 2m is the
// minimum shares.
const (
	minMilliCPULimit   = 10
	minMilliCPURequest = 2
)

// StatusResources are the resources a container status reports
// (status.containerStatuses[].resources), as upstream's
// convertContainerStatusResources: never nil (a container without
// resources reports an empty one); the allocated resources (c's, every
// resource they name: ephemeral-storage and extended ones too) where the
// container is not running or what it runs with is not known (actual
// nil); for a running one, the values the runtime holds turned back into
// quantities where c names limits (the CPU limit from the quota, unless
// both it and the allocated one are at most 10m; the memory limit as is)
// or requests (the CPU request from the shares, unless both it and the
// allocated one are at most 2m; the memory request stays the allocated
// one, the runtime does not hold it).
func StatusResources(c *v1.Container, actual *runtimeapi.LinuxContainerResources) *v1.ResourceRequirements {
	out := c.Resources.DeepCopy()
	if actual == nil {
		return out
	}
	if out.Limits != nil {
		if milli := quotaToMilli(actual); milli > 0 && (milli > minMilliCPULimit || out.Limits.Cpu().MilliValue() > minMilliCPULimit) {
			out.Limits[v1.ResourceCPU] = *resource.NewMilliQuantity(milli, resource.DecimalSI)
		}
		if m := memLimit(actual); m > 0 {
			out.Limits[v1.ResourceMemory] = *resource.NewQuantity(m, resource.BinarySI)
		}
	}
	if out.Requests != nil {
		if milli := sharesToMilli(actual.GetCpuShares()); milli > 0 && (milli > minMilliCPURequest || out.Requests.Cpu().MilliValue() > minMilliCPURequest) {
			out.Requests[v1.ResourceCPU] = *resource.NewMilliQuantity(milli, resource.DecimalSI)
		}
	}
	return out
}

// quotaToMilli is upstream's QuotaToMilliCPU for a runtime's values: the
// CPU limit a CFS quota stands for, rounded down; 0 without a quota.
func quotaToMilli(r *runtimeapi.LinuxContainerResources) int64 {
	if r.GetCpuPeriod() <= 0 || r.GetCpuQuota() <= 0 {
		return 0
	}
	return r.GetCpuQuota() * milliCPUToCPU / r.GetCpuPeriod()
}

// sharesToMilli is upstream's SharesToMilliCPU: the CPU request the shares
// stand for, rounded up; 0 below the minimum shares.
func sharesToMilli(shares int64) int64 {
	if shares < cpuSharesMin {
		return 0
	}
	return (shares*milliCPUToCPU + 1023) / 1024
}

// ContainerResizePolicy is c's restart policy for resizing a resource:
// NotRequired unless its resizePolicy says RestartContainer.
func ContainerResizePolicy(c *v1.Container, name v1.ResourceName) v1.ResourceResizeRestartPolicy {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == name {
			return p.RestartPolicy
		}
	}
	return v1.NotRequired
}

// ResizeSummary is upstream's summary of a pod's resources in its resize
// events: {"initContainers":[..],"containers":[{"name":..,"resources":{..}}],"generation":N,"error":".."}.
func ResizeSummary(pod *v1.Pod, errMsg string) string {
	type ctr struct {
		Name      string                  `json:"name"`
		Resources v1.ResourceRequirements `json:"resources"`
	}
	s := struct {
		InitContainers []ctr  `json:"initContainers,omitempty"`
		Containers     []ctr  `json:"containers,omitempty"`
		Generation     int64  `json:"generation,omitempty"`
		Error          string `json:"error,omitempty"`
	}{Generation: pod.Generation, Error: errMsg}
	for _, c := range pod.Spec.InitContainers {
		s.InitContainers = append(s.InitContainers, ctr{Name: c.Name, Resources: c.Resources})
	}
	for _, c := range pod.Spec.Containers {
		s.Containers = append(s.Containers, ctr{Name: c.Name, Resources: c.Resources})
	}
	b, _ := json.Marshal(s) // plain values always marshal
	return string(b)
}

// SameResourceLists reports whether a and b hold the same quantities (nil
// and empty are the same).
func SameResourceLists(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if o, ok := b[name]; !ok || q.Cmp(o) != 0 {
			return false
		}
	}
	return true
}
