package pod

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/fakecri"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// fakeCgroups answers the CgroupActor's ResizePodCgroup and records each
// as "<resource>@<UpdateContainerResources calls before it>", so a test
// sees the order of the pod cgroup and the containers.
type fakeCgroups struct {
	rt  *fakecri.Runtime
	mu  sync.Mutex
	log []string
	// creates is the CreateContainer count at each ResizePodCgroup.
	creates []int
	err     error // answered when set
}

func (f *fakeCgroups) receive(c actor.Context) {
	if m, ok := c.Message().(*messages.EnsurePodCgroup); ok {
		c.Send(m.ReplyTo, &messages.PodCgroup{UID: m.Pod.UID, Parent: "/kubepods/pod" + string(m.Pod.UID)})
		return
	}
	if m, ok := c.Message().(*messages.ResizePodCgroup); ok {
		f.mu.Lock()
		f.creates = append(f.creates, f.rt.Count("CreateContainer"))
		for _, r := range m.Resources {
			f.log = append(f.log, fmt.Sprintf("%s@%d", r, f.rt.Count("UpdateContainerResources")))
		}
		err := f.err
		f.mu.Unlock()
		c.Respond(&messages.PodCgroup{UID: m.Pod.UID, Err: err})
	}
}

func (f *fakeCgroups) calls() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.log, ",")
}

// eventRec records the events of a pod as "<type> <reason> <message>".
type eventRec struct {
	mu  sync.Mutex
	evs []string
}

func (r *eventRec) Eventf(_ runtime.Object, eventtype, reason, format string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, eventtype+" "+reason+" "+fmt.Sprintf(format, args...))
}

func (r *eventRec) with(reason string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.evs {
		if strings.Contains(e, " "+reason+" ") {
			out = append(out, e)
		}
	}
	return out
}

// resizeMetrics counts IncPodResize.
type resizeMetrics struct {
	mu sync.Mutex
	n  map[string]int
}

func (m *resizeMetrics) ObservePodStart(time.Duration) {}
func (m *resizeMetrics) IncStartedContainers(string)   {}
func (m *resizeMetrics) IncPodResize(result string)    { m.mu.Lock(); m.n[result]++; m.mu.Unlock() }
func (m *resizeMetrics) count(result string) (n int) {
	m.mu.Lock()
	n = m.n[result]
	m.mu.Unlock()
	return
}
func newResizeMetrics() *resizeMetrics { return &resizeMetrics{n: map[string]int{}} }
func (h *resizeHarness) syncPod(p *v1.Pod) {
	h.sys.Root.Send(h.childPID(), &messages.SyncPod{Pod: p.DeepCopy()})
}
func (h *resizeHarness) pending(m *messages.PodResizePending) { h.sys.Root.Send(h.childPID(), m) }

type resizeHarness struct {
	*harness
	cg      *fakeCgroups
	events  *eventRec
	metrics *resizeMetrics
}

// newResizeHarness runs pod with a fake CgroupActor, an event recorder and
// resize metrics; adjust may change the runtime first.
func newResizeHarness(t *testing.T, pod *v1.Pod, adjust func(*fakecri.Runtime)) *resizeHarness {
	t.Helper()
	rh := &resizeHarness{events: &eventRec{}, metrics: newResizeMetrics()}
	rh.harness = newHarnessSys(t, pod, func(sys *actor.ActorSystem, d *Deps) {
		rt := d.Runtime.(*fakecri.Runtime)
		if adjust != nil {
			adjust(rt)
		}
		rh.cg = &fakeCgroups{rt: rt}
		d.Cgroups = sys.Root.Spawn(actor.PropsFromFunc(rh.cg.receive))
		d.Events = rh.events
		d.Metrics = rh.metrics
	})
	return rh
}

func res(cpuReq, cpuLim, memReq, memLim string) v1.ResourceRequirements {
	r := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
	add := func(l v1.ResourceList, name v1.ResourceName, q string) {
		if q != "" {
			l[name] = resource.MustParse(q)
		}
	}
	add(r.Requests, v1.ResourceCPU, cpuReq)
	add(r.Limits, v1.ResourceCPU, cpuLim)
	add(r.Requests, v1.ResourceMemory, memReq)
	add(r.Limits, v1.ResourceMemory, memLim)
	return r
}

// resizePod is a burstable pod of one container "app" with resources r.
func resizePod(r v1.ResourceRequirements, policy ...v1.ContainerResizePolicy) *v1.Pod {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Generation = 1
	p.Spec.Containers[0].Resources = r
	p.Spec.Containers[0].ResizePolicy = policy
	return p
}

