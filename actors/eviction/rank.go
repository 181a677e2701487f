package eviction

import (
	"cmp"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/actorlet/actorlet/podspec"
)

// SystemCriticalPriority is the least priority of a critical pod.
const SystemCriticalPriority = podspec.SystemCriticalPriority

// IsCriticalPod reports whether upstream counts the pod as critical
// (podspec.IsCriticalPod: a static or mirror pod, or one of priority
// SystemCriticalPriority and above). Such pods are never evicted, and
// admitted under pressure.
func IsCriticalPod(p *v1.Pod) bool { return podspec.IsCriticalPod(p) }

// statsFunc gives a pod's stats from the Summary.
type statsFunc func(p *v1.Pod) (statsapi.PodStats, bool)

func statsOf(s *statsapi.Summary) statsFunc {
	byUID := map[string]statsapi.PodStats{}
	if s != nil {
		for _, ps := range s.Pods {
			byUID[ps.PodRef.UID] = ps
		}
	}
	return func(p *v1.Pod) (statsapi.PodStats, bool) {
		ps, ok := byUID[string(p.UID)]
		return ps, ok
	}
}

// fsStats are the parts of a pod's disk use a disk signal counts.
type fsStats struct {
	root, logs, localVolumes bool
}

// measured is what a disk signal counts of a pod, as upstream's
// buildSignalToRankFunc: on one filesystem everything; with a dedicated
// image filesystem, nodefs counts logs and local volumes, imagefs the
// containers' writable layers.
func measured(sig Signal, dedicatedImageFs bool) fsStats {
	if !dedicatedImageFs {
		return fsStats{root: true, logs: true, localVolumes: true}
	}
	if sig == SignalImageFsAvailable || sig == SignalImageFsInodesFree {
		return fsStats{root: true}
	}
	return fsStats{logs: true, localVolumes: true}
}

// cmpFunc orders two pods: negative when p1 is to be evicted first.
type cmpFunc func(p1, p2 *v1.Pod) int

// rankPods orders pods for eviction under sig, as upstream: memory: usage
// above requests first, then lower priority, then more usage above
// requests; disk: the same with the disk (or inode) use; pids: lower
// priority, then more processes. Pods without stats come first.
func rankPods(pods []*v1.Pod, sig Signal, stats statsFunc, dedicatedImageFs bool) {
	var cmps []cmpFunc
	switch res := signalResource[sig]; res {
	case v1.ResourceMemory:
		cmps = []cmpFunc{exceedsRequests(stats, memoryUse, v1.ResourceMemory), byPriority, aboveRequests(stats, memoryUse, v1.ResourceMemory)}
	case resourcePids:
		cmps = []cmpFunc{byPriority, byProcesses(stats)}
	default:
		use := diskUse(measured(sig, dedicatedImageFs), res)
		// Upstream subtracts the ephemeral-storage request for inodes too.
		cmps = []cmpFunc{exceedsRequests(stats, use, res), byPriority, aboveRequests(stats, use, v1.ResourceEphemeralStorage)}
	}
	sort.SliceStable(pods, func(i, j int) bool {
		for _, c := range cmps {
			if r := c(pods[i], pods[j]); r != 0 {
				return r < 0
			}
		}
		return false
	})
}

// useFunc is a pod's use of a resource.
type useFunc func(p *v1.Pod, ps statsapi.PodStats) resource.Quantity

func memoryUse(_ *v1.Pod, ps statsapi.PodStats) resource.Quantity {
	if ps.Memory == nil || ps.Memory.WorkingSetBytes == nil {
		return *resource.NewQuantity(0, resource.BinarySI)
	}
	return bytesQ(*ps.Memory.WorkingSetBytes)
}

// diskUse is a pod's disk bytes (or inodes) in the parts measured.
func diskUse(m fsStats, res v1.ResourceName) useFunc {
	return func(p *v1.Pod, ps statsapi.PodStats) resource.Quantity {
		var n uint64
		add := func(fs *statsapi.FsStats) {
			if fs == nil {
				return
			}
			if res == resourceInodes {
				if fs.InodesUsed != nil {
					n += *fs.InodesUsed
				}
			} else if fs.UsedBytes != nil {
				n += *fs.UsedBytes
			}
		}
		for _, c := range ps.Containers {
			if m.root {
				add(c.Rootfs)
			}
			if m.logs {
				add(c.Logs)
			}
		}
		if m.localVolumes {
			local := localVolumes(p)
			for i := range ps.VolumeStats {
				if local[ps.VolumeStats[i].Name] {
					add(&ps.VolumeStats[i].FsStats)
				}
			}
		}
		if res == resourceInodes {
			return *resource.NewQuantity(int64(min(n, 1<<62)), resource.DecimalSI)
		}
		return bytesQ(n)
	}
}

