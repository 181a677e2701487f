package eviction

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

const (
	mi = uint64(1 << 20)
	gi = uint64(1 << 30)
)

// fakeStats serves a Summary the test changes.
type fakeStats struct {
	mu    sync.Mutex
	s     *statsapi.Summary
	err   error
	calls int
}

var _ SummaryProvider = (*fakeStats)(nil)

func (f *fakeStats) Summary(context.Context) (*statsapi.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	cp := *f.s // the tests replace summaries, never change one
	return &cp, nil
}

func (f *fakeStats) set(s *statsapi.Summary) {
	f.mu.Lock()
	f.s = s
	f.mu.Unlock()
}

func (f *fakeStats) called() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// event is one recorded event.
type event struct {
	kind, name, eventtype, reason, msg string
}

type fakeRecorder struct {
	mu     sync.Mutex
	events []event
}

var _ Recorder = (*fakeRecorder)(nil)

func (r *fakeRecorder) Eventf(obj runtime.Object, eventtype, reason, format string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := event{eventtype: eventtype, reason: reason, msg: fmt.Sprintf(format, args...)}
	switch o := obj.(type) {
	case *v1.Pod:
		e.kind, e.name = "Pod", o.Namespace+"/"+o.Name
	case *v1.ObjectReference:
		e.kind, e.name = o.Kind, o.Name
	}
	r.events = append(r.events, e)
}

func (r *fakeRecorder) list() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

type fakeMetrics struct {
	mu        sync.Mutex
	evictions map[string]int
}

var _ Metrics = (*fakeMetrics)(nil)

func (m *fakeMetrics) IncEvictions(signal string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.evictions == nil {
		m.evictions = map[string]int{}
	}
	m.evictions[signal]++
}

func (m *fakeMetrics) count(signal string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.evictions[signal]
}

// sink is a test actor that records what it gets and may answer.
type sink struct {
	mu     sync.Mutex
	got    []any
	answer func(ctx actor.Context, m any)
}

func (s *sink) Receive(ctx actor.Context) {
	m := ctx.Message()
	switch m.(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
		return
	}
	s.mu.Lock()
	s.got = append(s.got, m)
	answer := s.answer
	s.mu.Unlock()
	if answer != nil {
		answer(ctx, m)
	}
}

func (s *sink) messages() []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]any(nil), s.got...)
}

// evictions are the EvictPods the node sink got.
func (s *sink) evictions() []*messages.EvictPod {
	var out []*messages.EvictPod
	for _, m := range s.messages() {
		if e, ok := m.(*messages.EvictPod); ok {
			out = append(out, e)
		}
	}
	return out
}

func (s *sink) pressures() []messages.NodePressure {
	var out []messages.NodePressure
	for _, m := range s.messages() {
		if p, ok := m.(*messages.NodePressure); ok {
			out = append(out, *p)
		}
	}
	return out
}

// fakeNotifier is a MemoryNotifier the test fires.
type fakeNotifier struct {
	mu     sync.Mutex
	set    [][]int64
	fire   chan struct{}
	closed bool
}

var _ MemoryNotifier = (*fakeNotifier)(nil)

func (n *fakeNotifier) SetThresholds(usage []int64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.set = append(n.set, append([]int64(nil), usage...))
	return nil
}

func (n *fakeNotifier) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-n.fire:
		return nil
	}
}

func (n *fakeNotifier) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	return nil
}

func (n *fakeNotifier) thresholds() [][]int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([][]int64(nil), n.set...)
}

// harness runs one EvictionActor with fakes around it.
type harness struct {
	t       *testing.T
	sys     *actor.ActorSystem
	clk     *testclock.FakeClock
	stats   *fakeStats
	rec     *fakeRecorder
	metrics *fakeMetrics
	node    *sink
	sub     *sink
	images  *sink
	gc      *sink
	pid     *actor.PID
	nodePID *actor.PID

	mu        sync.Mutex
	pods      []v1.Pod
	coldStart bool
}

type option func(*Config, *harness)

func newHarness(t *testing.T, thresholds []Threshold, s *statsapi.Summary, pods []v1.Pod, opts ...option) *harness {
	t.Helper()
	h := &harness{
		t: t, sys: actor.NewActorSystem(), clk: testclock.NewFakeClock(time.Unix(10000, 0)),
		stats: &fakeStats{s: s}, rec: &fakeRecorder{}, metrics: &fakeMetrics{},
		node: &sink{}, sub: &sink{}, images: &sink{}, gc: &sink{}, pods: pods,
	}
	spawn := func(s *sink) *actor.PID {
		return h.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return s }, actor.WithReceiverMiddleware(actortest.Barrier())))
	}
	status := &sink{answer: func(ctx actor.Context, m any) {
		if _, ok := m.(*messages.GetPods); ok {
			h.mu.Lock()
			list := &messages.PodList{Items: podPointers(h.pods)}
			h.mu.Unlock()
			ctx.Respond(list)
		}
	}}
	h.nodePID = spawn(h.node)
	cfg := Config{
		Thresholds: thresholds, Clock: h.clk, Stats: h.stats, Status: spawn(status), Node: h.nodePID,
		Images: spawn(h.images), ContainerGC: spawn(h.gc), Subscribers: []*actor.PID{spawn(h.sub)},
		NodeName: "node-a", Events: h.rec, Metrics: h.metrics,
	}
	for _, o := range opts {
		o(&cfg, h)
	}
	if !h.coldStart {
		// The first pass of the incarnation runs at its start: it fails
		// here, so that each test's passes are the ones it asks for.
		h.stats.err = errNoStats
	}
	h.pid = h.sys.Root.Spawn(actor.PropsFromProducer(New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))), actor.WithReceiverMiddleware(actortest.Barrier())))
	t.Cleanup(func() { h.sys.Root.Stop(h.pid) })
	if !h.coldStart {
		h.evaluate()
		h.stats.mu.Lock()
		h.stats.err = nil
		h.stats.mu.Unlock()
	}
	return h
}

