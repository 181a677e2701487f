package pleg

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/internal/fakecri"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

var quiet = slog.New(slog.DiscardHandler)

const period = time.Second

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// --- fakes ---

var _ Lister = (*fakecri.Runtime)(nil)

type fakeMetrics struct {
	mu          sync.Mutex
	runningPods int
	containers  map[string]int
	relists     int
	lastSeen    time.Time
}

var _ Metrics = (*fakeMetrics)(nil)

func newFakeMetrics() *fakeMetrics {
	return &fakeMetrics{runningPods: -1, containers: map[string]int{}}
}

func (m *fakeMetrics) ObservePLEGRelist(time.Duration, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.relists++
}

func (m *fakeMetrics) SetPLEGLastSeen(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastSeen = t
}

func (m *fakeMetrics) SetRunningPods(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runningPods = n
}

func (m *fakeMetrics) SetRunningContainers(state string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.containers[state] = n
}

func (m *fakeMetrics) snapshot() (int, map[string]int, int, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := make(map[string]int, len(m.containers))
	for k, v := range m.containers {
		c[k] = v
	}
	return m.runningPods, c, m.relists, m.lastSeen
}

// --- runtime objects ---

func sandbox(id, uid string, state runtimeapi.PodSandboxState) *runtimeapi.PodSandbox {
	s := &runtimeapi.PodSandbox{Id: id, State: state, Labels: map[string]string{}}
	if uid != "" {
		s.Labels[podspec.LabelPodUID] = uid
	}
	return s
}

func container(id, uid string, state runtimeapi.ContainerState) *runtimeapi.Container {
	c := &runtimeapi.Container{Id: id, State: state, Labels: map[string]string{}}
	if uid != "" {
		c.Labels[podspec.LabelPodUID] = uid
	}
	return c
}

const (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	created = runtimeapi.ContainerState_CONTAINER_CREATED
	unknown = runtimeapi.ContainerState_CONTAINER_UNKNOWN
	ready   = runtimeapi.PodSandboxState_SANDBOX_READY
	notDone = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
)

func ev(uid string, typ messages.PodLifecycleEventType, id string) string {
	return fmt.Sprintf("%s %s %s", uid, typ, id)
}

func render(events []messages.PodLifecycleEvent) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		out = append(out, ev(string(e.UID), e.Type, e.ID))
	}
	sort.Strings(out)
	return out
}

// equal compares event lists in any order (render sorts what was received).
func equal(got, want []string) bool {
	b := append([]string(nil), want...)
	sort.Strings(b)
	return slices.Equal(got, b)
}

type view struct {
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
}

// relist is v as the full listing's relist started at started gives it to
// the diff.
func (v view) relist(started time.Time) *relisted {
	m := &relisted{started: started}
	m.fromProtos(v.sandboxes, v.containers)
	return m
}

// --- handler tests: diff with no actor system ---