// localVolumes are the pod's volumes on the node's disk: hostPath and the
// local ephemeral ones (emptyDir not in memory, configMap, secret,
// downwardAPI, gitRepo), as upstream's localVolumeNames.
func localVolumes(p *v1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.HostPath != nil,
			v.EmptyDir != nil && v.EmptyDir.Medium != v1.StorageMediumMemory,
			v.ConfigMap != nil, v.Secret != nil, v.DownwardAPI != nil, v.GitRepo != nil: //nolint:staticcheck // gitRepo counts, as upstream
			out[v.Name] = true
		}
	}
	return out
}

// exceedsRequests puts first the pod whose use is above its request.
func exceedsRequests(stats statsFunc, use useFunc, res v1.ResourceName) cmpFunc {
	return byUseOverRequest(stats, use, res, func(u1, r1, u2, r2 resource.Quantity) int {
		return cmpBool(u1.Cmp(r1) > 0, u2.Cmp(r2) > 0)
	})
}

// aboveRequests puts first the pod using more above its request.
func aboveRequests(stats statsFunc, use useFunc, res v1.ResourceName) cmpFunc {
	return byUseOverRequest(stats, use, res, func(u1, r1, u2, r2 resource.Quantity) int {
		u1.Sub(r1)
		u2.Sub(r2)
		return u2.Cmp(u1)
	})
}

// byUseOverRequest compares two pods by f of their use and their request
// of res; a pod without stats goes first.
func byUseOverRequest(stats statsFunc, use useFunc, res v1.ResourceName, f func(u1, r1, u2, r2 resource.Quantity) int) cmpFunc {
	return func(p1, p2 *v1.Pod) int {
		s1, ok1 := stats(p1)
		s2, ok2 := stats(p2)
		if !ok1 || !ok2 {
			return cmpBool(!ok1, !ok2)
		}
		return f(use(p1, s1), podRequest(p1, res), use(p2, s2), podRequest(p2, res))
	}
}

// byPriority puts the lower priority first.
func byPriority(p1, p2 *v1.Pod) int {
	return cmp.Compare(priority(p1), priority(p2))
}

func priority(p *v1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// byProcesses puts first the pod running more processes.
func byProcesses(stats statsFunc) cmpFunc {
	return func(p1, p2 *v1.Pod) int {
		s1, ok1 := stats(p1)
		s2, ok2 := stats(p2)
		if !ok1 || !ok2 {
			return cmpBool(!ok1, !ok2)
		}
		a, b := processes(s1), processes(s2)
		switch {
		case a > b:
			return -1
		case a < b:
			return 1
		}
		return 0
	}
}

func processes(ps statsapi.PodStats) uint64 {
	if ps.ProcessStats == nil || ps.ProcessStats.ProcessCount == nil {
		return 0
	}
	return *ps.ProcessStats.ProcessCount
}

// cmpBool puts true before false.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// podRequest is the pod's effective request of a resource
// (podspec.PodRequest).
func podRequest(p *v1.Pod, name v1.ResourceName) resource.Quantity {
	return podspec.PodRequest(p, name)
}

// Upstream's eviction messages.
const (
	nodeLowMessageFmt       = "The node was low on resource: %v. "
	thresholdMetMessageFmt  = "Threshold quantity: %v, available: %v. "
	containerMessageFmt     = "Container %s was using %s, request is %s, has larger consumption of %v. "
	nodeConditionMessageFmt = "The node had condition: %v. "
)

// evictionMessage is upstream's message for evicting p to reclaim res:
// the resource, the threshold and what is available, and each container
// using more than it requests.
func evictionMessage(res v1.ResourceName, p *v1.Pod, stats statsFunc, met []Threshold, obs observations) string {
	msg := fmt.Sprintf(nodeLowMessageFmt, res)
	for _, t := range met {
		if signalResource[t.Signal] != res {
			continue
		}
		if o, ok := obs[t.Signal]; ok {
			q := t.Value.Of(o.capacity)
			msg += fmt.Sprintf(thresholdMetMessageFmt, &q, &o.available)
			break
		}
	}
	ps, ok := stats(p)
	if !ok {
		return msg
	}
	containers := append(append([]v1.Container{}, p.Spec.Containers...), p.Spec.InitContainers...)
	for _, cs := range ps.Containers {
		for _, c := range containers {
			if c.Name != cs.Name {
				continue
			}
			req := c.Resources.Requests[res]
			var usage *resource.Quantity
			switch res {
			case v1.ResourceEphemeralStorage:
				if cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil && cs.Logs != nil && cs.Logs.UsedBytes != nil {
					q := bytesQ(*cs.Rootfs.UsedBytes + *cs.Logs.UsedBytes)
					usage = &q
				}
			case v1.ResourceMemory:
				if cs.Memory != nil && cs.Memory.WorkingSetBytes != nil {
					q := bytesQ(*cs.Memory.WorkingSetBytes)
					usage = &q
				}
			}
			if usage != nil && usage.Cmp(req) > 0 {
				msg += fmt.Sprintf(containerMessageFmt, c.Name, usage.String(), req.String(), res)
			}
			break
		}
	}
	return msg
}
