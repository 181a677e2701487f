package status

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/messages"
)

// refusingAPI is fakeAPI with a rule that refuses some patches, and a gate
// that lets patches through one at a time.
type refusingAPI struct {
	*fakeAPI
	mu     sync.Mutex
	refuse func(name string, st *v1.PodStatus, held *v1.Pod) error
	gate   chan struct{}
	order  []string // patches taken, in order
}

func (r *refusingAPI) PatchPodStatus(ctx context.Context, ns, name string, uid types.UID, old, st *v1.PodStatus) (*v1.Pod, error) {
	if r.gate != nil {
		<-r.gate
	}
	r.mu.Lock()
	rule := r.refuse
	r.mu.Unlock()
	if rule != nil {
		if held := r.get(name); held != nil {
			if err := rule(name, st, held); err != nil {
				_ = r.record("patch " + name + " refused")
				return nil, err
			}
		}
	}
	p, err := r.fakeAPI.PatchPodStatus(ctx, ns, name, uid, old, st)
	if err == nil {
		r.mu.Lock()
		r.order = append(r.order, name)
		r.mu.Unlock()
	}
	return p, err
}

func (r *refusingAPI) setRule(f func(string, *v1.PodStatus, *v1.Pod) error) {
	r.mu.Lock()
	r.refuse = f
	r.mu.Unlock()
}

func (r *refusingAPI) taken() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.order)
}

// The errors kube.Client returns: the API server's status error, classed.
func invalidErr(name, path, msg string) error {
	e := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, name, field.ErrorList{field.Invalid(field.NewPath("status").Child(path), "x", msg)})
	return errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("patch status of pod default/%s: %w", name, e))
}

func forbiddenErr(name, msg string) error {
	e := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, name, fmt.Errorf("%s", msg))
	return errdefs.Wrap(errdefs.ErrForbidden, e)
}

type fakeMetrics struct {
	mu         sync.Mutex
	refused    map[string]int
	terminated map[string]int
}

func newFakeMetrics() *fakeMetrics {
	return &fakeMetrics{refused: map[string]int{}, terminated: map[string]int{}}
}

func (m *fakeMetrics) IncPodStatusRefused(reason string) {
	m.mu.Lock()
	m.refused[reason]++
	m.mu.Unlock()
}

func (m *fakeMetrics) IncTerminatedContainers(ctype, code, reason string) {
	m.mu.Lock()
	m.terminated[ctype+"/"+code+"/"+reason]++
	m.mu.Unlock()
}

func (m *fakeMetrics) get(which map[string]int, k string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return which[k]
}

func (m *fakeMetrics) ObservePodStatusSync(time.Duration) {}

type fakeRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *fakeRecorder) Eventf(obj runtime.Object, typ, reason, format string, args ...interface{}) {
	p := obj.(*v1.Pod)
	r.mu.Lock()
	r.events = append(r.events, fmt.Sprintf("%s %s %s %s %s", p.Name, p.UID, typ, reason, fmt.Sprintf(format, args...)))
	r.mu.Unlock()
}

func (r *fakeRecorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

type rharness struct {
	*wharness
	api *refusingAPI
	m   *fakeMetrics
	rec *fakeRecorder
}

func newRefusalHarness(t *testing.T, cfg WriterConfig) *rharness {
	h := &rharness{
		wharness: &wharness{t: t, sys: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet })),
			api: newFakeAPI(), clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))},
		m: newFakeMetrics(), rec: &fakeRecorder{},
	}
	h.api = &refusingAPI{fakeAPI: h.wharness.api}
	h.pid = h.sys.Root.Spawn(actor.PropsFromProducer(NewWithAPI(nil, h.api, cfg, h.clk, quiet, WithMetrics(h.m), WithEvents(h.rec))))
	t.Cleanup(func() { h.sys.Root.Stop(h.pid) })
	return h
}

