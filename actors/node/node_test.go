package node

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

var quiet = slog.New(slog.DiscardHandler)

// --- test doubles ---

// barrier is answered by every test actor (and by a middleware in front of
// the NodeActor) once everything queued before it has been handled.
type barrier struct{ done chan struct{} }

// Orders the test gives a stub PodActor.
type (
	terminate struct{} // report PodTerminated to the parent
	needPod   struct{} // ask the parent for the pod (as a restarted PodActor)
)

// incarnation is one run of a stub PodActor.
type incarnation struct {
	pid     *actor.PID
	msgs    []string
	stopped chan struct{}
	// newSince is each SyncPod's NewSince, in order.
	newSince []time.Time
	// synced is each SyncPod's pod, pending each PodResizePending, in
	// order (resize_test.go).
	synced  []*v1.Pod
	pending []*messages.PodResizePending
}

// recorder is shared by the stub PodActors, the status stub and the
// source stubs.
type recorder struct {
	mu      sync.Mutex
	pods    map[types.UID][]*incarnation
	status  []string              // "update <uid> <phase> <reason>" or "forget <uid>"
	last    map[types.UID]*v1.Pod // the newest PodStatusUpdate of each pod
	sources map[string]int
	desired map[bool]int
	// stopGate, when set, holds a stopping PodActor of that UID until closed;
	// stopping is closed once the actor is held there.
	stopGate map[types.UID]chan struct{}
	stopping map[types.UID]chan struct{}
}

func newRecorder() *recorder {
	return &recorder{
		pods:     map[types.UID][]*incarnation{},
		last:     map[types.UID]*v1.Pod{},
		sources:  map[string]int{},
		desired:  map[bool]int{},
		stopGate: map[types.UID]chan struct{}{},
		stopping: map[types.UID]chan struct{}{},
	}
}

// podProps is the PodProps given to the NodeActor: a stub that records.
func (r *recorder) podProps(uid types.UID) *actor.Props {
	var inc *incarnation
	// Registered at spawn time, inside the NodeActor's SpawnNamed, so that
	// quiesce sees every PodActor the NodeActor has made.
	register := actor.WithOnInit(func(c actor.Context) {
		r.mu.Lock()
		inc = &incarnation{pid: c.Self(), stopped: make(chan struct{})}
		r.pods[uid] = append(r.pods[uid], inc)
		r.mu.Unlock()
	})
	return actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Stopping:
			r.mu.Lock()
			gate, held := r.stopGate[uid], r.stopping[uid]
			r.mu.Unlock()
			if gate != nil {
				close(held)
				<-gate
			}
		case *actor.Stopped:
			close(inc.stopped)
		case *messages.SyncPod:
			r.note(inc, "SyncPod "+m.Pod.Spec.Containers[0].Image)
			r.mu.Lock()
			inc.newSince = append(inc.newSince, m.NewSince)
			inc.synced = append(inc.synced, m.Pod)
			r.mu.Unlock()
		case *messages.PodResizePending:
			r.mu.Lock()
			inc.pending = append(inc.pending, m)
			r.mu.Unlock()
		case *messages.KillPod:
			r.note(inc, "KillPod")
		case *messages.PodLifecycleEvent:
			r.note(inc, fmt.Sprintf("Event %s %s", m.Type, m.ID))
		case *messages.Resync:
			r.note(inc, "Resync")
		case *messages.StartGranted:
			r.note(inc, "StartGranted")
		case askSlot:
			c.Send(c.Parent(), &messages.StartSlot{UID: uid})
		case doneSlot:
			c.Send(c.Parent(), &messages.StartDone{UID: uid})
		case terminate:
			c.Send(c.Parent(), &messages.PodTerminated{UID: uid})
		case needPod:
			c.Send(c.Parent(), &messages.NeedPod{UID: uid})
		case barrier:
			close(m.done)
		}
	}, register)
}

func (r *recorder) note(inc *incarnation, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	inc.msgs = append(inc.msgs, s)
}