func TestDiff(t *testing.T) {
	tests := []struct {
		name string
		prev *view // nil: this is the first relist
		next view
		want []string
	}{
		{
			name: "first relist reports running containers and sandboxes",
			next: view{
				sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready)},
				containers: []*runtimeapi.Container{container("c1", "u1", running), container("c2", "u1", created)},
			},
			want: []string{ev("u1", messages.ContainerStarted, "c1"), ev("u1", messages.ContainerChanged, "c2"), ev("u1", messages.SandboxChanged, "s1")},
		},
		{
			name: "first relist reports an exited container as died",
			next: view{containers: []*runtimeapi.Container{container("c1", "u1", exited)}},
			want: []string{ev("u1", messages.ContainerDied, "c1")},
		},
		{
			name: "nothing changed, nothing reported",
			prev: &view{
				sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready)},
				containers: []*runtimeapi.Container{container("c1", "u1", running)},
			},
			next: view{
				sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready)},
				containers: []*runtimeapi.Container{container("c1", "u1", running)},
			},
			want: []string{},
		},
		{
			name: "running to exited is a death of that pod's container",
			prev: &view{containers: []*runtimeapi.Container{container("c1", "u1", running), container("c2", "u2", running)}},
			next: view{containers: []*runtimeapi.Container{container("c1", "u1", running), container("c2", "u2", exited)}},
			want: []string{ev("u2", messages.ContainerDied, "c2")},
		},
		{
			name: "created to running is a start",
			prev: &view{containers: []*runtimeapi.Container{container("c1", "u1", created)}},
			next: view{containers: []*runtimeapi.Container{container("c1", "u1", running)}},
			want: []string{ev("u1", messages.ContainerStarted, "c1")},
		},
		{
			name: "running to unknown is a change",
			prev: &view{containers: []*runtimeapi.Container{container("c1", "u1", running)}},
			next: view{containers: []*runtimeapi.Container{container("c1", "u1", unknown)}},
			want: []string{ev("u1", messages.ContainerChanged, "c1")},
		},
		{
			name: "a removed container is reported for its pod",
			prev: &view{containers: []*runtimeapi.Container{container("c1", "u1", exited), container("c2", "u2", running)}},
			next: view{containers: []*runtimeapi.Container{container("c2", "u2", running)}},
			want: []string{ev("u1", messages.ContainerRemoved, "c1")},
		},
		{
			name: "sandbox state change",
			prev: &view{sandboxes: []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready)}},
			next: view{sandboxes: []*runtimeapi.PodSandbox{sandbox("s1", "u1", notDone)}},
			want: []string{ev("u1", messages.SandboxChanged, "s1")},
		},
		{
			name: "removed sandbox",
			prev: &view{sandboxes: []*runtimeapi.PodSandbox{sandbox("s1", "u1", notDone)}},
			next: view{},
			want: []string{ev("u1", messages.SandboxChanged, "s1")},
		},
		{
			name: "objects without the pod uid label are ignored",
			next: view{
				sandboxes:  []*runtimeapi.PodSandbox{sandbox("s-foreign", "", ready)},
				containers: []*runtimeapi.Container{container("c-foreign", "", running), container("c1", "u1", running)},
			},
			want: []string{ev("u1", messages.ContainerStarted, "c1")},
		},
		{
			name: "a foreign container changing state stays ignored",
			prev: &view{containers: []*runtimeapi.Container{container("c-foreign", "", running)}},
			next: view{containers: []*runtimeapi.Container{container("c-foreign", "", exited)}},
			want: []string{},
		},
		{
			name: "a sandbox without the label falls back to its metadata uid",
			next: view{sandboxes: []*runtimeapi.PodSandbox{{
				Id: "s1", State: ready, Metadata: &runtimeapi.PodSandboxMetadata{Uid: "u9"},
			}}},
			want: []string{ev("u9", messages.SandboxChanged, "s1")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &Actor{containers: map[string]*record{}, sandboxes: map[string]*record{}}
			if tt.prev != nil {
				a.diff(tt.prev.relist(t0))
			}
			got := render(a.diff(tt.next.relist(t0)))
			if !equal(got, tt.want) {
				t.Errorf("events = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDiffReportsRunningCounts(t *testing.T) {
	m := newFakeMetrics()
	a := &Actor{m: m, containers: map[string]*record{}, sandboxes: map[string]*record{}}
	a.diff(view{
		sandboxes: []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s2", "u2", ready), sandbox("s3", "u3", notDone)},
		containers: []*runtimeapi.Container{
			container("c1", "u1", running), container("c2", "u1", running),
			container("c3", "u2", running), container("c4", "u2", exited),
			container("c5", "u3", exited), container("c6", "u3", created),
			container("c7", "u3", unknown),
			container("c-foreign", "", running),
		},
	}.relist(t0))
	pods, ctrs, _, _ := m.snapshot()
	if pods != 2 {
		t.Errorf("running pods = %d, want 2", pods)
	}
	want := map[string]int{"running": 3, "exited": 2, "created": 1, "unknown": 1}
	for state, n := range want {
		if ctrs[state] != n {
			t.Errorf("containers %s = %d, want %d", state, ctrs[state], n)
		}
	}

	// Everything gone: every gauge goes back to zero.
	a.diff(&relisted{})
	pods, ctrs, _, _ = m.snapshot()
	if pods != 0 {
		t.Errorf("running pods after removal = %d, want 0", pods)
	}
	for state := range want {
		if ctrs[state] != 0 {
			t.Errorf("containers %s after removal = %d, want 0", state, ctrs[state])
		}
	}
}

// --- actor tests ---

// nodeStub records what the PLEG sends to the NodeActor.
type nodeStub struct {
	mu      sync.Mutex
	events  []messages.PodLifecycleEvent
	batches int
	runtime [][]types.UID
	replies []*messages.RuntimePod
}

type flush struct{ done chan struct{} }

func (n *nodeStub) receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.PodEvents:
		n.mu.Lock()
		n.events = append(n.events, m.Events...)
		n.batches++
		n.mu.Unlock()
	case *messages.RuntimePods:
		n.mu.Lock()
		n.runtime = append(n.runtime, append([]types.UID(nil), m.UIDs...))
		n.mu.Unlock()
	case *messages.RuntimePod:
		n.mu.Lock()
		n.replies = append(n.replies, m)
		n.mu.Unlock()
	case flush:
		close(m.done)
	}
}

// takeEvents returns the events received since the last call.
func (n *nodeStub) takeEvents() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := render(n.events)
	n.events = nil
	return out
}

// takeRaw returns the events, slices included, received since the last
// call.
func (n *nodeStub) takeRaw() []messages.PodLifecycleEvent {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.events
	n.events = nil
	return out
}

// takeReplies returns the GetRuntimePod answers received since the last
// call, by pod UID.
func (n *nodeStub) takeReplies() map[types.UID][]*messages.RuntimePod {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[types.UID][]*messages.RuntimePod{}
	for _, r := range n.replies {
		out[r.UID] = append(out[r.UID], r)
	}
	n.replies = nil
	return out
}

func (n *nodeStub) runtimePods() [][]types.UID {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([][]types.UID(nil), n.runtime...)
}

type harness struct {
	t    *testing.T
	sys  *actor.ActorSystem
	clk  *clocktesting.FakeClock
	rt   *fakecri.Runtime
	m    *fakeMetrics
	node *nodeStub
	nPID *actor.PID
	pleg *actor.PID
}

func newHarness(t *testing.T, rt *fakecri.Runtime) *harness {
	t.Helper()
	return newHarnessOn(t, rt, rt)
}

// newHarnessOn is newHarness with the PLEG listing through l (rt or a
// wrapper of it).
func newHarnessOn(t *testing.T, rt *fakecri.Runtime, l Lister) *harness {
	t.Helper()
	return newHarnessCfg(t, rt, l, Config{Period: period, Threshold: time.Minute})
}

