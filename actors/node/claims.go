package node

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlet/actorlet/messages"
)

// unprepareClaims tells the ClaimsActor a terminated pod's ResourceClaims
// may be unprepared (only for pods that have any).
func (a *Actor) unprepareClaims(ctx actor.Context, e *entry) {
	if a.cfg.Claims != nil && e.pod != nil && (len(e.pod.Spec.ResourceClaims) > 0 || e.pod.Status.ExtendedResourceClaimStatus != nil) {
		ctx.Send(a.cfg.Claims, &messages.UnprepareClaims{UID: e.pod.UID})
	}
}
