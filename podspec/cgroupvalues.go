package podspec

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	v1helper "k8s.io/component-helpers/resource"
)

// The values actorlet writes on the cgroups it owns, as upstream's kubelet
// computes them (pkg/kubelet/cm: ResourceConfigForPod, the QoS container
// manager, the node allocatable cgroup).

// Cgroup value bounds and units, upstream's.
const (
	// MinShares is the least cpu.shares (a BestEffort pod, the besteffort
	// QoS cgroup, a cgroup with no CPU request).
	MinShares = cpuSharesMin
	// MaxShares is the most cpu.shares.
	MaxShares = cpuSharesMax
	// SharesPerCPU is cpu.shares for one CPU.
	SharesPerCPU = 1024
	// MinQuotaPeriod is the least CFS quota, in microseconds.
	MinQuotaPeriod = 1000
	// DefaultCPUCFSQuotaPeriod is the CFS period upstream defaults to
	// (cpuCFSQuotaPeriod).
	DefaultCPUCFSQuotaPeriod = 100 * time.Millisecond
)

// ResourcePIDs is the process IDs as a node resource (upstream's
// pidlimit.PIDs): --system-reserved pid=1000 reserves them, and the
// kubepods cgroup's pids.max is the node's allocatable of it.
const ResourcePIDs v1.ResourceName = "pid"

// MilliCPUToShares is cpu.shares for a CPU request in millicores: 2 for
// none, 1024 per CPU, bounded to [MinShares, MaxShares].
func MilliCPUToShares(milliCPU int64) uint64 {
	if milliCPU == 0 {
		return MinShares
	}
	shares := milliCPU * SharesPerCPU / milliCPUToCPU
	switch {
	case shares < MinShares:
		return MinShares
	case shares > MaxShares:
		return MaxShares
	}
	return uint64(shares)
}

// MilliCPUToQuota is the CFS quota in microseconds per period (in
// microseconds) for a CPU limit in millicores: 0 for none, at least
// MinQuotaPeriod.
func MilliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	quota := milliCPU * period / milliCPUToCPU
	if quota < MinQuotaPeriod {
		return MinQuotaPeriod
	}
	return quota
}

// PodCgroupConfig is what the node's configuration adds to a pod's own
// resources to make its cgroup values.
type PodCgroupConfig struct {
	// CPUCFSQuota enforces CPU limits with a CFS quota (--cpu-cfs-quota);
	// off, the quota is -1 (none).
	CPUCFSQuota bool
	// CPUCFSQuotaPeriod is the CFS period (--cpu-cfs-quota-period; zero:
	// DefaultCPUCFSQuotaPeriod).
	CPUCFSQuotaPeriod time.Duration
	// PodPidsLimit is every pod cgroup's pids.max (--pod-max-pids); 0 or
	// less: not set (the kubepods cgroup bounds them).
	PodPidsLimit int64
}

// PodCgroupValues are the values of the pod's cgroup, as upstream's
// ResourceConfigForPod (PodLevelResources on, MemoryQoS off) plus the pod
// pids limit: cpu.shares from the pod's CPU requests (pod-level resources
// where set, init containers as the scheduler counts them, overhead
// included); the CFS quota and period for a Guaranteed pod and for a
// Burstable one whose every container (or the pod's spec.resources) has a
// CPU limit; the memory limit likewise; a BestEffort pod gets MinShares
// and nothing else. Huge page limits are the pod's huge page requests.
func PodCgroupValues(pod *v1.Pod, cfg PodCgroupConfig) *CgroupResources {
	opts := v1helper.PodResourcesOptions{}
	reqs := v1helper.PodRequests(pod, opts)
	limits := v1helper.PodLimits(pod, opts)

	cpuLimited, memLimited := true, true
	each := func(cs []v1.Container) {
		for i := range cs {
			if cs[i].Resources.Limits.Cpu().IsZero() {
				cpuLimited = false
			}
			if cs[i].Resources.Limits.Memory().IsZero() {
				memLimited = false
			}
		}
	}
	each(pod.Spec.InitContainers)
	each(pod.Spec.Containers)
	if v1helper.IsPodLevelResourcesSet(pod) {
		if !pod.Spec.Resources.Limits.Cpu().IsZero() {
			cpuLimited = true
		}
		if !pod.Spec.Resources.Limits.Memory().IsZero() {
			memLimited = true
		}
	}

	period := cfg.CPUCFSQuotaPeriod
	if period <= 0 {
		period = DefaultCPUCFSQuotaPeriod
	}
	periodUs := uint64(period / time.Microsecond)
	var cpuReq, cpuLim, memLim int64
	if q, ok := reqs[v1.ResourceCPU]; ok {
		cpuReq = q.MilliValue()
	}
	if q, ok := limits[v1.ResourceCPU]; ok {
		cpuLim = q.MilliValue()
	}
	if q, ok := limits[v1.ResourceMemory]; ok {
		memLim = q.Value()
	}
	shares := MilliCPUToShares(cpuReq)
	quota := MilliCPUToQuota(cpuLim, int64(periodUs))
	if !cfg.CPUCFSQuota {
		quota = -1
	}

	r := &CgroupResources{}
	switch QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		r.CPUShares, r.CPUQuota, r.CPUPeriod, r.Memory = &shares, &quota, &periodUs, &memLim
	case v1.PodQOSBurstable:
		r.CPUShares = &shares
		if cpuLimited {
			r.CPUQuota, r.CPUPeriod = &quota, &periodUs
		}
		if memLimited {
			r.Memory = &memLim
		}
	default:
		min := uint64(MinShares)
		r.CPUShares = &min
	}
	r.HugePageLimit = HugePageLimits(reqs)
	if cfg.PodPidsLimit > 0 {
		pids := cfg.PodPidsLimit
		r.PidsLimit = &pids
	}
	return r
}