// sync waits until the actor handled everything sent before.
func (h *rharness) sync() []*v1.Pod {
	res, err := h.sys.Root.RequestFuture(h.pid, &messages.GetPods{}, time.Second).Result()
	if err != nil {
		h.t.Fatal(err)
	}
	return res.(*messages.PodList).Items
}

func refusedCond(ps []*v1.Pod, name string) *v1.PodCondition {
	for _, p := range ps {
		if p.Name != name {
			continue
		}
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == ConditionStatusRefused {
				return &p.Status.Conditions[i]
			}
		}
	}
	return nil
}

// A status the API server refuses (a 403 of an admission policy here) is
// re-read once, then logged, an event, counted and shown in /pods once,
// retried only after a back-off, and cleared when a write is taken.
func TestWriterRefusedStatusIsReportedOnceAndBackedOff(t *testing.T) {
	h := newRefusalHarness(t, WriterConfig{RetryBase: time.Second, RetryMax: 4 * time.Second, RefusedRetryMax: 8 * time.Second})
	h.api.pods["default/a"] = apiPodWith("a", "uid-a", v1.PodPending)
	const denial = `ValidatingAdmissionPolicy 'deny-marked' with binding 'deny-marked' denied request: marked pod`
	h.api.setRule(func(name string, _ *v1.PodStatus, _ *v1.Pod) error { return forbiddenErr(name, denial) })
	h.update(apiPodWith("a", "uid-a", v1.PodRunning))
	h.waitFor("a refusal counted", func() bool { return h.m.get(h.m.refused, "Forbidden") == 1 })
	// patch, re-read, patch again: then nothing until the back-off ends.
	calls := h.api.snapshotCalls()
	if want := []string{"patch a refused", "get a", "patch a refused"}; !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	ps := h.sync()
	c := refusedCond(ps, "a")
	if c == nil || c.Reason != "Forbidden" || !strings.Contains(c.Message, denial) || !strings.Contains(c.Message, "403") {
		t.Fatalf("/pods condition %+v", c)
	}
	ev := h.rec.list()
	if len(ev) != 1 || !strings.Contains(ev[0], "a uid-a Warning FailedStatusUpdate") || !strings.Contains(ev[0], denial) {
		t.Fatalf("events %v", ev)
	}
	// A newer status waits for the back-off too: no spin.
	p := apiPodWith("a", "uid-a", v1.PodRunning)
	p.Status.Message = "newer"
	h.update(p)
	h.sync()
	if n := len(h.api.snapshotCalls()); n != 3 {
		t.Fatalf("wrote during the back-off: %v", h.api.snapshotCalls())
	}
	// The back-off ends: one more try, refused again, counted, no new
	// event.
	h.waitFor("retry armed", h.clk.HasWaiters)
	h.clk.Step(time.Second)
	h.waitFor("second refusal", func() bool { return h.m.get(h.m.refused, "Forbidden") == 2 })
	if calls := h.api.snapshotCalls(); calls[len(calls)-1] != "patch a refused" || len(calls) != 4 {
		t.Fatalf("retry was not one patch: %v", calls)
	}
	if len(h.rec.list()) != 1 {
		t.Fatalf("event repeated: %v", h.rec.list())
	}
	// The policy goes: the next try is taken and the condition leaves /pods.
	h.api.setRule(nil)
	h.waitFor("retry armed", h.clk.HasWaiters)
	h.clk.Step(2 * time.Second)
	h.waitFor("written", func() bool { return h.api.get("a").Status.Message == "newer" })
	h.waitFor("condition gone", func() bool { return refusedCond(h.sync(), "a") == nil })
}