// resized is p at the next generation with the container's resources r.
func resized(p *v1.Pod, r v1.ResourceRequirements) *v1.Pod {
	out := p.DeepCopy()
	out.Generation++
	out.Spec.Containers[0].Resources = r
	return out
}

func condOf(st *v1.PodStatus, t v1.PodConditionType) *v1.PodCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// matches: the app container runs with what the status reports as r, its
// allocated requests are r's and no resize is in progress.
func matches(r v1.ResourceRequirements) func(*v1.PodStatus) bool {
	return func(st *v1.PodStatus) bool {
		if !running(st) || condOf(st, v1.PodResizeInProgress) != nil || len(st.ContainerStatuses) != 1 {
			return false
		}
		cs := st.ContainerStatuses[0]
		return cs.Resources != nil && podspec.SameResourceLists(cs.Resources.Requests, r.Requests) &&
			podspec.SameResourceLists(cs.Resources.Limits, r.Limits) && podspec.SameResourceLists(cs.AllocatedResources, r.Requests)
	}
}

func (h *resizeHarness) appID() string {
	for _, c := range h.rt.Containers() {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING && c.GetMetadata().GetName() == "app" {
			return c.Id
		}
	}
	return ""
}

func (h *resizeHarness) appResources() *runtimeapi.LinuxContainerResources {
	for _, c := range h.rt.Containers() {
		if c.Id == h.appID() {
			return c.GetResources().GetLinux()
		}
	}
	return nil
}

// A resize of CPU and memory up is applied in place: memory then CPU, the
// pod cgroup raised before the container, no restart, the status shows
// the new resources, ResizeCompleted is recorded and counted.
func TestResizeInPlaceUp(t *testing.T) {
	before := res("100m", "200m", "64Mi", "128Mi")
	pod := resizePod(before)
	h := newResizeHarness(t, pod, nil)
	h.waitStatus("running with its resources", matches(before))
	id := h.appID()

	after := res("200m", "400m", "64Mi", "256Mi")
	h.syncPod(resized(pod, after))
	st := h.waitStatus("resized", matches(after))
	if h.appID() != id || st.ContainerStatuses[0].RestartCount != 0 || h.rt.Count("StopContainer") != 0 {
		t.Fatalf("container restarted: %s -> %s, restarts %d", id, h.appID(), st.ContainerStatuses[0].RestartCount)
	}
	ups := h.rt.Updates()
	if len(ups) != 2 || ups[0].Resources.MemoryLimitInBytes != 256<<20 || ups[1].Resources.CpuQuota != 40000 || ups[1].Resources.CpuShares != 204 {
		t.Fatalf("updates %+v, want memory 256Mi then cpu (shares 204, quota 40000)", ups)
	}
	if got := h.cg.calls(); got != "memory@0,cpu@1" {
		t.Fatalf("pod cgroup resized %q, want memory then cpu, each before the container's update", got)
	}
	if r := h.appResources(); r.GetCpuShares() != 204 || r.GetMemoryLimitInBytes() != 256<<20 {
		t.Fatalf("runtime holds %+v", r)
	}
	h.waitFor("ResizeCompleted", func() bool { return len(h.events.with(EventResizeCompleted)) == 1 && h.metrics.count("completed") == 1 })
}

// A resize down lowers the container before the pod cgroup.
func TestResizeInPlaceDown(t *testing.T) {
	before := res("400m", "800m", "64Mi", "256Mi")
	pod := resizePod(before)
	h := newResizeHarness(t, pod, nil)
	h.waitStatus("running", matches(before))
	after := res("200m", "400m", "64Mi", "128Mi")
	h.syncPod(resized(pod, after))
	h.waitStatus("resized", matches(after))
	if got := h.cg.calls(); got != "memory@1,cpu@2" {
		t.Fatalf("pod cgroup resized %q, want each after the container's update", got)
	}
	if h.rt.Count("StopContainer") != 0 {
		t.Fatal("container stopped")
	}
}