// newHarnessCfg is newHarnessOn with the PLEG's Config.
func newHarnessCfg(t *testing.T, rt *fakecri.Runtime, l Lister, cfg Config) *harness {
	t.Helper()
	h := &harness{
		t:    t,
		sys:  actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet })),
		clk:  clocktesting.NewFakeClock(t0),
		rt:   rt,
		m:    newFakeMetrics(),
		node: &nodeStub{},
	}
	h.nPID = h.sys.Root.Spawn(actor.PropsFromFunc(h.node.receive))
	h.pleg = h.sys.Root.Spawn(actor.PropsFromProducer(
		New(h.nPID, l, h.clk, cfg, h.m, quiet),
		actor.WithReceiverMiddleware(actortest.Barrier()),
	))
	t.Cleanup(func() {
		h.sys.Root.Stop(h.pleg)
		h.sys.Root.Stop(h.nPID)
	})
	return h
}

// settle waits until the running relist's result is handled (the next one
// is armed on the clock) and everything it sent has reached the node stub.
func (h *harness) settle() {
	h.t.Helper()
	actortest.Eventually(h.t, "the next relist to be armed", h.clk.HasWaiters)
	h.flush()
}

// flush returns once everything sent to the node stub before the call has
// reached it.
func (h *harness) flush() {
	h.t.Helper()
	done := make(chan struct{})
	h.sys.Root.Send(h.nPID, flush{done: done})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		h.t.Fatal("node stub did not flush")
	}
}

// next steps the clock by one period and waits for the relist it triggers;
// it returns the relist's start.
func (h *harness) next() time.Time {
	h.t.Helper()
	started := h.start()
	h.settle()
	return started
}

// start steps the clock by one period and waits for the relist it triggers
// to call the runtime; it returns the relist's start.
func (h *harness) start() time.Time {
	h.t.Helper()
	actortest.Eventually(h.t, "a relist to be armed", h.clk.HasWaiters)
	n := h.rt.Count("ListPodSandbox")
	h.clk.Step(period)
	started := h.clk.Now()
	actortest.Eventually(h.t, "the relist to start", func() bool { return h.rt.Count("ListPodSandbox") > n })
	return started
}

// ask sends GetRuntimePod (answers go to the node stub) and returns once
// the PLEG has handled it and whatever it answered has reached the stub.
func (h *harness) ask(uid types.UID, notBefore time.Time) {
	h.t.Helper()
	h.sys.Root.Send(h.pleg, &messages.GetRuntimePod{UID: uid, NotBefore: notBefore, ReplyTo: h.nPID})
	actortest.Sync(h.t, h.sys, h.pleg)
	h.flush()
}

func (h *harness) health() *messages.Health {
	h.t.Helper()
	res, err := h.sys.Root.RequestFuture(h.pleg, &messages.GetHealth{}, 5*time.Second).Result()
	if err != nil {
		h.t.Fatalf("GetHealth: %v", err)
	}
	hl, ok := res.(*messages.Health)
	if !ok {
		h.t.Fatalf("GetHealth answered %T", res)
	}
	return hl
}

func uids(s ...string) []types.UID {
	out := make([]types.UID, 0, len(s))
	for _, u := range s {
		out = append(out, types.UID(u))
	}
	return out
}

func TestPLEGReportsRuntimeChangesToTheNode(t *testing.T) {
	rt := fakecri.New(nil)
	rt.Replace(
		[]*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s2", "u2", ready), sandbox("s-foreign", "", ready)},
		[]*runtimeapi.Container{container("c1", "u1", running), container("c2", "u2", running), container("c-foreign", "", running)},
	)
	h := newHarness(t, rt)

	// First relist: every pod is new.
	h.settle()
	if got, want := h.node.takeEvents(), []string{
		ev("u1", messages.ContainerStarted, "c1"), ev("u1", messages.SandboxChanged, "s1"),
		ev("u2", messages.ContainerStarted, "c2"), ev("u2", messages.SandboxChanged, "s2"),
	}; !equal(got, want) {
		t.Fatalf("first relist events = %v, want %v", got, want)
	}
	if got := h.node.runtimePods(); len(got) != 1 || !slices.Equal(got[0], uids("u1", "u2")) {
		t.Fatalf("first relist RuntimePods = %v, want [[u1 u2]]", got)
	}

	steps := []struct {
		name       string
		sandboxes  []*runtimeapi.PodSandbox
		containers []*runtimeapi.Container
		events     []string
		runtime    [][]types.UID // every RuntimePods received so far
	}{
		{
			name:       "nothing changed: no events, no RuntimePods",
			sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s2", "u2", ready)},
			containers: []*runtimeapi.Container{container("c1", "u1", running), container("c2", "u2", running)},
			events:     []string{},
			runtime:    [][]types.UID{uids("u1", "u2")},
		},
		{
			name:       "u2's container exits: ContainerDied for u2 only, same pod set",
			sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s2", "u2", ready)},
			containers: []*runtimeapi.Container{container("c1", "u1", running), container("c2", "u2", exited)},
			events:     []string{ev("u2", messages.ContainerDied, "c2")},
			runtime:    [][]types.UID{uids("u1", "u2")},
		},
		{
			name:       "u2's sandbox stops and its container is removed",
			sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s2", "u2", notDone)},
			containers: []*runtimeapi.Container{container("c1", "u1", running)},
			events:     []string{ev("u2", messages.ContainerRemoved, "c2"), ev("u2", messages.SandboxChanged, "s2")},
			runtime:    [][]types.UID{uids("u1", "u2")},
		},
		{
			name:       "u2 leaves the runtime: RuntimePods is sent again",
			sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready)},
			containers: []*runtimeapi.Container{container("c1", "u1", running)},
			events:     []string{ev("u2", messages.SandboxChanged, "s2")},
			runtime:    [][]types.UID{uids("u1", "u2"), uids("u1")},
		},
		{
			name:       "a foreign container appears: ignored",
			sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s-x", "", ready)},
			containers: []*runtimeapi.Container{container("c1", "u1", running), container("c-x", "", running)},
			events:     []string{},
			runtime:    [][]types.UID{uids("u1", "u2"), uids("u1")},
		},
		{
			name:       "u3 is created",
			sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s3", "u3", ready)},
			containers: []*runtimeapi.Container{container("c1", "u1", running)},
			events:     []string{ev("u3", messages.SandboxChanged, "s3")},
			runtime:    [][]types.UID{uids("u1", "u2"), uids("u1"), uids("u1", "u3")},
		},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			h.t = t
			rt.Replace(s.sandboxes, s.containers)
			h.next()
			if got := h.node.takeEvents(); !equal(got, s.events) {
				t.Errorf("events = %v, want %v", got, s.events)
			}
			got := h.node.runtimePods()
			ok := len(got) == len(s.runtime)
			for i := 0; ok && i < len(got); i++ {
				ok = slices.Equal(got[i], s.runtime[i])
			}
			if !ok {
				t.Errorf("RuntimePods = %v, want %v", got, s.runtime)
			}
		})
	}
}