// A 422 that names a field is reported with it; a write of a field that
// may not change (qosClass) is fixed by the re-read and merge, and is no
// refusal at all.
func TestWriterInvalidNamesTheFieldAndMergeFixesImmutable(t *testing.T) {
	h := newRefusalHarness(t, WriterConfig{RetryBase: time.Second})
	held := apiPodWith("q", "uid-q", v1.PodPending)
	held.Status.QOSClass = v1.PodQOSGuaranteed
	h.api.pods["default/q"] = held
	h.api.pods["default/r"] = apiPodWith("r", "uid-r", v1.PodPending)
	h.api.setRule(func(name string, st *v1.PodStatus, held *v1.Pod) error {
		switch {
		case held.Status.QOSClass != "" && st.QOSClass != held.Status.QOSClass:
			return invalidErr(name, "qosClass", "field is immutable")
		case name == "r":
			return invalidErr(name, "podIPs", "may not be changed once set")
		}
		return nil
	})
	q := apiPodWith("q", "uid-q", v1.PodRunning)
	q.Status.QOSClass = v1.PodQOSBestEffort
	h.update(q)
	h.waitFor("q written", func() bool { return h.api.get("q").Status.Phase == v1.PodRunning })
	if got := h.api.get("q").Status.QOSClass; got != v1.PodQOSGuaranteed {
		t.Fatalf("qosClass %q", got)
	}
	h.update(apiPodWith("r", "uid-r", v1.PodRunning))
	h.waitFor("r refused", func() bool { return h.m.get(h.m.refused, "Invalid") == 1 })
	c := refusedCond(h.sync(), "r")
	if c == nil || !strings.Contains(c.Message, "at status.podIPs") || !strings.Contains(c.Message, "may not be changed once set") {
		t.Fatalf("condition %+v", c)
	}
	if refusedCond(h.sync(), "q") != nil {
		t.Fatalf("q shown refused")
	}
	if ev := h.rec.list(); len(ev) != 1 || !strings.Contains(ev[0], "(422 Invalid) at status.podIPs") {
		t.Fatalf("events %v", ev)
	}
}

// A 409 is re-read: another pod of that name means ours is gone (no
// refusal); a 409 that persists on the same pod is a refusal.
func TestWriterConflictRereadThenRefused(t *testing.T) {
	h := newRefusalHarness(t, WriterConfig{RetryBase: time.Second})
	h.api.pods["default/gone"] = apiPodWith("gone", "uid-other", v1.PodPending)
	h.api.pods["default/c"] = apiPodWith("c", "uid-c", v1.PodPending)
	h.api.setRule(func(name string, _ *v1.PodStatus, _ *v1.Pod) error {
		if name == "c" {
			return errdefs.Wrap(errdefs.ErrConflict, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, name, fmt.Errorf("the object has been modified")))
		}
		return nil
	})
	h.update(apiPodWith("gone", "uid-gone", v1.PodRunning))
	h.update(apiPodWith("c", "uid-c", v1.PodRunning))
	h.waitFor("c refused", func() bool { return h.m.get(h.m.refused, "Conflict") == 1 })
	h.waitFor("gone re-read", func() bool { return h.api.count("get gone") == 1 })
	h.sync()
	if n := h.m.get(h.m.refused, "Conflict"); n != 1 {
		t.Fatalf("conflicts counted %d", n)
	}
	if got := h.api.get("gone").Status.Phase; got != v1.PodPending {
		t.Fatalf("wrote over another pod: %s", got)
	}
	h.clk.Step(time.Minute)
	h.sync()
	if n := h.api.count("patch gone"); n != 1 {
		t.Fatalf("the replaced pod was written %d times, want the one refused", n)
	}
}

// Under a storm of first statuses that are terminal (pods rejected at
// admission), the first status of a pod that runs is taken before them;
// the storm still gets its share of the slots.
func TestWriterFirstRunningStatusOvertakesRejectionStorm(t *testing.T) {
	h := newRefusalHarness(t, WriterConfig{MaxInFlight: 1})
	gate := make(chan struct{})
	h.api.gate = gate
	for i := range 200 {
		name := fmt.Sprintf("rej-%03d", i)
		h.api.pods["default/"+name] = apiPodWith(name, types.UID(name), v1.PodPending)
		h.update(apiPodWith(name, types.UID(name), v1.PodFailed))
	}
	h.api.pods["default/run"] = apiPodWith("run", "run", v1.PodPending)
	h.update(apiPodWith("run", "run", v1.PodRunning))
	h.sync()
	for range 201 {
		gate <- struct{}{}
	}
	h.waitFor("all written", func() bool { return len(h.api.taken()) == 201 })
	order := h.api.taken()
	i := slices.Index(order, "run")
	// rej-000 took the only slot before "run" came; then "run" goes first
	// (or second, when the turn was the low lane's).
	if i < 0 || i > 2 {
		t.Fatalf("the running pod's status was write %d of %d: %v", i+1, len(order), order[:10])
	}
}