// Of two containers, the one whose limit falls is updated first.
func TestResizeDecreasesFirst(t *testing.T) {
	pod := resizePod(res("100m", "", "", "128Mi"))
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "side", Image: "busybox:1", Resources: res("100m", "", "", "256Mi")})
	h := newResizeHarness(t, pod, nil)
	h.waitStatus("running", func(st *v1.PodStatus) bool { return running(st) && len(st.ContainerStatuses) == 2 })
	p2 := pod.DeepCopy()
	p2.Generation++
	p2.Spec.Containers[0].Resources = res("100m", "", "", "256Mi")
	p2.Spec.Containers[1].Resources = res("100m", "", "", "128Mi")
	h.syncPod(p2)
	h.waitFor("two updates and the pod cgroup", func() bool {
		return h.rt.Count("UpdateContainerResources") == 2 && h.cg.calls() != ""
	})
	ups := h.rt.Updates()
	if ups[0].Name != "side" || ups[1].Name != "app" {
		t.Fatalf("updated %s then %s, want the decrease (side) first", ups[0].Name, ups[1].Name)
	}
	if got := h.cg.calls(); got != "memory@2" {
		t.Fatalf("pod cgroup %q: the pod's limit is unchanged, set after", got)
	}
}

// A memory limit below the current usage is refused as upstream, shown in
// PodResizeInProgress (Error) and retried; once the usage is lower it is
// applied. Nothing is restarted.
func TestResizeMemoryBelowUsage(t *testing.T) {
	before := res("100m", "", "64Mi", "256Mi")
	pod := resizePod(before)
	h := newResizeHarness(t, pod, func(rt *fakecri.Runtime) { rt.SetMemoryUsage("app", 200<<20) })
	h.waitStatus("running", matches(before))
	after := res("100m", "", "64Mi", "128Mi")
	h.syncPod(resized(pod, after))
	// The pod's limit (its only container's) falls too: both are named,
	// as upstream's aggregate.
	want := `cannot decrease memory limits: [attempting to set pod memory limit (134217728) below current usage (209715200), ` +
		`attempting to set container "app" memory limit (134217728) below current usage (209715200)]`
	st := h.waitStatus("resize error", func(st *v1.PodStatus) bool {
		c := condOf(st, v1.PodResizeInProgress)
		return c != nil && c.Reason == v1.PodReasonError && c.Message == want
	})
	if c := condOf(st, v1.PodResizeInProgress); c.ObservedGeneration != 2 {
		t.Fatalf("condition generation %d, want 2", c.ObservedGeneration)
	}
	if n := h.rt.Count("UpdateContainerResources"); n != 0 {
		t.Fatalf("%d updates despite the usage", n)
	}
	if h.cg.calls() != "" {
		t.Fatalf("pod cgroup resized: %s", h.cg.calls())
	}
	if evs := h.events.with(EventResizeError); len(evs) != 1 || !strings.Contains(evs[0], "below current usage (209715200)") {
		t.Fatalf("events %q", evs)
	}
	if h.metrics.count("error") != 1 {
		t.Fatalf("error metric %d", h.metrics.count("error"))
	}
	// Retried after back-off, the same error counts once.
	h.clk.Step(time.Minute)
	h.waitFor("a retry", func() bool { return h.rt.Count("ContainerStats") >= 2 })
	h.settle()
	if h.metrics.count("error") != 1 {
		t.Fatalf("the same error counted %d times", h.metrics.count("error"))
	}

	h.rt.SetMemoryUsage("app", 100<<20)
	h.clk.Step(time.Minute)
	h.waitStatus("resized once the usage fell", matches(after))
	if h.rt.Count("StopContainer") != 0 {
		t.Fatal("container stopped")
	}
}

// A runtime that refuses UpdateContainerResources: event, condition
// message, metric, and a retry that succeeds once it accepts.
func TestResizeRuntimeRefuses(t *testing.T) {
	before := res("100m", "200m", "", "")
	pod := resizePod(before)
	h := newResizeHarness(t, pod, nil)
	h.waitStatus("running", matches(before))
	h.rt.InjectAlways("UpdateContainerResources", errdefs.Wrap(errdefs.ErrUnknown, errors.New("cgroup write: device or resource busy")))
	after := res("300m", "600m", "", "")
	h.syncPod(resized(pod, after))
	h.waitStatus("resize error", func(st *v1.PodStatus) bool {
		c := condOf(st, v1.PodResizeInProgress)
		return c != nil && c.Reason == v1.PodReasonError && strings.Contains(c.Message, "device or resource busy") &&
			strings.Contains(c.Message, `update cpu of container "app"`)
	})
	if len(h.events.with(EventResizeError)) != 1 || h.metrics.count("error") != 1 {
		t.Fatalf("events %q, metric %d", h.events.with(EventResizeError), h.metrics.count("error"))
	}
	h.rt.InjectAlways("UpdateContainerResources", nil)
	h.clk.Step(time.Minute)
	st := h.waitStatus("resized", matches(after))
	if st.ContainerStatuses[0].RestartCount != 0 || h.rt.Count("StopContainer") != 0 {
		t.Fatal("container restarted")
	}
}

