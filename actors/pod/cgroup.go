package pod

import (
	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/messages"
)

// Pod cgroups (actors/cgroup): before its sandbox, and before any
// container a restarted PodActor creates, the pod asks the CgroupActor for
// its cgroup (EnsurePodCgroup: made with the pod's values, as upstream's
// pod container manager) and gives the parent it answers to the sandbox
// config; containerd puts the sandbox and the containers under it. A
// refusal (a write the kernel refused) is upstream's
// FailedCreatePodContainer event, the containers waiting in
// ContainerCreating with why, and a retry after back-off. Once the pod's
// last container and sandbox are removed, it asks for the cgroup's removal
// (RemovePodCgroup); what that leaves (a kill of the agent meanwhile) the
// CgroupActor's sweep removes.

// ReasonFailedCreatePodContainer is upstream's event reason for a pod
// cgroup that could not be made.
const ReasonFailedCreatePodContainer = "FailedCreatePodContainer"

// cgroupState is the pod's cgroup as the CgroupActor answered: its parent
// once made; asked while the answer is pending; removeSent once the
// removal was asked.
type cgroupState struct {
	parent     string
	asked      bool
	removeSent bool
}

// ready reports whether the sandbox or a container may be created; ask is
// true when the CgroupActor must be asked now (once).
func (c *cgroupState) ready(wired bool) (ready, ask bool) {
	if !wired || c.parent != "" {
		return true, false
	}
	if c.asked {
		return false, false
	}
	c.asked = true
	return false, true
}

// answered records the answer to EnsurePodCgroup; false when none was
// pending (the answer to a ResizePodCgroup).
func (c *cgroupState) answered(m *messages.PodCgroup) bool {
	if !c.asked {
		return false
	}
	c.asked = false
	if m.Err == nil {
		c.parent = m.Parent
	}
	return true
}

// ensureCgroup asks for the pod's cgroup before its sandbox or a new
// container; false while the answer is pending (PodCgroup continues).
func (a *Actor) ensureCgroup(ctx actor.Context) bool {
	ready, ask := a.cgroup.ready(a.d.Cgroups != nil)
	if ask {
		ctx.Send(a.d.Cgroups, &messages.EnsurePodCgroup{Pod: a.pod, ReplyTo: a.self.PID()})
	}
	return ready
}

// handlePodCgroup continues a start that waited for the pod's cgroup. It
// returns false for a PodCgroup that answers no EnsurePodCgroup (a
// ResizePodCgroup's answer, for the resize's handler).
func (a *Actor) handlePodCgroup(ctx actor.Context, m *messages.PodCgroup) bool {
	if m.UID != a.uid || !a.cgroup.answered(m) {
		return false
	}
	if a.kill != nil {
		return true
	}
	if m.Err != nil {
		// The CgroupActor logged it and counted it; the pod shows it.
		msg := "unable to ensure pod container exists: " + m.Err.Error()
		a.event(v1.EventTypeWarning, ReasonFailedCreatePodContainer, "cgroup", "%s", msg)
		a.setupFailed(ctx, ReasonFailedCreatePodContainer, msg)
		return true
	}
	a.setupDone(ctx)
	return true
}

// removeCgroup asks, once, for the pod's cgroup to be removed: its last
// container and sandbox are gone. Nobody waits for the answer: a cgroup
// that is left is the sweep's.
func (a *Actor) removeCgroup(ctx actor.Context) {
	if a.d.Cgroups == nil || a.cgroup.removeSent {
		return
	}
	a.cgroup.removeSent = true
	ctx.Send(a.d.Cgroups, &messages.RemovePodCgroup{UID: a.uid})
}