func (r *recorder) statusReceive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.PodStatusUpdate:
		r.mu.Lock()
		r.status = append(r.status, fmt.Sprintf("update %s %s %s", m.Pod.UID, m.Pod.Status.Phase, m.Pod.Status.Reason))
		r.last[m.Pod.UID] = m.Pod
		r.mu.Unlock()
	case *messages.PodForget:
		r.mu.Lock()
		r.status = append(r.status, "forget "+string(m.UID))
		r.mu.Unlock()
	case *messages.PodsKnown:
		uids := make([]string, 0, len(m.UIDs))
		for uid := range m.UIDs {
			uids = append(uids, string(uid))
		}
		slices.Sort(uids)
		r.mu.Lock()
		r.status = append(r.status, "known "+strings.Join(uids, ","))
		r.mu.Unlock()
	case barrier:
		close(m.done)
	}
}

func (r *recorder) sourceReceive(name string) actor.ReceiveFunc {
	return func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.Resync:
			r.mu.Lock()
			r.sources[name]++
			r.mu.Unlock()
		case barrier:
			close(m.done)
		}
	}
}

// SetDesiredPods makes the recorder the NodeActor's Metrics.
func (r *recorder) SetDesiredPods(static bool, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.desired[static] = n
}

var _ Metrics = (*recorder)(nil)

// --- harness ---

type harness struct {
	t      *testing.T
	sys    *actor.ActorSystem
	rec    *recorder
	node   *actor.PID
	status *actor.PID
	srcs   []*actor.PID
}

// barrierMiddleware answers barrier in front of the NodeActor, which does
// not know the message.
func barrierMiddleware(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		if b, ok := env.Message.(barrier); ok {
			close(b.done)
			return
		}
		next(c, env)
	}
}

// newHarness starts a NodeActor with cfg. Source stubs are made for the
// names in sourcePIDs and put into cfg.SourcePIDs.
func newHarness(t *testing.T, cfg Config, sourcePIDs ...string) *harness {
	t.Helper()
	return newHarnessWith(t, cfg, nil, sourcePIDs...)
}

// newHarnessWith is newHarness with more stub actors in the same system,
// spawned first under their names (so cfg may name their PIDs, made with
// stubPID).
func newHarnessWith(t *testing.T, cfg Config, stubs map[string]actor.ReceiveFunc, sourcePIDs ...string) *harness {
	t.Helper()
	h := &harness{
		t:   t,
		sys: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet })),
		rec: newRecorder(),
	}
	h.status = h.sys.Root.Spawn(actor.PropsFromFunc(h.rec.statusReceive))
	for name, receive := range stubs {
		pid, err := h.sys.Root.SpawnNamed(actor.PropsFromFunc(receive), name)
		if err != nil {
			t.Fatalf("spawn %s: %v", name, err)
		}
		t.Cleanup(func() { h.sys.Root.Stop(pid) })
	}
	for _, name := range sourcePIDs {
		pid := h.sys.Root.Spawn(actor.PropsFromFunc(h.rec.sourceReceive(name)))
		h.srcs = append(h.srcs, pid)
		cfg.SourcePIDs = append(cfg.SourcePIDs, pid)
	}
	props := actor.PropsFromProducer(New(cfg, h.status, h.rec.podProps, h.rec, quiet),
		actor.WithReceiverMiddleware(barrierMiddleware))
	node, err := h.sys.Root.SpawnNamed(props, "node")
	if err != nil {
		t.Fatalf("spawn node: %v", err)
	}
	h.node = node
	t.Cleanup(func() {
		h.rec.mu.Lock()
		for uid, g := range h.rec.stopGate {
			close(g)
			delete(h.rec.stopGate, uid)
		}
		h.rec.mu.Unlock()
		h.sys.Root.Stop(h.node)
		h.sys.Root.Stop(h.status)
		for _, p := range h.srcs {
			h.sys.Root.Stop(p)
		}
	})
	return h
}

func (h *harness) send(m any) { h.sys.Root.Send(h.node, m) }

// await sends a barrier to pid and waits for it, unless the actor stops.
func (h *harness) await(pid *actor.PID, stopped <-chan struct{}) {
	h.t.Helper()
	done := make(chan struct{})
	h.sys.Root.Send(pid, barrier{done: done})
	select {
	case <-done:
	case <-stopped:
	case <-time.After(10 * time.Second):
		h.t.Fatalf("%s did not answer a barrier", pid.Id)
	}
}