func TestPLEGSendsEmptyRuntimePodsOnFirstRelist(t *testing.T) {
	h := newHarness(t, fakecri.New(nil))
	h.settle()
	got := h.node.runtimePods()
	if len(got) != 1 || len(got[0]) != 0 {
		t.Fatalf("RuntimePods = %v, want one empty list", got)
	}
	if ev := h.node.takeEvents(); len(ev) != 0 {
		t.Errorf("events = %v, want none", ev)
	}
	h.next()
	if got := h.node.runtimePods(); len(got) != 1 {
		t.Errorf("RuntimePods re-sent with no change: %v", got)
	}
}

func TestPLEGRelistsEveryPeriodAndNeverOverlaps(t *testing.T) {
	rt := fakecri.New(nil)
	release := rt.Block("ListPodSandbox")
	rt.Replace(nil, []*runtimeapi.Container{container("c1", "u1", running)})
	h := newHarness(t, rt)

	// The first relist hangs in the runtime. Time passes: no second relist
	// starts, and the actor still answers.
	actortest.Eventually(t, "the first relist to start", func() bool { return rt.Count("ListPodSandbox") == 1 })
	for range 5 {
		h.clk.Step(period)
	}
	if hl := h.health(); !hl.LastRelist.IsZero() {
		t.Errorf("LastRelist = %v before any relist finished", hl.LastRelist)
	}
	if got := rt.Count("ListPodSandbox"); got != 1 {
		t.Fatalf("relists started while one is in flight = %d, want 1", got)
	}
	if h.clk.HasWaiters() {
		t.Fatal("a relist is armed while one is in flight")
	}
	release()
	h.settle()

	// From now on: one relist per period, not before.
	for i := range 3 {
		before := rt.Count("ListPodSandbox")
		h.clk.Step(period - time.Millisecond)
		if !h.clk.HasWaiters() {
			t.Fatalf("round %d: relist fired before the period elapsed", i)
		}
		h.clk.Step(time.Millisecond)
		actortest.Eventually(t, "the periodic relist", func() bool { return rt.Count("ListPodSandbox") == before+1 })
		h.settle()
	}
	if maxInFlight := rt.MaxInFlight("ListPodSandbox"); maxInFlight != 1 {
		t.Errorf("relists in flight at once = %d, want 1", maxInFlight)
	}
}

func TestPLEGHealth(t *testing.T) {
	boom := errors.New("rpc error: runtime down")
	tests := []struct {
		name       string
		sandboxErr error
		containErr error
	}{
		{name: "ListPodSandbox fails", sandboxErr: boom},
		{name: "ListContainers fails", containErr: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := fakecri.New(nil)
			rt.Replace([]*runtimeapi.PodSandbox{sandbox("s1", "u1", ready)}, []*runtimeapi.Container{container("c1", "u1", running)})
			h := newHarness(t, rt)
			h.settle()
			hl := h.health()
			if hl.RuntimeErr != "" || !hl.LastRelist.Equal(t0) || hl.Threshold != time.Minute {
				t.Fatalf("healthy: %+v, want no error, LastRelist %v, Threshold 1m", hl, t0)
			}
			h.node.takeEvents()

			rt.InjectAlways("ListPodSandbox", tt.sandboxErr)
			rt.InjectAlways("ListContainers", tt.containErr)
			h.next()
			hl = h.health()
			if hl.RuntimeErr != boom.Error() {
				t.Errorf("RuntimeErr = %q, want %q", hl.RuntimeErr, boom.Error())
			}
			if !hl.LastRelist.Equal(t0) {
				t.Errorf("LastRelist = %v after a failed relist, want it kept at %v", hl.LastRelist, t0)
			}
			if got := h.node.takeEvents(); len(got) != 0 {
				t.Errorf("a failed relist sent events %v", got)
			}

			// Still failing: the PLEG keeps trying every period.
			h.next()
			if hl := h.health(); hl.RuntimeErr == "" {
				t.Error("RuntimeErr cleared while still failing")
			}

			// The runtime is back, with a change made meanwhile.
			rt.InjectAlways("ListPodSandbox", nil)
			rt.InjectAlways("ListContainers", nil)
			rt.Replace([]*runtimeapi.PodSandbox{sandbox("s1", "u1", ready)}, []*runtimeapi.Container{container("c1", "u1", exited)})
			h.next()
			hl = h.health()
			if hl.RuntimeErr != "" {
				t.Errorf("RuntimeErr = %q after a good relist", hl.RuntimeErr)
			}
			if want := t0.Add(3 * period); !hl.LastRelist.Equal(want) {
				t.Errorf("LastRelist = %v, want %v", hl.LastRelist, want)
			}
			if got, want := h.node.takeEvents(), []string{ev("u1", messages.ContainerDied, "c1")}; !equal(got, want) {
				t.Errorf("events after recovery = %v, want %v", got, want)
			}
		})
	}
}