// A container whose resizePolicy restarts it for memory is restarted once,
// with the new resources; a CPU-only change of the same container is
// applied in place.
func TestResizeRestartContainerPolicy(t *testing.T) {
	before := res("100m", "", "64Mi", "128Mi")
	pod := resizePod(before, v1.ContainerResizePolicy{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer})
	h := newResizeHarness(t, pod, nil)
	h.waitStatus("running", matches(before))
	id := h.appID()

	mem := res("100m", "", "64Mi", "256Mi")
	p2 := resized(pod, mem)
	h.syncPod(p2)
	h.waitStatus("restarted with the new memory", func(st *v1.PodStatus) bool {
		return matches(mem)(st) && st.ContainerStatuses[0].RestartCount == 1
	})
	if h.appID() == id || h.rt.Count("UpdateContainerResources") != 0 {
		t.Fatalf("not restarted: %s, %d updates", h.appID(), h.rt.Count("UpdateContainerResources"))
	}
	if r := h.appResources(); r.GetMemoryLimitInBytes() != 256<<20 {
		t.Fatalf("new container created with %+v", r)
	}
	// The pod cgroup took the new memory (and CPU) before the new
	// container was made, as upstream resizes the pod's resources first.
	h.cg.mu.Lock()
	calls, creates := strings.Join(h.cg.log, ","), append([]int(nil), h.cg.creates...)
	h.cg.mu.Unlock()
	if calls != "memory@0,cpu@0" || len(creates) != 1 || creates[0] != 1 {
		t.Fatalf("pod cgroup resized %q at CreateContainer counts %v, want memory and cpu after the first create only", calls, creates)
	}
	h.settle()
	if st := h.latest(); st.ContainerStatuses[0].RestartCount != 1 {
		t.Fatalf("restarted again: %d", st.ContainerStatuses[0].RestartCount)
	}

	cpu := res("300m", "", "64Mi", "256Mi")
	h.syncPod(resized(p2, cpu))
	h.waitStatus("cpu in place", matches(cpu))
	if st := h.latest(); st.ContainerStatuses[0].RestartCount != 1 || h.rt.Count("UpdateContainerResources") != 1 {
		t.Fatalf("restarts %d, updates %d", st.ContainerStatuses[0].RestartCount, h.rt.Count("UpdateContainerResources"))
	}
}

// The NodeActor's PodResizePending shows as the condition, and goes.
func TestResizePendingCondition(t *testing.T) {
	before := res("100m", "", "", "")
	pod := resizePod(before)
	h := newResizeHarness(t, pod, nil)
	h.waitStatus("running", matches(before))
	msg := "Node didn't have enough resource: cpu, requested: 3000, used: 2000, capacity: 4000"
	h.pending(&messages.PodResizePending{UID: pod.UID, Generation: 2, Reason: messages.ResizeDeferred, Message: msg})
	h.waitStatus("pending", func(st *v1.PodStatus) bool {
		c := condOf(st, v1.PodResizePending)
		return c != nil && c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonDeferred && c.Message == msg && c.ObservedGeneration == 2
	})
	h.pending(&messages.PodResizePending{UID: pod.UID, Generation: 2})
	h.waitStatus("no longer pending", func(st *v1.PodStatus) bool { return condOf(st, v1.PodResizePending) == nil })
}

// A restarted PodActor neither applies a resize again nor loses one: it
// reads what the containers run with from the runtime.
func TestResizeSurvivesActorRestart(t *testing.T) {
	before := res("100m", "200m", "", "")
	pod := resizePod(before)
	h := newResizeHarness(t, pod, nil)
	h.waitStatus("running", matches(before))
	after := res("200m", "400m", "", "")
	h.syncPod(resized(pod, after))
	h.waitStatus("resized", matches(after))
	n := h.rt.Count("UpdateContainerResources")

	// The parent now answers NeedPod with the resized pod.
	*pod = *resized(pod, after)
	h.send(&messages.ChaosPanic{Reason: "test"})
	h.waitFor("NeedPod after restart", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.needPods > 0
	})
	h.settle()
	h.waitStatus("resized after restart", matches(after))
	if got := h.rt.Count("UpdateContainerResources"); got != n {
		t.Fatalf("updates %d -> %d: the restarted actor applied the resize again", n, got)
	}

	// A resize allocated while the actor was down is applied by the next.
	later := res("300m", "600m", "", "")
	h.rt.InjectAlways("UpdateContainerResources", errdefs.Wrap(errdefs.ErrUnknown, errors.New("busy")))
	h.syncPod(resized(pod, later))
	h.waitFor("the failed try", func() bool { return h.rt.Count("UpdateContainerResources") > n })
	h.rt.InjectAlways("UpdateContainerResources", nil)
	*pod = *resized(pod, later)
	h.send(&messages.ChaosPanic{Reason: "test"})
	h.clk.Step(time.Minute)
	h.waitStatus("resized by the restarted actor", matches(later))
}