// quiesce waits until the NodeActor has handled everything sent so far and
// the stubs have handled everything it sent them.
func (h *harness) quiesce() {
	h.t.Helper()
	h.await(h.node, nil)
	h.rec.mu.Lock()
	var live []*incarnation
	for _, incs := range h.rec.pods {
		live = append(live, incs...)
	}
	h.rec.mu.Unlock()
	for _, inc := range live {
		select {
		case <-inc.stopped:
		default:
			h.await(inc.pid, inc.stopped)
		}
	}
	h.await(h.status, nil)
	for _, p := range h.srcs {
		h.await(p, nil)
	}
}

// msgs returns what each incarnation of uid's PodActor received, as
// "msg,msg|msg" (incarnations separated by |); "" when none was spawned.
func (h *harness) msgs(uid string) string {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	var parts []string
	for _, inc := range h.rec.pods[types.UID(uid)] {
		parts = append(parts, strings.Join(inc.msgs, ","))
	}
	return strings.Join(parts, "|")
}

func (h *harness) statusLog() []string {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	return append([]string(nil), h.rec.status...)
}

func (h *harness) latest(uid string) *incarnation {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	incs := h.rec.pods[types.UID(uid)]
	if len(incs) == 0 {
		return nil
	}
	return incs[len(incs)-1]
}

// tell gives an order to the newest PodActor of uid.
func (h *harness) tell(uid string, m any) {
	h.t.Helper()
	inc := h.latest(uid)
	if inc == nil {
		h.t.Fatalf("no pod actor for %s", uid)
	}
	h.sys.Root.Send(inc.pid, m)
	// What the order makes it send to the NodeActor is then queued there.
	h.await(inc.pid, inc.stopped)
}

// terminated has uid's PodActor report PodTerminated and waits until the
// NodeActor has stopped it.
func (h *harness) terminated(uid string) {
	h.t.Helper()
	inc := h.latest(uid)
	h.tell(uid, terminate{})
	select {
	case <-inc.stopped:
	case <-time.After(10 * time.Second):
		h.t.Fatalf("pod actor %s not stopped after PodTerminated", uid)
	}
}

func (h *harness) alive(uid string) bool {
	inc := h.latest(uid)
	if inc == nil {
		return false
	}
	select {
	case <-inc.stopped:
		return false
	default:
		return true
	}
}

// askSlot / doneSlot make a stub pod actor ask for or give back its start slot.
type askSlot struct{}
type doneSlot struct{}

func TestStartSlotsBoundParallelStarts(t *testing.T) {
	h := newHarness(t, Config{NodeName: "n1", MaxParallelStarts: 2})
	h.send(set(messages.SourceFile, mkPod("a", "img"), mkPod("b", "img"), mkPod("c", "img"), mkPod("d", "img")))
	h.quiesce()
	for _, uid := range []string{"a", "b", "c", "d"} {
		h.tell(uid, askSlot{})
	}
	h.quiesce()
	granted := func() string {
		var out []string
		for _, uid := range []string{"a", "b", "c", "d"} {
			if strings.Contains(h.msgs(uid), "StartGranted") {
				out = append(out, uid)
			}
		}
		return strings.Join(out, ",")
	}
	if got := granted(); got != "a,b" {
		t.Fatalf("granted %q, want a,b (two at a time, in order)", got)
	}
	h.tell("a", doneSlot{})
	h.quiesce()
	if got := granted(); got != "a,b,c" {
		t.Fatalf("after a is done: granted %q, want a,b,c", got)
	}
	// A pod removed while waiting frees its place; one removed while
	// starting frees its slot.
	h.send(set(messages.SourceFile, mkPod("a", "img"), mkPod("c", "img"), mkPod("d", "img")))
	h.quiesce()
	if got := granted(); got != "a,b,c,d" {
		t.Fatalf("after b is removed: granted %q, want a,b,c,d", got)
	}
}

func mkPod(uid, image string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pod-" + uid, UID: types.UID(uid)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: image}}},
	}
}

func set(source string, pods ...*v1.Pod) *messages.PodUpdate {
	return &messages.PodUpdate{Source: source, Op: messages.OpSet, Pods: pods}
}