// coldStart keeps the first pass of the actor's start (on the given
// Summary) in the test.
func coldStart(_ *Config, h *harness) { h.coldStart = true }

// evaluate runs a pass and returns its outcome.
func (h *harness) evaluate() *messages.EvictionEvaluated {
	h.t.Helper()
	res, err := h.sys.Root.RequestFuture(h.pid, &messages.EvaluateEviction{}, 10*time.Second).Result()
	if err != nil {
		h.t.Fatalf("EvaluateEviction: %v", err)
	}
	out, ok := res.(*messages.EvictionEvaluated)
	if !ok {
		h.t.Fatalf("EvaluateEviction answered %T", res)
	}
	return out
}

func (h *harness) setPhase(uid types.UID, phase v1.PodPhase) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.pods {
		if h.pods[i].UID == uid {
			h.pods[i].Status.Phase = phase
		}
	}
}

// summary builds a Summary: node memory, node fs and image fs (bytes and
// inodes), and pods.
type summary struct {
	memAvail, memWorkingSet uint64
	fsCap, fsAvail          uint64
	imageFsCap, imageAvail  uint64
	inodes, inodesFree      uint64
	maxPID, procs           int64
	pods                    []statsapi.PodStats
}

func (s summary) build() *statsapi.Summary {
	out := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "node-a"}}
	if s.memAvail+s.memWorkingSet > 0 {
		usage := s.memWorkingSet + 100*mi
		out.Node.Memory = &statsapi.MemoryStats{AvailableBytes: u(s.memAvail), WorkingSetBytes: u(s.memWorkingSet), UsageBytes: &usage}
	}
	if s.fsCap > 0 {
		out.Node.Fs = &statsapi.FsStats{CapacityBytes: u(s.fsCap), AvailableBytes: u(s.fsAvail), Inodes: u(s.inodes), InodesFree: u(s.inodesFree)}
	}
	if s.imageFsCap > 0 {
		out.Node.Runtime = &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{CapacityBytes: u(s.imageFsCap), AvailableBytes: u(s.imageAvail)}}
	}
	if s.maxPID > 0 {
		out.Node.Rlimit = &statsapi.RlimitStats{MaxPID: &s.maxPID, NumOfRunningProcesses: &s.procs}
	}
	out.Pods = s.pods
	return out
}

func u(n uint64) *uint64 { return &n }

// podMem is a pod's stats with one container "app" using ws bytes of memory.
func podMem(p v1.Pod, ws uint64) statsapi.PodStats {
	return statsapi.PodStats{
		PodRef:     statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)},
		Memory:     &statsapi.MemoryStats{WorkingSetBytes: u(ws)},
		Containers: []statsapi.ContainerStats{{Name: "app", Memory: &statsapi.MemoryStats{WorkingSetBytes: u(ws)}}},
	}
}

// podDisk is a pod's stats with one container "app" writing rootfs bytes.
func podDisk(p v1.Pod, rootfs uint64) statsapi.PodStats {
	return statsapi.PodStats{
		PodRef: statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)},
		Containers: []statsapi.ContainerStats{{Name: "app",
			Rootfs: &statsapi.FsStats{UsedBytes: u(rootfs)}, Logs: &statsapi.FsStats{UsedBytes: u(0)}}},
	}
}

func podProcs(p v1.Pod, n uint64) statsapi.PodStats {
	return statsapi.PodStats{
		PodRef:       statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)},
		ProcessStats: &statsapi.ProcessStats{ProcessCount: &n},
	}
}

// pod is a running pod with one container "app" requesting and limiting
// memory as given ("" none).
func pod(name, request, limit string) v1.Pod {
	c := v1.Container{Name: "app", Image: "busybox"}
	if request != "" {
		c.Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(request)}
	}
	if limit != "" {
		c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse(limit)}
	}
	return v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{Containers: []v1.Container{c}},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}
}

func withPriority(p v1.Pod, prio int32) v1.Pod {
	p.Spec.Priority = &prio
	return p
}

func mustThresholds(t *testing.T, hard, soft, grace, minReclaim map[string]string) []Threshold {
	t.Helper()
	ts, err := ParseThresholds(hard, soft, grace, minReclaim)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

var errNoStats = errors.New("stats unavailable")

// actorContext is what a sink's answer gets.
type actorContext = actor.Context

// waitEvictions waits until the node was asked to evict exactly want, in
// order (a pass of the housekeeping period may have done it).
func (h *harness) waitEvictions(want ...v1.Pod) []*messages.EvictPod {
	h.t.Helper()
	// What the EvictionActor sent before its last answer is in.
	actortest.Sync(h.t, h.sys, h.nodePID)
	var got []*messages.EvictPod
	actortest.EventuallyDetail(h.t, fmt.Sprintf("%d evictions", len(want)), func() bool {
		got = h.node.evictions()
		if len(got) != len(want) {
			return false
		}
		for i := range want {
			if got[i].UID != want[i].UID {
				return false
			}
		}
		return true
	}, func() string {
		var uids []string
		for _, e := range h.node.evictions() {
			uids = append(uids, string(e.UID))
		}
		return fmt.Sprintf("evicted %v", uids)
	})
	return got
}

// podPointers is the StatusActor's list of pods (read only).
func podPointers(pods []v1.Pod) []*v1.Pod {
	out := make([]*v1.Pod, len(pods))
	for i := range pods {
		out[i] = pods[i].DeepCopy()
	}
	return out
}
