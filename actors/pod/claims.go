package pod

import (
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/messages"
)

// claimState is the pod's ResourceClaims as the ClaimsActor prepared them
// (Dynamic Resource Allocation): the CDI device IDs of each container once
// answered; asked while the answer is pending. As upstream, the claims are
// prepared before the sandbox is created; the ClaimsActor answers the same
// devices to every incarnation (it checkpoints them). health is the last
// ClaimsHealth, put into the container statuses.
type claimState struct {
	containers map[string][]string
	asked      bool
	health     map[string][]v1.ResourceStatus
	// unprepAsked: UnprepareClaims sent once the pod stopped; released:
	// answered (the final status may go out).
	unprepAsked, released bool
}

// usesClaims reports whether the pod has ResourceClaims to prepare.
func usesClaims(p *v1.Pod) bool {
	return len(p.Spec.ResourceClaims) > 0 || p.Status.ExtendedResourceClaimStatus != nil
}

// ready reports whether the sandbox and containers may be created; ask is
// true when the ClaimsActor must be asked now (once).
func (c *claimState) ready(wired, wanted bool) (ready, ask bool) {
	if !wired || !wanted || c.containers != nil {
		return true, false
	}
	if c.asked {
		return false, false
	}
	c.asked = true
	return false, true
}

// answered records the ClaimsActor's answer; false when none was pending.
func (c *claimState) answered(m *messages.ClaimsPrepared) bool {
	if !c.asked {
		return false
	}
	c.asked = false
	if m.Reason == "" {
		c.containers = m.Containers
		if c.containers == nil {
			c.containers = map[string][]string{}
		}
	}
	return true
}

// applyClaims adds a container's CDI devices from its claims to its CRI
// config (after the device plugins' ones; a name given twice once).
func applyClaims(cfg *runtimeapi.ContainerConfig, ids []string) {
	for _, id := range ids {
		if !slices.ContainsFunc(cfg.CDIDevices, func(d *runtimeapi.CDIDevice) bool { return d.GetName() == id }) {
			cfg.CDIDevices = append(cfg.CDIDevices, &runtimeapi.CDIDevice{Name: id})
		}
	}
}

// applyHealth puts the health of the containers' claimed devices into
// their statuses (upstream's allocatedResourcesStatus).
func (c *claimState) applyHealth(st *v1.PodStatus) {
	if len(c.health) == 0 {
		return
	}
	for i := range st.ContainerStatuses {
		if h, ok := c.health[st.ContainerStatuses[i].Name]; ok {
			st.ContainerStatuses[i].AllocatedResourcesStatus = h
		}
	}
}

// handleClaimsPrepared continues a start that waited for the pod's claims;
// a failure is upstream's FailedPrepareDynamicResources event and a retry
// with back-off, the pod waiting in ContainerCreating.
func (a *Actor) handleClaimsPrepared(ctx actor.Context, m *messages.ClaimsPrepared) {
	if a.kill != nil || m.UID != a.uid || !a.claims.answered(m) {
		return
	}
	if m.Reason != "" {
		a.event(v1.EventTypeWarning, m.Reason, "claims", "Failed to prepare dynamic resources: %s", m.Message)
		a.setupFailed(ctx, m.Reason, m.Message)
		return
	}
	a.setupDone(ctx)
}

// handleClaimsHealth takes the health of the pod's claimed devices and
// publishes the status again.
func (a *Actor) handleClaimsHealth(ctx actor.Context, m *messages.ClaimsHealth) {
	if m.UID != a.uid {
		return
	}
	a.claims.health = m.Containers
	a.kick(ctx)
}

// claimsReleased reports whether a pod being killed may publish its final
// status: its claims are unprepared first, as upstream's
// syncTerminatingPod (after the containers stopped, before the status is
// final), so that no device is handed to another pod while its driver
// still has it prepared. A driver that fails keeps the pod terminating
// while the ClaimsActor retries.
func (a *Actor) claimsReleased(ctx actor.Context) bool {
	if a.d.Claims == nil || a.pod == nil || !usesClaims(a.pod) || a.claims.released {
		return true
	}
	if !a.claims.unprepAsked {
		a.claims.unprepAsked = true
		ctx.Send(a.d.Claims, &messages.UnprepareClaims{UID: a.uid, ReplyTo: a.self.PID()})
	}
	return false
}

// handleClaimsUnprepared lets a pod being killed finish.
func (a *Actor) handleClaimsUnprepared(ctx actor.Context, m *messages.ClaimsUnprepared) {
	if m.UID != a.uid || a.claims.released {
		return
	}
	a.claims.released = true
	a.kick(ctx)
}