func add(source string, pods ...*v1.Pod) *messages.PodUpdate {
	return &messages.PodUpdate{Source: source, Op: messages.OpAdd, Pods: pods}
}

func remove(source string, pods ...*v1.Pod) *messages.PodUpdate {
	return &messages.PodUpdate{Source: source, Op: messages.OpRemove, Pods: pods}
}

// step is one thing the test does, then what every pod's actors should
// have received so far and what the status should have been told so far.
type step struct {
	name   string
	do     func(h *harness)
	pods   map[string]string
	status []string
}

func (h *harness) run(steps []step) {
	h.t.Helper()
	parent := h.t
	for _, s := range steps {
		ok := parent.Run(s.name, func(t *testing.T) {
			h.t = t
			defer func() { h.t = parent }()
			s.do(h)
			h.quiesce()
			for uid, want := range s.pods {
				if got := h.msgs(uid); got != want {
					t.Errorf("pod %s received %q, want %q", uid, got, want)
				}
			}
			if got := h.statusLog(); !slices.Equal(got, s.status) {
				t.Errorf("status told %q, want %q", got, s.status)
			}
		})
		if !ok {
			parent.FailNow()
		}
	}
}

func sendAll(ms ...any) func(h *harness) {
	return func(h *harness) {
		for _, m := range ms {
			h.send(m)
		}
	}
}

// --- tests ---

func TestSetSourceLifecycle(t *testing.T) {
	h := newHarness(t, Config{NodeName: "n1", Sources: []string{messages.SourceFile}})
	h.run([]step{
		{
			name: "first set spawns one pod actor per UID with SyncPod",
			do:   sendAll(set(messages.SourceFile, mkPod("a", "img:1"), mkPod("b", "img:1"))),
			pods: map[string]string{"a": "SyncPod img:1", "b": "SyncPod img:1"},
		},
		{
			name: "an identical set sends nothing",
			do:   sendAll(set(messages.SourceFile, mkPod("a", "img:1"), mkPod("b", "img:1"))),
			pods: map[string]string{"a": "SyncPod img:1", "b": "SyncPod img:1"},
		},
		{
			name: "a changed spec sends SyncPod to that pod only",
			do:   sendAll(set(messages.SourceFile, mkPod("a", "img:2"), mkPod("b", "img:1"))),
			pods: map[string]string{"a": "SyncPod img:1,SyncPod img:2", "b": "SyncPod img:1"},
		},
		{
			name: "a pod missing from the next set is killed",
			do:   sendAll(set(messages.SourceFile, mkPod("a", "img:2"))),
			pods: map[string]string{"a": "SyncPod img:1,SyncPod img:2", "b": "SyncPod img:1,KillPod"},
		},
		{
			name: "the same set again does not kill twice",
			do:   sendAll(set(messages.SourceFile, mkPod("a", "img:2"))),
			pods: map[string]string{"b": "SyncPod img:1,KillPod"},
		},
		{
			name: "PodTerminated: the status forgets the pod and its actor stops",
			do: func(h *harness) {
				h.terminated("b")
			},
			pods:   map[string]string{"a": "SyncPod img:1,SyncPod img:2", "b": "SyncPod img:1,KillPod"},
			status: []string{"forget b"},
		},
	})
	if h.alive("b") {
		t.Error("pod actor b still runs")
	}
	if !h.alive("a") {
		t.Error("pod actor a stopped")
	}
}