func TestPLEGMetrics(t *testing.T) {
	rt := fakecri.New(nil)
	rt.Replace(
		[]*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s2", "u2", ready)},
		[]*runtimeapi.Container{container("c1", "u1", running), container("c2", "u2", running), container("c3", "u2", created)},
	)
	h := newHarness(t, rt)
	h.settle()

	// Running pods as upstream: pods with a ready sandbox.
	steps := []struct {
		name       string
		sandboxes  []*runtimeapi.PodSandbox
		containers []*runtimeapi.Container
		fail       bool
		pods       int
		counts     map[string]int
		relists    int
	}{
		{
			name:    "first relist",
			pods:    2,
			counts:  map[string]int{"running": 2, "created": 1, "exited": 0, "unknown": 0},
			relists: 1,
		},
		{
			name:       "u2's containers exit and its sandbox stops",
			sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s2", "u2", notDone)},
			containers: []*runtimeapi.Container{container("c1", "u1", running), container("c2", "u2", exited), container("c3", "u2", exited)},
			pods:       1,
			counts:     map[string]int{"running": 1, "created": 0, "exited": 2, "unknown": 0},
			relists:    2,
		},
		{
			name:    "a failed relist changes no gauge",
			fail:    true,
			pods:    1,
			counts:  map[string]int{"running": 1, "created": 0, "exited": 2, "unknown": 0},
			relists: 2,
		},
	}
	for i, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			h.t = t
			if i > 0 {
				if s.fail {
					rt.InjectAlways("ListPodSandbox", errors.New("down"))
				} else {
					rt.Replace(s.sandboxes, s.containers)
				}
				h.next()
			}
			pods, counts, relists, _ := h.m.snapshot()
			if pods != s.pods {
				t.Errorf("running pods = %d, want %d", pods, s.pods)
			}
			for state, n := range s.counts {
				if counts[state] != n {
					t.Errorf("containers %s = %d, want %d", state, counts[state], n)
				}
			}
			if relists != s.relists {
				t.Errorf("relists observed = %d, want %d", relists, s.relists)
			}
		})
	}
}

// --- the runtime cache ---

// sandboxByMetadata is a sandbox that names its pod only in its metadata.
func sandboxByMetadata(id, uid string, state runtimeapi.PodSandboxState) *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{Id: id, State: state, Metadata: &runtimeapi.PodSandboxMetadata{Uid: uid}}
}

// objects renders a pod's slice as the IDs of its sandboxes and
// containers.
func objects(sandboxes []string, containers ...string) string {
	s := append([]string(nil), sandboxes...)
	c := append([]string(nil), containers...)
	sort.Strings(s)
	sort.Strings(c)
	return fmt.Sprintf("sandboxes %v containers %v", s, c)
}

func content(p *messages.RuntimePod) string {
	var s, c []string
	for _, sb := range p.Sandboxes {
		s = append(s, sb.ID)
	}
	for _, ct := range p.Containers {
		c = append(c, ct.ID)
	}
	return objects(s, c...)
}

var none = objects(nil)

