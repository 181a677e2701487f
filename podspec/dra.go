package podspec

import v1 "k8s.io/api/core/v1"

// WithoutDRAExtended is the pod without the extended resources its
// containers get through DRA (pod.status.extendedResourceClaimStatus's
// request mappings): the scheduler allocated those as a ResourceClaim, so
// admission does not count them against the node's allocatable (upstream's
// removeMissingExtendedResources) and the device plugins do not allocate
// them (upstream's device manager). The pod itself when it has none (no
// copy); otherwise a copy, p unchanged.
func WithoutDRAExtended(p *v1.Pod) *v1.Pod {
	s := p.Status.ExtendedResourceClaimStatus
	if s == nil || len(s.RequestMappings) == 0 {
		return p
	}
	out := p.DeepCopy()
	for _, cs := range [][]v1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range cs {
			for _, rm := range s.RequestMappings {
				if rm.ContainerName == cs[i].Name {
					delete(cs[i].Resources.Requests, v1.ResourceName(rm.ResourceName))
					delete(cs[i].Resources.Limits, v1.ResourceName(rm.ResourceName))
				}
			}
		}
	}
	return out
}