func TestPushSourceAddAndRemove(t *testing.T) {
	h := newHarness(t, Config{NodeName: "n1"})
	h.run([]step{
		{
			name: "add spawns",
			do:   sendAll(add(messages.SourcePush, mkPod("a", "img:1"))),
			pods: map[string]string{"a": "SyncPod img:1"},
		},
		{
			name: "a second add keeps the first pod",
			do:   sendAll(add(messages.SourcePush, mkPod("b", "img:1"))),
			pods: map[string]string{"a": "SyncPod img:1", "b": "SyncPod img:1"},
		},
		{
			name: "add of a changed pod syncs it",
			do:   sendAll(add(messages.SourcePush, mkPod("a", "img:2"))),
			pods: map[string]string{"a": "SyncPod img:1,SyncPod img:2", "b": "SyncPod img:1"},
		},
		{
			name: "remove kills that pod only",
			do:   sendAll(remove(messages.SourcePush, mkPod("a", "img:2"))),
			pods: map[string]string{"a": "SyncPod img:1,SyncPod img:2,KillPod", "b": "SyncPod img:1"},
		},
		{
			name: "remove by another source is ignored",
			do:   sendAll(remove(messages.SourceFile, mkPod("b", "img:1"))),
			pods: map[string]string{"b": "SyncPod img:1"},
		},
		{
			name: "remove of an unknown pod is harmless",
			do:   sendAll(remove(messages.SourcePush, mkPod("zzz", "img:1"))),
			pods: map[string]string{"zzz": "", "b": "SyncPod img:1"},
		},
	})
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	if h.rec.desired[false] != 0 || h.rec.desired[true] != 1 {
		t.Errorf("desired pods static=%d api=%d, want 1 and 0", h.rec.desired[true], h.rec.desired[false])
	}
}

func TestMaxPodsAdmission(t *testing.T) {
	h := newHarness(t, Config{NodeName: "n1", MaxPods: 2})
	rejected := "update c Failed OutOfpods"
	h.run([]step{
		{
			name:   "the third pod is rejected with OutOfpods and gets no actor",
			do:     sendAll(set(messages.SourceFile, mkPod("a", "img:1"), mkPod("b", "img:1"), mkPod("c", "img:1"))),
			pods:   map[string]string{"a": "SyncPod img:1", "b": "SyncPod img:1", "c": ""},
			status: []string{rejected},
		},
		{
			name:   "sending it again changes nothing",
			do:     sendAll(set(messages.SourceFile, mkPod("a", "img:1"), mkPod("b", "img:1"), mkPod("c", "img:1"))),
			pods:   map[string]string{"c": ""},
			status: []string{rejected},
		},
		{
			name:   "a status Resync republishes the rejection and resyncs the pod actors",
			do:     sendAll(&messages.Resync{}),
			pods:   map[string]string{"a": "SyncPod img:1,Resync", "b": "SyncPod img:1,Resync", "c": ""},
			status: []string{rejected, rejected},
		},
		{
			name:   "removing the rejected pod makes the status forget it",
			do:     sendAll(set(messages.SourceFile, mkPod("a", "img:1"), mkPod("b", "img:1"))),
			pods:   map[string]string{"a": "SyncPod img:1,Resync", "b": "SyncPod img:1,Resync", "c": ""},
			status: []string{rejected, rejected, "forget c"},
		},
		{
			name:   "a Resync no longer republishes it",
			do:     sendAll(&messages.Resync{}),
			pods:   map[string]string{"a": "SyncPod img:1,Resync,Resync", "c": ""},
			status: []string{rejected, rejected, "forget c"},
		},
	})
}

func TestPodEventsGoToTheOwningPodActor(t *testing.T) {
	h := newHarness(t, Config{NodeName: "n1"})
	h.run([]step{
		{
			name: "pods",
			do:   sendAll(set(messages.SourceFile, mkPod("a", "img:1"), mkPod("b", "img:1"))),
			pods: map[string]string{"a": "SyncPod img:1", "b": "SyncPod img:1"},
		},
		{
			name: "events are routed by UID, unknown UIDs dropped",
			do: sendAll(&messages.PodEvents{Events: []messages.PodLifecycleEvent{
				{UID: "a", Type: messages.ContainerDied, ID: "c1"},
				{UID: "ghost", Type: messages.ContainerStarted, ID: "c9"},
				{UID: "b", Type: messages.SandboxChanged, ID: "s2"},
				{UID: "a", Type: messages.ContainerRemoved, ID: "c1"},
			}}),
			pods: map[string]string{
				"a":     "SyncPod img:1,Event ContainerDied c1,Event ContainerRemoved c1",
				"b":     "SyncPod img:1,Event SandboxChanged s2",
				"ghost": "",
			},
		},
	})
}