// HugePageLimits are the huge page amounts of rl (hugepages-<size>) in
// bytes by page size in bytes; nil when there are none.
func HugePageLimits(rl v1.ResourceList) map[int64]int64 {
	var out map[int64]int64
	for name, q := range rl {
		size, ok := hugePageSize(name)
		if !ok {
			continue
		}
		if out == nil {
			out = map[int64]int64{}
		}
		out[size] += q.Value()
	}
	return out
}

// QOSCgroupValues are the values of the burstable and besteffort QoS
// cgroups for the node's active pods, as upstream's QoS container manager:
// burstable's cpu.shares from the sum of its pods' CPU requests,
// besteffort's MinShares.
func QOSCgroupValues(active []*v1.Pod) (burstable, besteffort *CgroupResources) {
	var milli int64
	for _, p := range active {
		if QOSClass(p) != v1.PodQOSBurstable {
			continue
		}
		if q, ok := v1helper.PodRequests(p, v1helper.PodResourcesOptions{})[v1.ResourceCPU]; ok {
			milli += q.MilliValue()
		}
	}
	b, be := MilliCPUToShares(milli), uint64(MinShares)
	return &CgroupResources{CPUShares: &b}, &CgroupResources{CPUShares: &be}
}

// NodeAllocatableAbsolute is capacity minus the system- and kube-reserved
// amounts, none below zero: what upstream sizes the kubepods cgroup to
// when enforceNodeAllocatable has "pods" (the hard eviction thresholds are
// not subtracted from the cgroup: they are for the scheduler's
// allocatable, and the eviction manager acts before the cgroup limit).
func NodeAllocatableAbsolute(capacity, systemReserved, kubeReserved v1.ResourceList) v1.ResourceList {
	out := make(v1.ResourceList, len(capacity))
	for name, q := range capacity {
		v := q.DeepCopy()
		if r, ok := systemReserved[name]; ok {
			v.Sub(r)
		}
		if r, ok := kubeReserved[name]; ok {
			v.Sub(r)
		}
		if v.Sign() < 0 {
			v.Set(0)
		}
		out[name] = v
	}
	return out
}

// KubepodsCgroupValues are the kubepods cgroup's values: from the
// capacity (cpu, memory, pid, huge pages) or, when enforcePods (node
// allocatable enforced on pods), from NodeAllocatableAbsolute, as
// upstream's node allocatable cgroup: cpu.shares, memory limit, pids
// limit, huge page limits.
func KubepodsCgroupValues(capacity, systemReserved, kubeReserved v1.ResourceList, enforcePods bool) *CgroupResources {
	rl := capacity
	if enforcePods {
		rl = NodeAllocatableAbsolute(capacity, systemReserved, kubeReserved)
	}
	return ReservedCgroupValues(rl, false)
}

// ReservedCgroupValues are the values enforced on a cgroup sized by rl (a
// reserved cgroup: --system-reserved on --system-reserved-cgroup,
// --kube-reserved on --kube-reserved-cgroup): cpu.shares from cpu and,
// unless compressibleOnly (the *-reserved-compressible enforcement), the
// memory limit, the pids limit and the huge page limits. nil rl: nil.
func ReservedCgroupValues(rl v1.ResourceList, compressibleOnly bool) *CgroupResources {
	if rl == nil {
		return nil
	}
	r := &CgroupResources{}
	if q, ok := rl[v1.ResourceCPU]; ok {
		s := MilliCPUToShares(q.MilliValue())
		r.CPUShares = &s
	}
	if compressibleOnly {
		return r
	}
	if q, ok := rl[v1.ResourceMemory]; ok {
		m := q.Value()
		r.Memory = &m
	}
	if q, ok := rl[ResourcePIDs]; ok {
		p := q.Value()
		r.PidsLimit = &p
	}
	r.HugePageLimit = HugePageLimits(rl)
	return r
}

// hugePageSize is the page size in bytes of a hugepages-<size> resource.
func hugePageSize(name v1.ResourceName) (int64, bool) {
	s, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
	if !ok {
		return 0, false
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 {
		return 0, false
	}
	return q.Value(), true
}