func TestCacheGroupsByPod(t *testing.T) {
	started := t0.Add(time.Minute)
	withMetadata := sandbox("s1", "u1", ready)
	withMetadata.Metadata = &runtimeapi.PodSandboxMetadata{Uid: "u2"}
	unlabelled := container("c2", "", running)
	unlabelled.PodSandboxId = "s1"
	tests := []struct {
		name string
		next view
		want map[types.UID]string
	}{
		{
			name: "an empty relist has no pod",
			want: map[types.UID]string{},
		},
		{
			name: "each pod gets its own sandboxes and containers",
			next: view{
				sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s2", "u2", ready), sandbox("s0", "u1", notDone)},
				containers: []*runtimeapi.Container{container("c1", "u1", running), container("c2", "u2", running), container("c0", "u1", exited)},
			},
			want: map[types.UID]string{
				"u1": objects([]string{"s0", "s1"}, "c0", "c1"),
				"u2": objects([]string{"s2"}, "c2"),
			},
		},
		{
			name: "objects without the pod uid label are in no slice",
			next: view{
				sandboxes:  []*runtimeapi.PodSandbox{sandbox("s-x", "", ready)},
				containers: []*runtimeapi.Container{container("c-x", "", running), container("c1", "u1", running)},
			},
			want: map[types.UID]string{"u1": objects(nil, "c1")},
		},
		{
			name: "a sandbox with the uid only in its metadata is grouped by it",
			next: view{
				sandboxes:  []*runtimeapi.PodSandbox{sandboxByMetadata("s9", "u9", ready)},
				containers: []*runtimeapi.Container{container("c9", "u9", running)},
			},
			want: map[types.UID]string{"u9": objects([]string{"s9"}, "c9")},
		},
		{
			name: "a sandbox's label wins over its metadata",
			next: view{sandboxes: []*runtimeapi.PodSandbox{withMetadata}},
			want: map[types.UID]string{"u1": objects([]string{"s1"})},
		},
		{
			name: "a container without the label is in no slice, not even its sandbox's",
			next: view{
				sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready)},
				containers: []*runtimeapi.Container{unlabelled},
			},
			want: map[types.UID]string{"u1": objects([]string{"s1"})},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &Actor{}
			m := tt.next.relist(started)
			a.cache(m, a.diff(m))
			got := map[types.UID]string{}
			for uid := range a.pods {
				p := a.slice(uid, started)
				got[uid] = content(p)
				if p.UID != uid {
					t.Errorf("slice under %s has UID %s", uid, p.UID)
				}
				if !p.Relisted.Equal(started) {
					t.Errorf("slice %s: Relisted = %v, want %v", uid, p.Relisted, started)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("slices = %v, want %v", got, tt.want)
			}
		})
	}
}

// A relist builds again the slices of the pods it has events for, with
// the listed states; the other pods keep theirs, and a pod with nothing
// left has none.
func TestCacheRebuildsOnlyChangedPods(t *testing.T) {
	a := &Actor{}
	relist := func(v view) {
		m := v.relist(t0)
		a.cache(m, a.diff(m))
	}
	states := func(uid types.UID) string {
		p := a.slice(uid, t0)
		var out []string
		for _, sb := range p.Sandboxes {
			out = append(out, sb.ID+"="+sb.State.String())
		}
		for _, c := range p.Containers {
			out = append(out, c.ID+"@"+c.SandboxID+"="+c.State.String())
		}
		return strings.Join(out, " ")
	}
	c1, c2 := container("c1", "u1", running), container("c2", "u2", running)
	c1.PodSandboxId, c2.PodSandboxId = "s1", "s2"
	relist(view{sandboxes: []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s2", "u2", ready)},
		containers: []*runtimeapi.Container{c1, c2}})
	u2 := a.pods["u2"]

	c1 = container("c1", "u1", exited)
	c1.PodSandboxId = "s1"
	relist(view{sandboxes: []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s2", "u2", ready)},
		containers: []*runtimeapi.Container{c1, c2}})
	if got, want := states("u1"), "s1=SANDBOX_READY c1@s1=CONTAINER_EXITED"; got != want {
		t.Errorf("u1 after its container exited: %s, want %s", got, want)
	}
	if a.pods["u2"] != u2 {
		t.Error("u2 did not change, its slice was built again")
	}
	if got, want := states("u2"), "s2=SANDBOX_READY c2@s2=CONTAINER_RUNNING"; got != want {
		t.Errorf("u2: %s, want %s", got, want)
	}

	relist(view{sandboxes: []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready)}, containers: []*runtimeapi.Container{c1}})
	if _, ok := a.pods["u2"]; ok || states("u2") != "" {
		t.Errorf("u2 left the runtime, its slice is still there: %s", states("u2"))
	}
}

