package status

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// ownConditions are the pod conditions the node writes, as upstream's
// PodConditionsByKubelet; DisruptionTarget is shared (ours where we set it).
var ownConditions = map[v1.PodConditionType]bool{
	v1.PodScheduled: true, v1.PodReady: true, v1.PodInitialized: true,
	v1.ContainersReady: true, v1.PodReadyToStartContainers: true,
	v1.PodResizePending: true, v1.PodResizeInProgress: true, // in-place resize (actors/pod resize.go)
}

// merged is the status to write: desired with the conditions the node does
// not own (readiness gates' conditions, set by others) kept as the API
// server holds them, as upstream's mergePodStatus; without them a patch
// would delete them.
func merged(desired, api *v1.PodStatus) *v1.PodStatus {
	if desired == nil || api == nil {
		return desired
	}
	if notOwnedDiffer(desired, api) {
		out := *desired
		out.ResourceClaimStatuses = api.ResourceClaimStatuses
		out.ExtendedResourceClaimStatus = api.ExtendedResourceClaimStatus
		out.NodeAllocatableResourceClaimStatuses = api.NodeAllocatableResourceClaimStatuses
		desired = &out
	}
	var kept []v1.PodCondition
	for _, c := range api.Conditions {
		if ownConditions[c.Type] || (c.Type == v1.DisruptionTarget && hasCondition(desired, c.Type)) {
			continue
		}
		if !hasCondition(desired, c.Type) {
			kept = append(kept, c)
		}
	}
	if len(kept) == 0 {
		return desired
	}
	out := *desired // read only: a shallow copy with its own conditions
	out.Conditions = append(kept, desired.Conditions...)
	return &out
}

func hasCondition(s *v1.PodStatus, t v1.PodConditionType) bool {
	for _, c := range s.Conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}

// sameStatus: a and b say the same, conditions in any order (a patch
// keeps the order the API server holds them in).
func sameStatus(a, b *v1.PodStatus) bool {
	return apiequality.Semantic.DeepEqual(*byType(a), *byType(b))
}

func byType(s *v1.PodStatus) *v1.PodStatus {
	if len(s.Conditions) < 2 {
		return s
	}
	out := *s
	out.Conditions = append([]v1.PodCondition(nil), s.Conditions...)
	sort.SliceStable(out.Conditions, func(i, j int) bool { return out.Conditions[i].Type < out.Conditions[j].Type })
	return &out
}

// notOwnedDiffer: the fields the kubelet does not own (the claim statuses
// kube-controller-manager writes) differ; NodeRestriction refuses a node's
// patch that changes them.
func notOwnedDiffer(a, b *v1.PodStatus) bool {
	return !apiequality.Semantic.DeepEqual(a.ResourceClaimStatuses, b.ResourceClaimStatuses) ||
		!apiequality.Semantic.DeepEqual(a.ExtendedResourceClaimStatus, b.ExtendedResourceClaimStatus) ||
		!apiequality.Semantic.DeepEqual(a.NodeAllocatableResourceClaimStatuses, b.NodeAllocatableResourceClaimStatuses)
}
