package node

import (
	"fmt"
	"maps"
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

// deviceState is the NodeActor's view of the extended resources.
type deviceState struct {
	allocatable map[v1.ResourceName]int64
	// labels are the node's labels with the devices' (GPU feature
	// discovery's, which the Node object carries in cluster mode) under
	// --node-labels: what node selectors and affinity match. Nil: the
	// configured ones alone.
	labels map[string]string
	ready  bool      // a Ready capacity came, or the wait ended
	held   []heldPod // pods waiting for ready, in the order they came
	wait   actorkit.Timer
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

// nodeLabels are the labels pods' node selectors and affinity match.
func (a *Actor) nodeLabels() map[string]string {
	if a.dev.labels != nil {
		return a.dev.labels
	}
	return a.cfg.NodeLabels
}

// devicesWired: a DevicesActor counts the extended resources.
func (a *Actor) devicesWired() bool { return a.cfg.Devices != nil }

// startDevices asks the DevicesActor for its capacity (a restarted
// NodeActor is not told again otherwise) and arms the bounded wait.
func (a *Actor) startDevices(ctx actor.Context) {
	a.dev = deviceState{wait: actorkit.NewTimer("devices")}
	if !a.devicesWired() {
		a.dev.ready = true
		return
	}
	ctx.Send(a.cfg.Devices, &messages.GetDeviceCapacity{ReplyTo: a.self.PID()})
	a.dev.wait.Arm(a.self, a.cfg.DeviceWait)
}

// holdForDevices keeps a pod that asks for extended resources while the
// devices are not counted; true when held.
func (a *Actor) holdForDevices(p *v1.Pod, source string) bool {
	if a.dev.ready || len(extendedNames(p)) == 0 {
		return false
	}
	for _, h := range a.dev.held {
		if h.uid == p.UID {
			return true
		}
	}
	a.dev.held = append(a.dev.held, heldPod{uid: p.UID, source: source})
	return true
}

// handleDeviceCapacity records the extended resources' allocatable and,
// on the first ready one, admits the updates held meanwhile.
func (a *Actor) handleDeviceCapacity(ctx actor.Context, m *messages.DeviceCapacity) {
	a.dev.allocatable = m.Allocatable
	a.dev.labels = nil
	if len(m.Labels) > 0 {
		a.dev.labels = maps.Clone(m.Labels)
		maps.Copy(a.dev.labels, a.cfg.NodeLabels) // --node-labels win, as on the Node
	}
	if m.Ready {
		a.devicesReady(ctx, "")
	}
}

// devicesReady ends the wait (why: "" when the DevicesActor answered).
func (a *Actor) devicesReady(ctx actor.Context, why string) {
	if a.dev.ready {
		return
	}
	if why != "" {
		a.log.Warn("admitting pods without the device capacity", "why", why)
	}
	a.dev.ready = true
	a.dev.wait.Stop()
	var pods []*v1.Pod
	sources := map[types.UID]string{}
	for _, h := range a.dev.held {
		if p, ok := a.sources[h.source][h.uid]; ok {
			pods = append(pods, p)
			sources[h.uid] = h.source
		}
	}
	a.dev.held = nil
	for _, p := range admissionOrder(pods) {
		a.upsert(ctx, p, sources[p.UID])
	}
	a.reportDesired()
}

// handleDevicesFired ends the bounded wait; false when m is not its timer.
func (a *Actor) handleDevicesFired(ctx actor.Context, m *actorkit.Fired) bool {
	if !a.dev.wait.Fired(a.self, m) {
		return false
	}
	a.devicesReady(ctx, fmt.Sprintf("the devices actor did not report its devices within %s", a.cfg.DeviceWait))
	return true
}

// fitsDevices checks the pod's extended resources against the
// allocatable the DevicesActor reported (a resource it does not know has
// none), as the CPU and memory in fits.
func (a *Actor) fitsDevices(p *v1.Pod) (reason, msg string) {
	if !a.devicesWired() {
		return "", ""
	}
	for _, name := range extendedNames(p) {
		want := extendedRequest(p, name)
		if want.IsZero() {
			continue
		}
		used := a.extUsed[name]
		capacity := a.dev.allocatable[name]
		if used+want.Value() > capacity {
			return "OutOf" + string(name), fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
				name, want.Value(), used, capacity)
		}
	}
	return "", ""
}

// trackDevices adds (sign 1) or removes (-1) the pod's extended requests.
func (a *Actor) trackDevices(p *v1.Pod, sign int) {
	if !a.devicesWired() {
		return
	}
	for _, name := range extendedNames(p) {
		q := extendedRequest(p, name)
		if a.extUsed == nil {
			a.extUsed = map[v1.ResourceName]int64{}
		}
		a.extUsed[name] += int64(sign) * q.Value()
		if a.extUsed[name] <= 0 {
			delete(a.extUsed, name)
		}
	}
}

// releaseDevices tells the DevicesActor a terminated pod's devices are
// free (only for pods that asked for any: no message per pod otherwise).
func (a *Actor) releaseDevices(ctx actor.Context, e *entry) {
	if a.devicesWired() && e.pod != nil && len(extendedNames(e.pod)) > 0 {
		ctx.Send(a.cfg.Devices, &messages.ReleaseDevices{UID: e.pod.UID})
	}
}
