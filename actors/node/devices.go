package node

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// Extended resources (nvidia.com/gpu, a device plugin's resources): the
// DevicesActor tells their allocatable (healthy devices) in
// DeviceCapacity, and the NodeActor admits against it as against cpu and
// memory (OutOf<resource>, upstream's predicate admit handler, with the
// allocatable the device manager reports). Which devices a pod gets is the
// DevicesActor's business, asked by the PodActor before its containers
// are created.
//
// Until the DevicesActor has reported every built-in provider's devices
// (DeviceCapacity.Ready), a pod that asks for extended resources waits
// (held, still wanted by its source, so never taken for an orphan): a GPU
// pod that was running before a restart must not be rejected because the
// GPUs were not counted yet. Other pods are admitted at once. The wait is
// bounded (DeviceWait): a DevicesActor that cannot answer does not stop
// the node.

// DefaultDeviceWait bounds the wait for the DevicesActor's first capacity.
const DefaultDeviceWait = 10 * time.Second

// heldPod is a pod waiting for the devices' first capacity.
type heldPod struct {
	uid    types.UID
	source string
}

// deviceWait is the device-wait part of the NodeActor: whether the
// devices are counted (a Ready capacity came, or the wait ended), the pods
// that ask for extended resources held meanwhile, and the bounded wait.
type deviceWait struct {
	ready bool
	held  []heldPod // pods waiting for ready, in the order they came
	timer actorkit.Timer
}

// hold keeps a pod that asks for extended resources while the devices are
// not counted; true when held (once per UID).
func (w *deviceWait) hold(p *v1.Pod, source string) bool {
	if w.ready || len(extendedNames(p)) == 0 {
		return false
	}
	for _, h := range w.held {
		if h.uid == p.UID {
			return true
		}
	}
	w.held = append(w.held, heldPod{uid: p.UID, source: source})
	return true
}

// end ends the wait: the pods held, in order; ended false when it had
// ended before.
func (w *deviceWait) end() (held []heldPod, ended bool) {
	if w.ready {
		return nil, false
	}
	w.ready = true
	w.timer.Stop()
	held, w.held = w.held, nil
	return held, true
}

// extendedNames are the extended resources the pod asks for, sorted.
func extendedNames(p *v1.Pod) []v1.ResourceName { return podspec.ExtendedResources(p) }

// extendedRequest is the pod's effective request of an extended resource
// (limits stand for requests when only they are set, as API defaulting).
func extendedRequest(p *v1.Pod, name v1.ResourceName) resource.Quantity {
	q := podRequest(p, name)
	if !q.IsZero() {
		return q
	}
	withLimits := p.DeepCopy()
	for _, cs := range [][]v1.Container{withLimits.Spec.InitContainers, withLimits.Spec.Containers} {
		for i := range cs {
			if l, ok := cs[i].Resources.Limits[name]; ok {
				if cs[i].Resources.Requests == nil {
					cs[i].Resources.Requests = v1.ResourceList{}
				}
				cs[i].Resources.Requests[name] = l
			}
		}
	}
	return podRequest(withLimits, name)
}

// startDevices asks the DevicesActor for its capacity (a restarted
// NodeActor is not told again otherwise) and arms the bounded wait.
func (a *Actor) startDevices(ctx actor.Context) {
	a.devWait = deviceWait{timer: actorkit.NewTimer("devices")}
	if !a.cfg.devicesWired() {
		a.devWait.ready = true
		return
	}
	ctx.Send(a.cfg.Devices, &messages.GetDeviceCapacity{ReplyTo: a.self.PID()})
	a.devWait.timer.Arm(a.self, a.cfg.DeviceWait)
}

// handleDeviceCapacity records the extended resources' allocatable and,
// on the first ready one, admits the updates held meanwhile.
func (a *Actor) handleDeviceCapacity(ctx actor.Context, m *messages.DeviceCapacity) {
	a.node.setDevices(m)
	if m.Ready {
		a.devicesReady(ctx, "")
	}
}

// devicesReady ends the wait (why: "" when the DevicesActor answered).
func (a *Actor) devicesReady(ctx actor.Context, why string) {
	held, ended := a.devWait.end()
	if !ended {
		return
	}
	if why != "" {
		a.cfg.log.Warn("admitting pods without the device capacity", "why", why)
	}
	var pods []*v1.Pod
	sources := map[types.UID]string{}
	for _, h := range held {
		if p, ok := a.sources.wants(h.source, h.uid); ok {
			pods = append(pods, p)
			sources[h.uid] = h.source
		}
	}
	for _, p := range admissionOrder(pods) {
		a.upsert(ctx, p, sources[p.UID])
	}
	a.reportDesired()
}

// handleDevicesFired ends the bounded wait; false when m is not its timer.
func (a *Actor) handleDevicesFired(ctx actor.Context, m *actorkit.Fired) bool {
	if !a.devWait.timer.Fired(a.self, m) {
		return false
	}
	a.devicesReady(ctx, fmt.Sprintf("the devices actor did not report its devices within %s", a.cfg.DeviceWait))
	return true
}

// fitsDevices checks the pod's extended resources against the
// allocatable the DevicesActor reported, when one is wired.
func (a *Actor) fitsDevices(p *v1.Pod) (reason, msg string) {
	if !a.cfg.devicesWired() {
		return "", ""
	}
	return a.admitted.fitsExtended(p, a.node.allocatable)
}

// releaseDevices tells the DevicesActor a terminated pod's devices are
// free (only for pods that asked for any: no message per pod otherwise).
func (a *Actor) releaseDevices(ctx actor.Context, e *entry) {
	if a.cfg.devicesWired() && e.pod != nil && len(extendedNames(e.pod)) > 0 {
		ctx.Send(a.cfg.Devices, &messages.ReleaseDevices{UID: e.pod.UID})
	}
}