func TestOrphansAreKilledOnlyOnceAllSourcesAreSynced(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "runtime pods known before the sources sync",
			steps: []step{
				{
					name: "runtime lists a desired pod and an orphan: nothing yet",
					do:   sendAll(&messages.RuntimePods{UIDs: []types.UID{"a", "x"}}),
					pods: map[string]string{"a": "", "x": ""},
				},
				{
					name: "file syncs: push is not synced yet",
					do:   sendAll(set(messages.SourceFile, mkPod("a", "img:1"))),
					pods: map[string]string{"a": "SyncPod img:1", "x": ""},
				},
				{
					name: "push syncs: the orphan is killed",
					do:   sendAll(&messages.SourceSynced{Source: messages.SourcePush}),
					pods: map[string]string{"a": "SyncPod img:1", "x": "KillPod"},
				},
				{
					name: "the orphan killer asks again: it is told to kill",
					do:   func(h *harness) { h.tell("x", needPod{}) },
					pods: map[string]string{"x": "KillPod,KillPod"},
				},
				{
					name: "a later RuntimePods still listing it spawns no second killer",
					do:   sendAll(&messages.RuntimePods{UIDs: []types.UID{"a", "x"}}),
					pods: map[string]string{"a": "SyncPod img:1", "x": "KillPod,KillPod"},
				},
				{
					name:   "the orphan is gone",
					do:     func(h *harness) { h.terminated("x") },
					pods:   map[string]string{"x": "KillPod,KillPod"},
					status: []string{"forget x"},
				},
			},
		},
		{
			name: "runtime pods arriving after the sources synced",
			steps: []step{
				{
					name: "sources sync",
					do: sendAll(set(messages.SourceFile, mkPod("a", "img:1")),
						&messages.SourceSynced{Source: messages.SourcePush}),
					pods: map[string]string{"a": "SyncPod img:1"},
				},
				{
					name: "the orphan is killed at once",
					do:   sendAll(&messages.RuntimePods{UIDs: []types.UID{"a", "x"}}),
					pods: map[string]string{"a": "SyncPod img:1", "x": "KillPod"},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{NodeName: "n1", Sources: []string{messages.SourceFile, messages.SourcePush}})
			h.run(tt.steps)
		})
	}
}

func TestNeedPodIsAnswered(t *testing.T) {
	h := newHarness(t, Config{NodeName: "n1"})
	h.run([]step{
		{
			name: "pod",
			do:   sendAll(set(messages.SourceFile, mkPod("a", "img:1"))),
			pods: map[string]string{"a": "SyncPod img:1"},
		},
		{
			name: "NeedPod is answered with the desired pod",
			do:   func(h *harness) { h.tell("a", needPod{}) },
			pods: map[string]string{"a": "SyncPod img:1,SyncPod img:1"},
		},
		{
			name: "the newest spec is sent",
			do: func(h *harness) {
				h.send(set(messages.SourceFile, mkPod("a", "img:2")))
				h.quiesce()
				h.tell("a", needPod{})
			},
			pods: map[string]string{"a": "SyncPod img:1,SyncPod img:1,SyncPod img:2,SyncPod img:2"},
		},
		{
			name: "while killing, NeedPod is answered with KillPod",
			do: func(h *harness) {
				h.send(set(messages.SourceFile))
				h.quiesce()
				h.tell("a", needPod{})
			},
			pods: map[string]string{"a": "SyncPod img:1,SyncPod img:1,SyncPod img:2,SyncPod img:2,KillPod,KillPod"},
		},
	})
}