// A runtime that does not report resources: what the container was
// created with (its annotation), then what was applied, stand for it.
func TestResizeRuntimeWithoutReports(t *testing.T) {
	before := res("100m", "200m", "", "")
	pod := resizePod(before)
	h := newResizeHarness(t, pod, func(rt *fakecri.Runtime) { rt.HideResources(true) })
	h.waitStatus("running", matches(before))
	after := res("200m", "400m", "", "")
	h.syncPod(resized(pod, after))
	h.waitStatus("resized", matches(after))
	h.settle()
	if n := h.rt.Count("UpdateContainerResources"); n != 1 {
		t.Fatalf("%d updates, want 1", n)
	}
}

// A running container whose hash annotation is the one an agent before
// in-place resize wrote (the whole spec) is adopted, not restarted.
func TestLegacyHashIsNotRestarted(t *testing.T) {
	pod := resizePod(res("100m", "", "", ""))
	h := newResizeHarness(t, pod, nil)
	h.waitStatus("running", running)
	id := h.appID()
	h.rt.UpdateContainer(id, func(st *runtimeapi.ContainerStatus) {
		st.Annotations[podspec.AnnotationContainerHash] = podspec.LegacyContainerHash(&pod.Spec.Containers[0])
	})
	h.send(&messages.ChaosPanic{Reason: "test"})
	h.waitFor("NeedPod after restart", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.needPods > 0
	})
	h.settle()
	h.settle()
	if h.rt.Count("StopContainer") != 0 || h.appID() != id {
		t.Fatal("a container of the old agent was restarted")
	}
	// Resized, it keeps its old hash: still the same spec.
	after := res("200m", "", "", "")
	h.syncPod(resized(pod, after))
	h.waitStatus("resized in place", matches(after))
	if h.rt.Count("StopContainer") != 0 || h.appID() != id {
		t.Fatal("a container of the old agent was restarted by a resize")
	}
}

// A sidecar is resized like a regular container: in place, or restarted
// once when its resizePolicy says so.
func TestResizeSidecar(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := resizePod(res("100m", "", "", ""))
	pod.Spec.InitContainers = []v1.Container{{Name: "side", Image: "busybox:1", RestartPolicy: &always,
		Resources:    res("100m", "", "64Mi", "128Mi"),
		ResizePolicy: []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}}}
	h := newResizeHarness(t, pod, nil)
	sideOK := func(r v1.ResourceRequirements, restarts int32) func(*v1.PodStatus) bool {
		return func(st *v1.PodStatus) bool {
			if !running(st) || len(st.InitContainerStatuses) != 1 || condOf(st, v1.PodResizeInProgress) != nil {
				return false
			}
			cs := st.InitContainerStatuses[0]
			return cs.State.Running != nil && cs.RestartCount == restarts && cs.Resources != nil &&
				podspec.SameResourceLists(cs.Resources.Requests, r.Requests) && podspec.SameResourceLists(cs.Resources.Limits, r.Limits)
		}
	}
	h.waitStatus("running", sideOK(pod.Spec.InitContainers[0].Resources, 0))

	p2 := pod.DeepCopy()
	p2.Generation++
	p2.Spec.InitContainers[0].Resources = res("300m", "", "64Mi", "128Mi")
	h.syncPod(p2)
	h.waitStatus("sidecar cpu in place", sideOK(p2.Spec.InitContainers[0].Resources, 0))
	if ups := h.rt.Updates(); len(ups) != 1 || ups[0].Name != "side" {
		t.Fatalf("updates %+v, want one of side", ups)
	}

	p3 := p2.DeepCopy()
	p3.Generation++
	p3.Spec.InitContainers[0].Resources = res("300m", "", "64Mi", "256Mi")
	h.syncPod(p3)
	h.waitStatus("sidecar restarted with the new memory", sideOK(p3.Spec.InitContainers[0].Resources, 1))
	if n := h.rt.Count("UpdateContainerResources"); n != 1 {
		t.Fatalf("%d updates: the memory was applied in place, not by the restart", n)
	}
	if st := h.latest(); st.ContainerStatuses[0].RestartCount != 0 {
		t.Fatal("the app container restarted")
	}
}
