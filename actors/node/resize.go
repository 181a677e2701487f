package node

import (
	"fmt"
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// In-place pod resize, the NodeActor's part (upstream's allocation manager
// and its resize admission): each admitted pod has allocated resources,
// those it was admitted with or last resized to, kept in a checkpoint
// (allocation.go). Admission counts a pod's allocated requests; its
// PodActor is sent the pod with its containers' resources as allocated.
// When the API asks for other resources (a resize), they are checked:
//
//   - Infeasible (never retried): a QoS class change, a change of a
//     non-restartable init container's or of the pod-level resources (not
//     resized in place by actorlet), or requests beyond the node's
//     allocatable; upstream's static CPU and memory manager and swap cases
//     do not arise (actorlet has neither manager nor swap);
//   - Deferred (retried whenever pods leave or shrink, the resizes that
//     do not grow first, then by priority, then the oldest): requests that
//     do not fit beside the other pods' allocated requests;
//   - else the new resources are the allocation (checkpointed) and the
//     PodActor applies them.
//
// The PodActor is told why a resize waits (messages.PodResizePending) and
// shows the PodResizePending condition; events ResizeDeferred,
// ResizeInfeasible and ResizeStarted are recorded as upstream's.

// Resize events, as upstream.
const (
	EventResizeDeferred   = "ResizeDeferred"
	EventResizeInfeasible = "ResizeInfeasible"
	EventResizeStarted    = "ResizeStarted"
)

// ResizeMetrics is counted when the NodeActor's Metrics has it: one per
// resize decided ("allocated", "deferred", "infeasible").
type ResizeMetrics interface {
	IncPodResize(result string)
}

// resizes is the NodeActor's resize part: the pods whose resize waits.
type resizes struct {
	// pending by pod: the API's pod (what is asked) and why it waits.
	pending map[types.UID]*pendingResize
	seq     uint64 // deferral order
}

type pendingResize struct {
	desired *v1.Pod
	reason  string
	message string
	seq     uint64 // when it was first deferred
}

// resizeUpdate takes a new API pod p of an admitted entry (its share
// untracked by the caller) and returns the pod the entry holds: p with
// its resources as allocated, after the resize check when p asks for
// other ones. The PodActor is told of a change of the pending state.
func (a *Actor) resizeUpdate(ctx actor.Context, e *entry, p *v1.Pod) *v1.Pod {
	rec := a.allocs.get(p.UID)
	if rec == nil {
		a.allocs.set(p, a.cfg.log)
		a.setPending(ctx, e, p, "", "")
		return p
	}
	if rec.matches(p) {
		a.setPending(ctx, e, p, "", "")
		return p
	}
	allocated := rec.apply(p)
	reason, msg := a.checkResize(p, allocated)
	if reason == "" {
		a.allocs.set(p, a.cfg.log)
		a.setPending(ctx, e, p, "", "")
		a.cfg.log.Info("pod resize allocated", "pod", p.Namespace+"/"+p.Name, "generation", p.Generation)
		a.resizeEvent(p, v1.EventTypeNormal, EventResizeStarted, "Pod resize started: %s", resizeSummary(p, ""))
		a.resizeMetric("allocated")
		return p
	}
	a.setPending(ctx, e, p, reason, msg)
	return allocated
}

// checkResize says why desired cannot have its resources now (reason
// messages.ResizeInfeasible or ResizeDeferred); "" when it can. The pod's
// own share is not counted in a.admitted (the caller took it out).
func (a *Actor) checkResize(desired, allocated *v1.Pod) (reason, msg string) {
	if name, ok := otherResourceChanged(desired, allocated); ok {
		// The API server refuses it ("only cpu and memory resources are
		// mutable"); a pod of another source is told the same.
		return messages.ResizeInfeasible, fmt.Sprintf("only cpu and memory resources are mutable: %s of container %q changed", name.res, name.ctr)
	}
	if podspec.QOSClass(desired) != podspec.QOSClass(allocated) {
		return messages.ResizeInfeasible, "Pod QOS Class may not change as a result of resizing"
	}
	for i := range desired.Spec.InitContainers {
		c := &desired.Spec.InitContainers[i]
		if podspec.IsSidecar(c) || i >= len(allocated.Spec.InitContainers) {
			continue
		}
		if !equality.Semantic.DeepEqual(c.Resources, allocated.Spec.InitContainers[i].Resources) {
			return messages.ResizeInfeasible, fmt.Sprintf("Resize is infeasible for non-restartable init container %q", c.Name)
		}
	}
	if !equality.Semantic.DeepEqual(desired.Spec.Resources, allocated.Spec.Resources) {
		// Pod-level resources are not resized in place here: upstream's
		// message for a node that cannot.
		return messages.ResizeInfeasible, "In-place pod-level resources resize is not supported on this node"
	}
	for _, name := range admittedResources {
		capacity, ok := a.cfg.Allocatable[name]
		if !ok {
			continue
		}
		if want := podRequest(desired, name); want.Cmp(capacity) > 0 {
			return messages.ResizeInfeasible, fmt.Sprintf("Node didn't have enough capacity: %s, requested: %d, capacity: %d",
				name, quantityValue(name, want), quantityValue(name, capacity))
		}
	}
	if _, msg := a.admitted.fits(desired, 0, a.cfg.Allocatable); msg != "" {
		return messages.ResizeDeferred, msg
	}
	return "", ""
}

// setPending records why p's resize waits (reason "": it does not) and
// tells the PodActor when that changed.
func (a *Actor) setPending(ctx actor.Context, e *entry, p *v1.Pod, reason, msg string) {
	prev := a.resizes.pending[p.UID]
	if reason == "" {
		if prev == nil {
			return
		}
		delete(a.resizes.pending, p.UID)
		ctx.Send(e.pid, &messages.PodResizePending{UID: p.UID, Generation: p.Generation})
		return
	}
	if prev != nil && prev.reason == reason && prev.message == msg && prev.desired.Generation == p.Generation {
		prev.desired = p
		return
	}
	if a.resizes.pending == nil {
		a.resizes.pending = map[types.UID]*pendingResize{}
	}
	pr := &pendingResize{desired: p, reason: reason, message: msg}
	if prev != nil && prev.reason == messages.ResizeDeferred {
		pr.seq = prev.seq
	} else {
		a.resizes.seq++
		pr.seq = a.resizes.seq
	}
	a.resizes.pending[p.UID] = pr
	event := EventResizeDeferred
	if reason == messages.ResizeInfeasible {
		event = EventResizeInfeasible
	}
	a.cfg.log.Info("pod resize pending", "pod", p.Namespace+"/"+p.Name, "reason", reason, "message", msg)
	a.resizeEvent(p, v1.EventTypeWarning, event, "Pod resize %s: %s", reason, resizeSummary(p, msg))
	a.resizeMetric(strings.ToLower(reason))
	ctx.Send(e.pid, &messages.PodResizePending{UID: p.UID, Generation: p.Generation, Reason: reason, Message: msg})
}

// sendPending tells a (new or restarted) PodActor whether its resize waits.
func (a *Actor) sendPending(ctx actor.Context, uid types.UID, e *entry) {
	if pr := a.resizes.pending[uid]; pr != nil {
		ctx.Send(e.pid, &messages.PodResizePending{UID: uid, Generation: pr.desired.Generation, Reason: pr.reason, Message: pr.message})
	}
}

// retryResizes checks the deferred resizes again (room may have been
// made): those that do not grow first, then by priority, then the oldest.
func (a *Actor) retryResizes(ctx actor.Context) {
	var uids []types.UID
	for uid, pr := range a.resizes.pending {
		e, ok := a.table.get(uid)
		switch {
		case !ok || !e.admitted():
			delete(a.resizes.pending, uid)
		case pr.reason == messages.ResizeDeferred:
			uids = append(uids, uid)
		}
	}
	if len(uids) == 0 {
		return
	}
	grows := func(uid types.UID) bool {
		e, _ := a.table.get(uid)
		d := a.resizes.pending[uid].desired
		for _, name := range admittedResources {
			want, have := podRequest(d, name), podRequest(e.pod, name)
			if want.Cmp(have) > 0 {
				return true
			}
		}
		return false
	}
	prio := func(uid types.UID) int32 {
		if p := a.resizes.pending[uid].desired.Spec.Priority; p != nil {
			return *p
		}
		return 0
	}
	slices.SortFunc(uids, func(x, y types.UID) int {
		gx, gy := grows(x), grows(y)
		switch {
		case gx != gy && !gx:
			return -1
		case gx != gy:
			return 1
		case prio(x) != prio(y):
			return int(prio(y)) - int(prio(x))
		}
		return int(a.resizes.pending[x].seq) - int(a.resizes.pending[y].seq)
	})
	for _, uid := range uids {
		e, _ := a.table.get(uid)
		pr := a.resizes.pending[uid]
		a.track(e, -1)
		before := e.pod
		e.pod = a.resizeUpdate(ctx, e, pr.desired)
		a.track(e, 1)
		if e.pod != before {
			ctx.Send(e.pid, &messages.SyncPod{Pod: e.pod})
		}
	}
}

func (a *Actor) resizeEvent(p *v1.Pod, eventtype, reason, format string, args ...any) {
	if a.cfg.Events != nil {
		a.cfg.Events.Eventf(p, eventtype, reason, format, args...)
	}
}

func (a *Actor) resizeMetric(result string) {
	if m, ok := a.cfg.metrics.(ResizeMetrics); ok {
		m.IncPodResize(result)
	}
}

// resizeSummary is upstream's summary of a pod's resources in resize
// events: {"containers":[{"name":..,"resources":{..}}],"generation":N,"error":".."}.
func resizeSummary(pod *v1.Pod, errMsg string) string {
	return podspec.ResizeSummary(pod, errMsg)
}

type changedResource struct {
	ctr string
	res v1.ResourceName
}

// otherResourceChanged is the first resource other than cpu and memory
// whose request or limit differs between the pods' containers.
func otherResourceChanged(a, b *v1.Pod) (changedResource, bool) {
	byName := map[string]*v1.Container{}
	for _, list := range [][]v1.Container{b.Spec.InitContainers, b.Spec.Containers} {
		for i := range list {
			byName[list[i].Name] = &list[i]
		}
	}
	for _, list := range [][]v1.Container{a.Spec.InitContainers, a.Spec.Containers} {
		for i := range list {
			o := byName[list[i].Name]
			if o == nil {
				continue
			}
			for _, pair := range [][2]v1.ResourceList{{list[i].Resources.Requests, o.Resources.Requests}, {list[i].Resources.Limits, o.Resources.Limits}} {
				for _, name := range resourceNames(pair[0], pair[1]) {
					if name == v1.ResourceCPU || name == v1.ResourceMemory {
						continue
					}
					x, y := pair[0][name], pair[1][name]
					if x.Cmp(y) != 0 {
						return changedResource{ctr: list[i].Name, res: name}, true
					}
				}
			}
		}
	}
	return changedResource{}, false
}

// resourceNames are the names of a and b, sorted.
func resourceNames(a, b v1.ResourceList) []v1.ResourceName {
	var out []v1.ResourceName
	for n := range a {
		out = append(out, n)
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