// TestOnlyANewPodsFirstSyncPodSaysSo: the first SyncPod of a PodActor
// spawned for a UID the NodeActor held nothing of carries NewSince (its
// first read may come from the runtime cache); a restarted one's answer to
// NeedPod and later updates do not. A pod re-added after its kill ended
// (nothing of it left in the runtime) is new again.
func TestOnlyANewPodsFirstSyncPodSaysSo(t *testing.T) {
	h := newHarness(t, Config{NodeName: "n1"})
	h.send(set(messages.SourceFile, mkPod("a", "img:1")))
	h.quiesce()
	h.tell("a", needPod{})
	h.send(set(messages.SourceFile, mkPod("a", "img:2")))
	h.quiesce()
	h.send(set(messages.SourceFile))
	h.send(set(messages.SourceFile, mkPod("a", "img:3")))
	h.quiesce()
	h.terminated("a")
	actortest.Eventually(t, "a new pod actor for a", func() bool { return h.alive("a") })
	h.quiesce()
	if got, want := h.msgs("a"), "SyncPod img:1,SyncPod img:1,SyncPod img:2,KillPod|SyncPod img:3"; got != want {
		t.Fatalf("a received %q, want %q", got, want)
	}
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	incs := h.rec.pods["a"]
	for i, want := range [][]bool{{true, false, false}, {true}} {
		var got []bool
		for _, t := range incs[i].newSince {
			got = append(got, !t.IsZero())
		}
		if !slices.Equal(got, want) {
			t.Errorf("incarnation %d: SyncPods with NewSince %v, want %v", i, got, want)
		}
	}
}

func TestStartedAsksEverySourceToResync(t *testing.T) {
	h := newHarness(t, Config{NodeName: "n1"}, "file", "push", "api")
	h.quiesce()
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	for _, s := range []string{"file", "push", "api"} {
		if h.rec.sources[s] != 1 {
			t.Errorf("source %s got %d Resync, want 1", s, h.rec.sources[s])
		}
	}
}

func TestPodReaddedWhileKilling(t *testing.T) {
	tests := []struct {
		name string
		// between removal and PodTerminated
		meanwhile []any
		want      string // all incarnations of a
	}{
		{
			name:      "re-added: respawned after PodTerminated with the newest pod",
			meanwhile: []any{set(messages.SourceFile, mkPod("a", "img:2")), set(messages.SourceFile, mkPod("a", "img:3"))},
			want:      "SyncPod img:1,KillPod|SyncPod img:3",
		},
		{
			name:      "re-added then removed again: not respawned",
			meanwhile: []any{set(messages.SourceFile, mkPod("a", "img:2")), set(messages.SourceFile)},
			want:      "SyncPod img:1,KillPod",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{NodeName: "n1"})
			h.send(set(messages.SourceFile, mkPod("a", "img:1")))
			h.send(set(messages.SourceFile))
			for _, m := range tt.meanwhile {
				h.send(m)
			}
			h.quiesce()
			if got := h.msgs("a"); got != "SyncPod img:1,KillPod" {
				t.Fatalf("before PodTerminated a received %q", got)
			}
			h.terminated("a")
			if strings.Contains(tt.want, "|") {
				actortest.Eventually(t, "a new pod actor for a", func() bool { return h.alive("a") })
			}
			h.quiesce()
			if got := h.msgs("a"); got != tt.want {
				t.Errorf("a received %q, want %q", got, tt.want)
			}
			if got := h.statusLog(); !slices.Equal(got, []string{"forget a"}) {
				t.Errorf("status told %q", got)
			}
		})
	}
}

// TestRecorderForgetsAPodOnceItsActorStopped: the recorder (cluster mode's
// keeps what it knows per pod) is told a pod is gone after its PodActor
// stopped, so after its last event; not before, and not for a pod re-added
// meanwhile until its second actor stops too.
func TestRecorderForgetsAPodOnceItsActorStopped(t *testing.T) {
	ev := &fakeEvents{}
	h := newHarness(t, Config{NodeName: "n1", Events: ev})
	h.send(set(messages.SourceFile, mkPod("a", "img:1"), mkPod("b", "img:1")))
	h.send(set(messages.SourceFile, mkPod("b", "img:1")))
	h.quiesce()
	if got := ev.all(); len(got) != 0 {
		t.Fatalf("told %q before a's actor stopped", got)
	}
	h.terminated("a")
	h.quiesce()
	if got := ev.all(); !slices.Equal(got, []string{"forget a"}) {
		t.Errorf("told %q, want [forget a]", got)
	}
}