func TestPLEGEventsCarryThePodsSlice(t *testing.T) {
	rt := fakecri.New(nil)
	rt.Replace(
		[]*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s2", "u2", ready), sandbox("s-x", "", ready), sandboxByMetadata("s9", "u9", ready)},
		[]*runtimeapi.Container{container("c1", "u1", running), container("c2", "u1", running), container("c3", "u2", running), container("c-x", "", running)},
	)
	h := newHarness(t, rt)

	steps := []struct {
		name       string
		sandboxes  []*runtimeapi.PodSandbox
		containers []*runtimeapi.Container
		slow       bool // the runtime holds the relist while time passes
		events     []string
		slices     map[types.UID]string // the Pod of every event, by pod
	}{
		{
			name: "first relist: each pod's events carry its own slice",
			events: []string{
				ev("u1", messages.ContainerStarted, "c1"), ev("u1", messages.ContainerStarted, "c2"), ev("u1", messages.SandboxChanged, "s1"),
				ev("u2", messages.ContainerStarted, "c3"), ev("u2", messages.SandboxChanged, "s2"),
				ev("u9", messages.SandboxChanged, "s9"),
			},
			slices: map[types.UID]string{
				"u1": objects([]string{"s1"}, "c1", "c2"),
				"u2": objects([]string{"s2"}, "c3"),
				"u9": objects([]string{"s9"}),
			},
		},
		{
			name:       "u1's container exits: the event carries u1's whole slice",
			sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s2", "u2", ready), sandboxByMetadata("s9", "u9", ready)},
			containers: []*runtimeapi.Container{container("c1", "u1", running), container("c2", "u1", exited), container("c3", "u2", running)},
			events:     []string{ev("u1", messages.ContainerDied, "c2")},
			slices:     map[types.UID]string{"u1": objects([]string{"s1"}, "c1", "c2")},
		},
		{
			name:       "u2 leaves the runtime: its events carry an empty slice",
			sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandboxByMetadata("s9", "u9", ready)},
			containers: []*runtimeapi.Container{container("c1", "u1", running), container("c2", "u1", exited)},
			events:     []string{ev("u2", messages.ContainerRemoved, "c3"), ev("u2", messages.SandboxChanged, "s2")},
			slices:     map[types.UID]string{"u2": none},
		},
		{
			name:       "a slow relist: Relisted is its start, not its end",
			sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandboxByMetadata("s9", "u9", notDone)},
			containers: []*runtimeapi.Container{container("c1", "u1", running), container("c2", "u1", exited)},
			slow:       true,
			events:     []string{ev("u9", messages.SandboxChanged, "s9")},
			slices:     map[types.UID]string{"u9": objects([]string{"s9"})},
		},
	}
	for i, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			h.t = t
			started := t0
			switch {
			case i == 0:
				h.settle()
			case s.slow:
				rt.Replace(s.sandboxes, s.containers)
				release := rt.Block("ListPodSandbox")
				started = h.start()
				h.clk.Step(period / 3)
				release()
				h.settle()
			default:
				rt.Replace(s.sandboxes, s.containers)
				started = h.next()
			}
			events := h.node.takeRaw()
			if got := render(events); !equal(got, s.events) {
				t.Fatalf("events = %v, want %v", got, s.events)
			}
			shared := map[types.UID]*messages.RuntimePod{}
			for _, e := range events {
				p := e.Pod
				if p == nil {
					t.Errorf("%s %s %s: no Pod", e.UID, e.Type, e.ID)
					continue
				}
				if p.UID != e.UID {
					t.Errorf("%s %s %s: Pod.UID = %s", e.UID, e.Type, e.ID, p.UID)
				}
				if got := content(p); got != s.slices[e.UID] {
					t.Errorf("%s %s %s: Pod = %s, want %s", e.UID, e.Type, e.ID, got, s.slices[e.UID])
				}
				if !p.Relisted.Equal(started) {
					t.Errorf("%s %s %s: Relisted = %v, want the relist's start %v", e.UID, e.Type, e.ID, p.Relisted, started)
				}
				if first, ok := shared[e.UID]; ok && first != p && content(p) != none {
					t.Errorf("%s %s %s: a second slice for the pod in one relist", e.UID, e.Type, e.ID)
				}
				shared[e.UID] = p
			}
		})
	}
}

// view1 and view2 are the runtime at two relists: u2 leaves, u1 gets a
// container; foreign objects throughout.
var (
	view1 = view{
		sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s2", "u2", ready), sandbox("s-x", "", ready)},
		containers: []*runtimeapi.Container{container("c1", "u1", running), container("c2", "u2", running), container("c-x", "", running)},
	}
	view2 = view{
		sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s-x", "", ready)},
		containers: []*runtimeapi.Container{container("c1", "u1", running), container("c3", "u1", created), container("c-x", "", running)},
	}
)

// checkReply checks that the only answer for uid is one slice with want
// from the relist started at started.
func checkReply(t *testing.T, replies map[types.UID][]*messages.RuntimePod, uid types.UID, want string, started time.Time) {
	t.Helper()
	got := replies[uid]
	if len(got) != 1 {
		t.Fatalf("answers for %s = %d, want 1", uid, len(got))
	}
	if c := content(got[0]); c != want {
		t.Errorf("answer for %s = %s, want %s", uid, c, want)
	}
	if !got[0].Relisted.Equal(started) {
		t.Errorf("answer for %s: Relisted = %v, want %v", uid, got[0].Relisted, started)
	}
}

func checkNoReply(t *testing.T, replies map[types.UID][]*messages.RuntimePod) {
	t.Helper()
	for uid, r := range replies {
		t.Errorf("answered %s %d times, want no answer yet", uid, len(r))
	}
}

func TestGetRuntimePodAnswersAtOnceFromTheNewestRelist(t *testing.T) {
	newest := t0.Add(period)
	tests := []struct {
		name      string
		uid       types.UID
		notBefore time.Time
		want      string
	}{
		{name: "zero NotBefore", uid: "u1", want: objects([]string{"s1"}, "c1", "c3")},
		{name: "NotBefore just before the newest relist's start", uid: "u1", notBefore: newest.Add(-time.Nanosecond), want: objects([]string{"s1"}, "c1", "c3")},
		{name: "NotBefore before an older relist: still the newest content", uid: "u1", notBefore: t0.Add(-time.Nanosecond), want: objects([]string{"s1"}, "c1", "c3")},
		{name: "a pod that left the runtime: an empty slice", uid: "u2", notBefore: t0, want: none},
		{name: "a pod never in the runtime: an empty slice", uid: "u9", want: none},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := fakecri.New(nil)
			rt.Replace(view1.sandboxes, view1.containers)
			h := newHarness(t, rt)
			h.settle()
			rt.Replace(view2.sandboxes, view2.containers)
			if started := h.next(); !started.Equal(newest) {
				t.Fatalf("second relist started at %v, want %v", started, newest)
			}
			h.ask(tt.uid, tt.notBefore)
			checkReply(t, h.node.takeReplies(), tt.uid, tt.want, newest)
		})
	}
}

// numbered is the runtime at relist k: u1's sandbox and container ck.
func numbered(k int) view {
	return view{
		sandboxes:  []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s-x", "", ready)},
		containers: []*runtimeapi.Container{container(fmt.Sprintf("c%d", k), "u1", running)},
	}
}

