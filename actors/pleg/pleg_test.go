package pleg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

var quiet = slog.New(slog.DiscardHandler)

const period = time.Second

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// --- fakes ---

// fakeLister serves a scripted runtime view. Setters replace whole objects,
// never mutate ones already handed out, so the PLEG may keep reading them.
type fakeLister struct {
	mu          sync.Mutex
	sandboxes   []*runtimeapi.PodSandbox
	containers  []*runtimeapi.Container
	sandboxErr  error
	containErr  error
	calls       int
	inFlight    int
	maxInFlight int
	gate        chan struct{} // when set, ListPodSandbox waits for it to close
}

var _ Lister = (*fakeLister)(nil)

func (f *fakeLister) set(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sandboxes, f.containers = sandboxes, containers
}

func (f *fakeLister) failWith(sandboxErr, containErr error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sandboxErr, f.containErr = sandboxErr, containErr
}

func (f *fakeLister) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeLister) ListPodSandbox(ctx context.Context, _ *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	f.mu.Lock()
	f.calls++
	f.inFlight++
	if f.inFlight > f.maxInFlight {
		f.maxInFlight = f.inFlight
	}
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFlight--
	if f.sandboxErr != nil {
		return nil, f.sandboxErr
	}
	return append([]*runtimeapi.PodSandbox(nil), f.sandboxes...), nil
}

func (f *fakeLister) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.containErr != nil {
		return nil, f.containErr
	}
	return append([]*runtimeapi.Container(nil), f.containers...), nil
}

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
	a := got
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type view struct {
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
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
			a := &Actor{containers: map[string]record{}, sandboxes: map[string]record{}}
			if tt.prev != nil {
				a.diff(&relisted{sandboxes: tt.prev.sandboxes, containers: tt.prev.containers})
			}
			got := render(a.diff(&relisted{sandboxes: tt.next.sandboxes, containers: tt.next.containers}))
			if !equal(got, tt.want) {
				t.Errorf("events = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDiffReportsRunningCounts(t *testing.T) {
	m := newFakeMetrics()
	a := &Actor{m: m, containers: map[string]record{}, sandboxes: map[string]record{}}
	a.diff(&relisted{
		sandboxes: []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandbox("s2", "u2", ready), sandbox("s3", "u3", notDone)},
		containers: []*runtimeapi.Container{
			container("c1", "u1", running), container("c2", "u1", running),
			container("c3", "u2", running), container("c4", "u2", exited),
			container("c5", "u3", exited), container("c6", "u3", created),
			container("c7", "u3", unknown),
			container("c-foreign", "", running),
		},
	})
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

func (n *nodeStub) runtimePods() [][]types.UID {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([][]types.UID(nil), n.runtime...)
}

type harness struct {
	t    *testing.T
	sys  *actor.ActorSystem
	clk  *clocktesting.FakeClock
	rt   *fakeLister
	m    *fakeMetrics
	node *nodeStub
	nPID *actor.PID
	pleg *actor.PID
}

func newHarness(t *testing.T, rt *fakeLister) *harness {
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
	h.pleg = h.sys.Root.Spawn(actor.PropsFromProducer(New(h.nPID, rt, h.clk, Config{Period: period, Threshold: time.Minute}, h.m, quiet)))
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
	done := make(chan struct{})
	h.sys.Root.Send(h.nPID, flush{done: done})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		h.t.Fatal("node stub did not flush")
	}
}

// next steps the clock by one period and waits for the relist it triggers.
func (h *harness) next() {
	h.t.Helper()
	actortest.Eventually(h.t, "a relist to be armed", h.clk.HasWaiters)
	n := h.rt.callCount()
	h.clk.Step(period)
	actortest.Eventually(h.t, "the relist to start", func() bool { return h.rt.callCount() > n })
	h.settle()
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

func sameUIDs(a, b []types.UID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPLEGReportsRuntimeChangesToTheNode(t *testing.T) {
	rt := &fakeLister{}
	rt.set(
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
	if got := h.node.runtimePods(); len(got) != 1 || !sameUIDs(got[0], uids("u1", "u2")) {
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
			rt.set(s.sandboxes, s.containers)
			h.next()
			if got := h.node.takeEvents(); !equal(got, s.events) {
				t.Errorf("events = %v, want %v", got, s.events)
			}
			got := h.node.runtimePods()
			ok := len(got) == len(s.runtime)
			for i := 0; ok && i < len(got); i++ {
				ok = sameUIDs(got[i], s.runtime[i])
			}
			if !ok {
				t.Errorf("RuntimePods = %v, want %v", got, s.runtime)
			}
		})
	}
}

func TestPLEGSendsEmptyRuntimePodsOnFirstRelist(t *testing.T) {
	h := newHarness(t, &fakeLister{})
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
	rt := &fakeLister{gate: make(chan struct{})}
	rt.set(nil, []*runtimeapi.Container{container("c1", "u1", running)})
	h := newHarness(t, rt)

	// The first relist hangs in the runtime. Time passes: no second relist
	// starts, and the actor still answers.
	actortest.Eventually(t, "the first relist to start", func() bool { return rt.callCount() == 1 })
	for range 5 {
		h.clk.Step(period)
	}
	if hl := h.health(); !hl.LastRelist.IsZero() {
		t.Errorf("LastRelist = %v before any relist finished", hl.LastRelist)
	}
	if got := rt.callCount(); got != 1 {
		t.Fatalf("relists started while one is in flight = %d, want 1", got)
	}
	if h.clk.HasWaiters() {
		t.Fatal("a relist is armed while one is in flight")
	}
	rt.mu.Lock()
	close(rt.gate)
	rt.gate = nil
	rt.mu.Unlock()
	h.settle()

	// From now on: one relist per period, not before.
	for i := range 3 {
		before := rt.callCount()
		h.clk.Step(period - time.Millisecond)
		if !h.clk.HasWaiters() {
			t.Fatalf("round %d: relist fired before the period elapsed", i)
		}
		h.clk.Step(time.Millisecond)
		actortest.Eventually(t, "the periodic relist", func() bool { return rt.callCount() == before+1 })
		h.settle()
	}
	rt.mu.Lock()
	maxInFlight := rt.maxInFlight
	rt.mu.Unlock()
	if maxInFlight != 1 {
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
			rt := &fakeLister{}
			rt.set([]*runtimeapi.PodSandbox{sandbox("s1", "u1", ready)}, []*runtimeapi.Container{container("c1", "u1", running)})
			h := newHarness(t, rt)
			h.settle()
			hl := h.health()
			if hl.RuntimeErr != "" || !hl.LastRelist.Equal(t0) || hl.Threshold != time.Minute {
				t.Fatalf("healthy: %+v, want no error, LastRelist %v, Threshold 1m", hl, t0)
			}
			h.node.takeEvents()

			rt.failWith(tt.sandboxErr, tt.containErr)
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
			rt.failWith(nil, nil)
			rt.set([]*runtimeapi.PodSandbox{sandbox("s1", "u1", ready)}, []*runtimeapi.Container{container("c1", "u1", exited)})
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
	rt := &fakeLister{}
	rt.set(
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
					rt.failWith(errors.New("down"), nil)
				} else {
					rt.set(s.sandboxes, s.containers)
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