// After a respawn the desired-pods gauge must count the pod again.
func TestDesiredPodsAfterRespawn(t *testing.T) {
	h := newHarness(t, Config{NodeName: "n1"})
	h.send(set(messages.SourceFile, mkPod("a", "img:1"), mkPod("b", "img:1")))
	h.send(set(messages.SourceFile, mkPod("b", "img:1")))
	h.send(set(messages.SourceFile, mkPod("a", "img:2"), mkPod("b", "img:1")))
	h.quiesce()
	h.terminated("a")
	actortest.Eventually(t, "a respawned", func() bool { return h.alive("a") })
	h.quiesce()
	h.rec.mu.Lock()
	n := h.rec.desired[true]
	h.rec.mu.Unlock()
	if n != 2 {
		t.Errorf("desired static pods = %d after the respawn, want 2", n)
	}
}

// An orphan that a source starts to want while it is being killed must end
// up owned by that source, so that the source can remove it again.
func TestOrphanClaimedWhileKilling(t *testing.T) {
	tests := []struct {
		name string
		// after the orphan killer was started, before PodTerminated
		meanwhile []any
		// after PodTerminated
		after []any
		want  string
	}{
		{
			name:      "claimed, respawned, then removed by its source: killed",
			meanwhile: []any{add(messages.SourcePush, mkPod("x", "img:1"))},
			after:     []any{remove(messages.SourcePush, mkPod("x", "img:1"))},
			want:      "KillPod|SyncPod img:1,KillPod",
		},
		{
			name:      "claimed then removed before PodTerminated: not respawned",
			meanwhile: []any{add(messages.SourcePush, mkPod("x", "img:1")), remove(messages.SourcePush, mkPod("x", "img:1"))},
			want:      "KillPod",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{NodeName: "n1", Sources: []string{messages.SourceFile}})
			h.send(set(messages.SourceFile))
			h.send(&messages.RuntimePods{UIDs: []types.UID{"x"}})
			for _, m := range tt.meanwhile {
				h.send(m)
			}
			h.quiesce()
			if got := h.msgs("x"); got != "KillPod" {
				t.Fatalf("x received %q, want KillPod", got)
			}
			h.terminated("x")
			if strings.Contains(tt.want, "|") {
				actortest.Eventually(t, "x respawned for the push source", func() bool { return h.alive("x") })
			}
			for _, m := range tt.after {
				h.send(m)
			}
			h.quiesce()
			if got := h.msgs("x"); got != tt.want {
				t.Errorf("x received %q, want %q", got, tt.want)
			}
		})
	}
}

// A pod re-added in the window between PodTerminated and the end of the
// old PodActor's stop must still be run once the name is free.
func TestPodReaddedWhileOldActorIsStopping(t *testing.T) {
	h := newHarness(t, Config{NodeName: "n1"})
	h.send(set(messages.SourceFile, mkPod("a", "img:1")))
	h.send(set(messages.SourceFile))
	h.quiesce()

	gate, held := make(chan struct{}), make(chan struct{})
	h.rec.mu.Lock()
	h.rec.stopGate["a"], h.rec.stopping["a"] = gate, held
	h.rec.mu.Unlock()
	// No barrier after terminate: the gated stop may overtake it.
	h.sys.Root.Send(h.latest("a").pid, terminate{})
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("old pod actor never began stopping")
	}

	// The old actor is stopping and still holds the name; the pod comes back.
	h.send(set(messages.SourceFile, mkPod("a", "img:2")))
	h.await(h.node, nil)
	h.rec.mu.Lock()
	delete(h.rec.stopGate, "a")
	h.rec.mu.Unlock()
	close(gate)

	actortest.Eventually(t, "a new pod actor for a running img:2", func() bool {
		return strings.HasSuffix(h.msgs("a"), "|SyncPod img:2")
	})
}

// A UID wanted by two sources: when the owner removes it, the other
// source's pod must run.
func TestPodWantedByTwoSources(t *testing.T) {
	h := newHarness(t, Config{NodeName: "n1"})
	h.send(set(messages.SourceFile, mkPod("a", "img:1")))
	h.send(add(messages.SourcePush, mkPod("a", "img:push")))
	h.send(set(messages.SourceFile))
	h.quiesce()
	if got := h.msgs("a"); got != "SyncPod img:1,KillPod" {
		t.Fatalf("a received %q", got)
	}
	h.terminated("a")
	actortest.Eventually(t, "a respawned for the push source", func() bool {
		return strings.HasSuffix(h.msgs("a"), "|SyncPod img:push")
	})
}
