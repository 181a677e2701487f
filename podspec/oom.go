package podspec

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// OOM score adjustments, as upstream's pkg/kubelet/qos: the kernel adds
// the adjustment (-1000..1000) to a process's OOM score (its share of
// memory times 10), so that under memory pressure BestEffort containers go
// first, Burstable ones by how little memory they requested, Guaranteed
// and node-critical ones last. (The pause container gets -998 from the
// runtime; the agent sets none for the sandbox, as upstream.)
const (
	GuaranteedOOMScoreAdj = -997
	BestEffortOOMScoreAdj = 1000
	// SystemNodeCritical is the priority class of a node-critical pod.
	SystemNodeCritical = "system-node-critical"
)

// IsNodeCriticalPod is upstream's kubelettypes.IsNodeCriticalPod: a
// critical pod of the system-node-critical priority class.
func IsNodeCriticalPod(p *v1.Pod) bool {
	return IsCriticalPod(p) && p.Spec.PriorityClassName == SystemNodeCritical
}

// ContainerOOMScoreAdjust is the oom_score_adj of c's processes in pod
// (with its allocated resources) on a machine of memoryCapacity bytes (the
// node's memory capacity, not its allocatable), as upstream's
// GetContainerOOMScoreAdjust:
//
//   - node-critical and Guaranteed pods: -997; BestEffort: 1000;
//   - Burstable: 1000 - 1000*request/capacity, where request is the
//     container's memory request plus, when the pod sets a pod-level
//     memory request, an equal share (over all containers, init ones too)
//     of what the pod requests beyond its containers; a sidecar's is never
//     above that of the regular container requesting least; the result is
//     kept within [3, 999] (above any Guaranteed container, below
//     BestEffort).
//
// An unknown capacity (0) counts every request as negligible (999 for a
// Burstable container).
func ContainerOOMScoreAdjust(pod *v1.Pod, c *v1.Container, memoryCapacity int64) int64 {
	if IsNodeCriticalPod(pod) {
		return GuaranteedOOMScoreAdj
	}
	switch QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		return GuaranteedOOMScoreAdj
	case v1.PodQOSBestEffort:
		return BestEffortOOMScoreAdj
	}
	adj := func(request int64) int64 {
		if memoryCapacity <= 0 {
			return BestEffortOOMScoreAdj
		}
		return 1000 - 1000*request/memoryCapacity
	}
	share := podMemoryShare(pod)
	score := adj(c.Resources.Requests.Memory().Value() + share)
	if isSidecarOf(pod, c) && len(pod.Spec.Containers) > 0 {
		least := pod.Spec.Containers[0].Resources.Requests.Memory().Value()
		for i := 1; i < len(pod.Spec.Containers); i++ {
			least = min(least, pod.Spec.Containers[i].Resources.Requests.Memory().Value())
		}
		score = min(score, adj(least+share))
	}
	return min(max(score, 1000+GuaranteedOOMScoreAdj), BestEffortOOMScoreAdj-1)
}

// podMemoryShare is each container's share of the pod-level memory
// request its containers do not request themselves (upstream's
// remainingPodMemReqPerContainer); 0 without a pod-level memory request.
func podMemoryShare(pod *v1.Pod) int64 {
	if !resourcehelper.IsPodLevelRequestsSet(pod) || pod.Spec.Resources.Requests.Memory().IsZero() {
		return 0
	}
	n := int64(len(pod.Spec.Containers) + len(pod.Spec.InitContainers))
	ctrs := resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{})
	rest := max(pod.Spec.Resources.Requests.Memory().Value()-ctrs.Memory().Value(), 0)
	return rest / n
}

// isSidecarOf: c is one of pod's init containers and restarts always.
func isSidecarOf(pod *v1.Pod, c *v1.Container) bool {
	if !IsSidecar(c) {
		return false
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			return true
		}
	}
	return false
}
