package node

import (
	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/messages"
)

// unprepareClaims tells the ClaimsActor a terminated pod's ResourceClaims
// may be unprepared (only for pods that have any).
func (a *Actor) unprepareClaims(ctx actor.Context, e *entry) {
	if a.cfg.Claims != nil && e.pod != nil && (len(e.pod.Spec.ResourceClaims) > 0 || e.pod.Status.ExtendedResourceClaimStatus != nil) {
		ctx.Send(a.cfg.Claims, &messages.UnprepareClaims{UID: e.pod.UID})
	}
}

// withoutDRAExtended is the pod without the extended resources its
// containers get through DRA (pod.status.extendedResourceClaimStatus's
// request mappings): the scheduler allocated those as a ResourceClaim, so
// admission does not count them against the node's allocatable, as
// upstream's removeMissingExtendedResources. The pod itself when it has
// none (no copy).
func withoutDRAExtended(p *v1.Pod) *v1.Pod {
	s := p.Status.ExtendedResourceClaimStatus
	if s == nil || len(s.RequestMappings) == 0 {
		return p
	}
	out := p.DeepCopy()
	for _, cs := range [][]v1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range cs {
			for _, rm := range s.RequestMappings {
				if rm.ContainerName != cs[i].Name {
					continue
				}
				delete(cs[i].Resources.Requests, v1.ResourceName(rm.ResourceName))
				delete(cs[i].Resources.Limits, v1.ResourceName(rm.ResourceName))
			}
		}
	}
	return out
}