// The lanes take the highest waiting lane, but every lowEvery-th turn the
// lowest, so no lane starves.
func TestLanesOrder(t *testing.T) {
	var l lanes
	for i := range 8 {
		l.push(laneLow, types.UID(fmt.Sprintf("low%d", i)))
		l.push(laneFirst, types.UID(fmt.Sprintf("first%d", i)))
	}
	l.push(laneNormal, "normal0")
	var got []string
	for {
		uid, _, ok := l.pop()
		if !ok {
			break
		}
		got = append(got, string(uid))
	}
	want := []string{"first0", "first1", "first2", "low0", "first3", "first4", "first5", "low1",
		"first6", "first7", "normal0", "low2", "low3", "low4", "low5", "low6", "low7"}
	if !slices.Equal(got, want) {
		t.Fatalf("order\n got %v\nwant %v", got, want)
	}
}

// A container that turns terminated is counted once, by type, exit code
// and reason.
func TestTerminatedContainersCounted(t *testing.T) {
	m := newFakeMetrics()
	sys := newSystem()
	pid := sys.Root.Spawn(actor.PropsFromProducer(New(nil, WithMetrics(m))))
	defer sys.Root.Stop(pid)
	p := pod("default", "t", "uid-t", v1.PodRunning)
	p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "init", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}
	p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "main", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
	sys.Root.Send(pid, &messages.PodStatusUpdate{Pod: p})
	p2 := p.DeepCopy()
	p2.Status.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 42, Reason: "Error"}}
	sys.Root.Send(pid, &messages.PodStatusUpdate{Pod: p2})
	sys.Root.Send(pid, &messages.PodStatusUpdate{Pod: p2.DeepCopy()}) // the same again: not counted
	_ = getPods(t, sys, pid)
	if n := m.get(m.terminated, "init_container/0/Completed"); n != 1 {
		t.Fatalf("init counted %d", n)
	}
	if n := m.get(m.terminated, "container/42/Error"); n != 1 {
		t.Fatalf("container counted %d", n)
	}
}

// A pod that leaves the node while its write waits for a slot is never
// written; only its newest status is written for a pod still there.
func TestWriterQueuedWritesOfGonePodsDropped(t *testing.T) {
	h := newRefusalHarness(t, WriterConfig{MaxInFlight: 1})
	gate := make(chan struct{})
	h.api.gate = gate
	for _, n := range []string{"a", "b", "c"} {
		h.api.pods["default/"+n] = apiPodWith(n, types.UID("uid-"+n), v1.PodPending)
		h.update(apiPodWith(n, types.UID("uid-"+n), v1.PodRunning))
	}
	newer := apiPodWith("c", "uid-c", v1.PodRunning)
	newer.Status.Message = "newest"
	h.update(newer)
	h.sys.Root.Send(h.pid, &messages.PodForget{UID: "uid-b", Namespace: "default", Name: "b"})
	h.sync()
	gate <- struct{}{}
	gate <- struct{}{}
	h.waitFor("a and c written", func() bool { return len(h.api.taken()) == 2 })
	h.sync()
	if got := h.api.taken(); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("written %v, want [a c]", got)
	}
	if h.api.get("c").Status.Message != "newest" || h.api.count("patch c") != 1 {
		t.Fatalf("c: %d patches, message %q", h.api.count("patch c"), h.api.get("c").Status.Message)
	}
	if h.api.count("patch b") != 0 {
		t.Fatalf("b written after it left")
	}
}