func TestGetRuntimePodWaitsForANewerRelist(t *testing.T) {
	tests := []struct {
		name       string
		after      time.Duration // NotBefore - the newest relist's start
		answeredBy int           // the relist that answers: 1 is the next one
	}{
		{name: "NotBefore at the newest relist's start", after: 0, answeredBy: 1},
		{name: "NotBefore between relists", after: period / 2, answeredBy: 1},
		{name: "NotBefore at the next relist's start", after: period, answeredBy: 2},
		{name: "NotBefore past the next relist's start", after: period + period/2, answeredBy: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := fakecri.New(nil)
			v := numbered(0)
			rt.Replace(v.sandboxes, v.containers)
			h := newHarness(t, rt)
			h.settle()
			h.ask("u1", t0.Add(tt.after))
			h.ask("u9", t0.Add(tt.after))
			checkNoReply(t, h.node.takeReplies())

			for k := 1; k <= tt.answeredBy; k++ {
				v := numbered(k)
				rt.Replace(v.sandboxes, v.containers)
				started := h.next()
				replies := h.node.takeReplies()
				if k < tt.answeredBy {
					checkNoReply(t, replies)
					continue
				}
				checkReply(t, replies, "u1", objects([]string{"s1"}, fmt.Sprintf("c%d", k)), started)
				checkReply(t, replies, "u9", none, started)
			}

			// Answered once: later relists send nothing more.
			h.next()
			checkNoReply(t, h.node.takeReplies())
		})
	}
}

func TestGetRuntimePodAskedDuringARelist(t *testing.T) {
	tests := []struct {
		name  string
		first bool // the relist in flight is the PLEG's first
	}{
		{name: "during the first relist", first: true},
		{name: "during a later relist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := fakecri.New(nil)
			var release func()
			var h *harness
			started := t0
			if tt.first {
				rt.Replace(view1.sandboxes, view1.containers)
				release = rt.Block("ListPodSandbox")
				h = newHarness(t, rt)
				actortest.Eventually(t, "the first relist to start", func() bool { return rt.Count("ListPodSandbox") == 1 })
			} else {
				h = newHarness(t, rt)
				h.settle()
				rt.Replace(view1.sandboxes, view1.containers)
				release = rt.Block("ListPodSandbox")
				started = h.start()
			}
			defer release()

			// u1's last operation ended before the relist in flight
			// started, u2's after: the relist answers u1 only.
			h.clk.Step(period / 10)
			h.ask("u1", started.Add(-time.Nanosecond))
			h.ask("u2", h.clk.Now())
			checkNoReply(t, h.node.takeReplies())

			release()
			h.settle()
			replies := h.node.takeReplies()
			checkReply(t, replies, "u1", objects([]string{"s1"}, "c1"), started)
			if r := replies["u2"]; len(r) != 0 {
				t.Errorf("u2 answered by a relist that started before its NotBefore: %v", content(r[0]))
			}

			rt.Replace(view2.sandboxes, view2.containers)
			next := h.next()
			replies = h.node.takeReplies()
			checkReply(t, replies, "u2", none, next)
			if r := replies["u1"]; len(r) != 0 {
				t.Errorf("u1 answered %d more times", len(r))
			}
		})
	}
}

func TestGetRuntimePodFailedRelistAnswersNoWaiter(t *testing.T) {
	boom := errors.New("rpc error: runtime down")
	tests := []struct {
		name   string
		method string
		first  bool // the first relist fails too
	}{
		{name: "ListPodSandbox fails", method: "ListPodSandbox"},
		{name: "ListContainers fails", method: "ListContainers"},
		{name: "ListPodSandbox fails from the first relist", method: "ListPodSandbox", first: true},
		{name: "ListContainers fails from the first relist", method: "ListContainers", first: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := fakecri.New(nil)
			rt.Replace(view1.sandboxes, view1.containers)
			if tt.first {
				rt.InjectAlways(tt.method, boom)
			}
			h := newHarness(t, rt)
			h.settle()
			h.ask("u1", t0)
			checkNoReply(t, h.node.takeReplies())

			rt.InjectAlways(tt.method, boom)
			rt.Replace(view2.sandboxes, view2.containers)
			for range 2 {
				h.next()
				checkNoReply(t, h.node.takeReplies())
			}
			if hl := h.health(); hl.RuntimeErr == "" {
				t.Fatal("the relists did not fail")
			}

			rt.InjectAlways(tt.method, nil)
			started := h.next()
			checkReply(t, h.node.takeReplies(), "u1", objects([]string{"s1"}, "c1", "c3"), started)
		})
	}
}

// Asks repeated while no newer relist comes (the runtime fails its
// relists, the PodActor's look times out and it asks again) replace each
// other: one answer, and nothing piles up.
func TestGetRuntimePodRepeatedAsksAreAnsweredOnce(t *testing.T) {
	rt := fakecri.New(nil)
	v := numbered(0)
	rt.Replace(v.sandboxes, v.containers)
	h := newHarness(t, rt)
	h.settle()
	for range 5 {
		h.ask("u1", t0)
	}
	checkNoReply(t, h.node.takeReplies())
	v = numbered(1)
	rt.Replace(v.sandboxes, v.containers)
	started := h.next()
	checkReply(t, h.node.takeReplies(), "u1", objects([]string{"s1"}, "c1"), started)
}
