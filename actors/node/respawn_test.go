package node

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

// fakeEvents records events as "<type> <reason> <object name>: <message>".
type fakeEvents struct {
	mu     sync.Mutex
	events []string
}

var _ Recorder = (*fakeEvents)(nil)

func (f *fakeEvents) Eventf(obj runtime.Object, eventtype, reason, format string, args ...interface{}) {
	name := ""
	if p, ok := obj.(*v1.Pod); ok {
		name = p.Name
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, fmt.Sprintf("%s %s %s: %s", eventtype, reason, name, fmt.Sprintf(format, args...)))
}

// Forget records "forget <uid>": the node's recorder is told a pod is gone.
func (f *fakeEvents) Forget(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, "forget "+string(uid))
}

func (f *fakeEvents) all() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events...)
}

const (
	respawnBase = time.Minute
	respawnCap  = 4 * time.Minute
)

// newRespawnHarness is newHarness on a fake clock, with events recorded
// and a status stub that also answers GetPod from what it was told.
func newRespawnHarness(t *testing.T) (*harness, *clocktesting.FakeClock, *fakeEvents) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	ev := &fakeEvents{}
	h := &harness{
		t:   t,
		sys: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet })),
		rec: newRecorder(),
	}
	h.status = h.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.GetPod); ok {
			h.rec.mu.Lock()
			defer h.rec.mu.Unlock()
			for _, p := range h.rec.last {
				if p.Namespace == m.Namespace && p.Name == m.Name {
					c.Respond(&messages.PodFound{Pod: p.DeepCopy()})
					return
				}
			}
			c.Respond(&messages.PodFound{})
			return
		}
		h.rec.statusReceive(c)
	}))
	cfg := Config{NodeName: "n1", Clock: clk, RespawnBackoff: respawnBase, RespawnBackoffMax: respawnCap, Events: ev}
	props := actor.PropsFromProducer(New(cfg, h.status, h.rec.podProps, h.rec, quiet), actor.WithReceiverMiddleware(barrierMiddleware, panicOnBoom))
	node, err := h.sys.Root.SpawnNamed(props, "node")
	if err != nil {
		t.Fatalf("spawn node: %v", err)
	}
	h.node = node
	t.Cleanup(func() {
		h.sys.Root.Stop(h.node)
		h.sys.Root.Stop(h.status)
	})
	return h, clk, ev
}

// crash stops uid's newest PodActor from outside, as its supervisor does
// when it failed too often, and waits until the NodeActor armed the
// respawn.
// waitReported waits until the pod's status says its worker failed.
func (h *harness) waitReported(uid string) {
	h.t.Helper()
	actortest.Eventually(h.t, uid+" reported", func() bool {
		p := h.lastStatus(uid)
		return p != nil && p.Status.Reason == ReasonPodWorkerFailed
	})
}

func (h *harness) crash(clk *clocktesting.FakeClock, uid string) {
	h.t.Helper()
	inc := h.latest(uid)
	h.sys.Root.Stop(inc.pid)
	<-inc.stopped
	actortest.Eventually(h.t, "respawn armed for "+uid, clk.HasWaiters)
	h.quiesce()
}

func (h *harness) incarnations(uid string) int {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	return len(h.rec.pods[types.UID(uid)])
}

func (h *harness) lastStatus(uid string) *v1.Pod {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	return h.rec.last[types.UID(uid)]
}

// publishRunning tells the status stub what a PodActor would have: uid
// Running and Ready.
func (h *harness) publishRunning(uid string) {
	p := mkPod(uid, "img")
	p.Status = v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}
	h.sys.Root.Send(h.status, &messages.PodStatusUpdate{Pod: p})
}

// TestPodActorStoppedUnaskedIsReportedAndRespawned: a PodActor that ends
// without the NodeActor asking (its supervisor stopped it for failing too
// often) gets its pod reported (event, Ready False with the reason, the
// phase kept) and is spawned again with the pod after the back-off, which
// doubles for the next stop. Nothing else happens to the other pods.
func TestPodActorStoppedUnaskedIsReportedAndRespawned(t *testing.T) {
	h, clk, ev := newRespawnHarness(t)
	h.send(set(messages.SourceFile, mkPod("a", "img"), mkPod("b", "img")))
	h.publishRunning("a")
	h.quiesce()

	h.crash(clk, "a")
	h.waitReported("a")
	p := h.lastStatus("a")
	if p.Status.Phase != v1.PodRunning || !strings.Contains(p.Status.Message, "failed too often") || !strings.Contains(p.Status.Message, "1m0s") {
		t.Fatalf("status of a = %s %q", p.Status.Phase, p.Status.Message)
	}
	if len(p.Status.Conditions) != 1 || p.Status.Conditions[0].Status != v1.ConditionFalse || p.Status.Conditions[0].Reason != ReasonPodWorkerFailed {
		t.Fatalf("conditions of a = %+v, want Ready False %s", p.Status.Conditions, ReasonPodWorkerFailed)
	}
	if got := ev.all(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning PodWorkerFailed pod-a: ") {
		t.Fatalf("events = %q", got)
	}

	// Not before the back-off.
	clk.Step(respawnBase - time.Millisecond)
	h.quiesce()
	if n := h.incarnations("a"); n != 1 {
		t.Fatalf("a respawned before its back-off (%d incarnations)", n)
	}
	clk.Step(time.Millisecond)
	actortest.Eventually(t, "a respawned after the back-off", func() bool { return h.alive("a") })
	h.quiesce()
	if got := h.msgs("a"); got != "SyncPod img|SyncPod img" {
		t.Fatalf("a received %q", got)
	}
	if got := h.msgs("b"); got != "SyncPod img" || h.incarnations("b") != 1 {
		t.Fatalf("b received %q in %d incarnations: untouched expected", got, h.incarnations("b"))
	}

	// A second stop in a row: twice the back-off.
	h.crash(clk, "a")
	clk.Step(2*respawnBase - time.Millisecond)
	h.quiesce()
	if n := h.incarnations("a"); n != 2 {
		t.Fatalf("a respawned before its doubled back-off (%d incarnations)", n)
	}
	clk.Step(time.Millisecond)
	actortest.Eventually(t, "a respawned after the doubled back-off", func() bool { return h.alive("a") && h.incarnations("a") == 3 })
}

// TestDeletedWhileDownIsKilledNotRespawned: a pod removed from its source
// while its PodActor is down is not run again: a PodActor is spawned at
// once with the kill only (what runs is removed), and nothing is spawned
// when the back-off ends.
func TestDeletedWhileDownIsKilledNotRespawned(t *testing.T) {
	h, clk, _ := newRespawnHarness(t)
	h.send(set(messages.SourceFile, mkPod("a", "img")))
	h.publishRunning("a")
	h.quiesce()
	h.crash(clk, "a")

	h.send(set(messages.SourceFile))
	actortest.Eventually(t, "a killer spawned at once", func() bool { return h.alive("a") })
	h.quiesce()
	if got := h.msgs("a"); got != "SyncPod img|KillPod" {
		t.Fatalf("a received %q, want the kill only after the stop", got)
	}
	h.terminated("a")
	actortest.Eventually(t, "a forgotten", func() bool {
		log := h.statusLog()
		return len(log) > 0 && log[len(log)-1] == "forget a"
	})
	clk.Step(10 * respawnCap)
	h.quiesce()
	if n := h.incarnations("a"); n != 2 || h.alive("a") {
		t.Fatalf("a spawned again after it was deleted (%d incarnations)", n)
	}
}

// TestStoppedWhileKillingIsKilledAfterTheBackoff: a PodActor stopped while
// killing its pod is spawned again after the back-off with the kill.
func TestStoppedWhileKillingIsKilledAfterTheBackoff(t *testing.T) {
	h, clk, ev := newRespawnHarness(t)
	h.send(set(messages.SourceFile, mkPod("a", "img")))
	h.send(set(messages.SourceFile))
	h.quiesce()
	h.crash(clk, "a")
	clk.Step(respawnBase)
	actortest.Eventually(t, "a respawned", func() bool { return h.alive("a") })
	h.quiesce()
	if got := h.msgs("a"); got != "SyncPod img,KillPod|KillPod" {
		t.Fatalf("a received %q", got)
	}
	if got := ev.all(); len(got) != 0 {
		t.Fatalf("events for a pod being killed: %q", got)
	}
}

// TestResyncRepublishesDownPods: a restarted StatusActor asks for every
// pod again; the status of a pod whose PodActor is down comes from the
// NodeActor.
func TestResyncRepublishesDownPods(t *testing.T) {
	h, clk, _ := newRespawnHarness(t)
	h.send(set(messages.SourceFile, mkPod("a", "img")))
	h.publishRunning("a")
	h.quiesce()
	h.crash(clk, "a")
	h.waitReported("a")
	before := len(h.statusLog())
	h.send(&messages.Resync{})
	h.quiesce()
	log := h.statusLog()
	if len(log) <= before || !strings.Contains(strings.Join(log[before:], ";"), "update a Running "+ReasonPodWorkerFailed) {
		t.Fatalf("status told %q after Resync", log[before:])
	}
}

// TestNodeRestartDoesNotReport: the PodActors that end because the
// NodeActor itself restarts are neither reported nor respawned by the old
// incarnation.
func TestNodeRestartDoesNotReport(t *testing.T) {
	h, _, ev := newRespawnHarness(t)
	h.send(set(messages.SourceFile, mkPod("a", "img"), mkPod("b", "img")))
	h.quiesce()
	a, b := h.latest("a"), h.latest("b")
	h.send(boom{})
	<-a.stopped
	<-b.stopped
	h.quiesce()
	if got := ev.all(); len(got) != 0 {
		t.Fatalf("events after the NodeActor's own restart: %q", got)
	}
	if got := h.statusLog(); len(got) != 0 {
		t.Fatalf("status told %q after the NodeActor's own restart", got)
	}
}

// boom makes the NodeActor of newRespawnHarness panic (it restarts).
type boom struct{}

func panicOnBoom(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		if _, ok := env.Message.(boom); ok {
			panic("boom")
		}
		next(c, env)
	}
}

func TestWorkerFailedStatus(t *testing.T) {
	pod := mkPod("a", "img")
	running := pod.DeepCopy()
	running.Status = v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
		{Type: v1.PodInitialized, Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: v1.ConditionTrue}}}
	done := pod.DeepCopy()
	done.Status = v1.PodStatus{Phase: v1.PodSucceeded}
	tests := []struct {
		name       string
		last       *v1.Pod
		known      bool
		wantPhase  v1.PodPhase
		wantReason string
		wantConds  int
	}{
		{name: "running pod: phase kept, Ready False", last: running, known: true, wantPhase: v1.PodRunning, wantReason: ReasonPodWorkerFailed, wantConds: 2},
		{name: "never published: Pending", known: true, wantPhase: v1.PodPending, wantReason: ReasonPodWorkerFailed, wantConds: 1},
		{name: "status unreadable: Unknown", wantPhase: v1.PodUnknown, wantReason: ReasonPodWorkerFailed, wantConds: 1},
		{name: "finished: left as it is", last: done, known: true, wantPhase: v1.PodSucceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := workerFailedStatus(pod, tt.last, tt.known, "msg", running.CreationTimestamp)
			if got.Status.Phase != tt.wantPhase || got.Status.Reason != tt.wantReason || len(got.Status.Conditions) != tt.wantConds {
				t.Fatalf("status = %+v", got.Status)
			}
			if tt.wantReason != "" {
				for _, c := range got.Status.Conditions {
					if c.Type == v1.PodReady && (c.Status != v1.ConditionFalse || c.Reason != ReasonPodWorkerFailed || c.Message != "msg") {
						t.Fatalf("Ready = %+v", c)
					}
				}
			}
			if tt.last != nil && tt.last.Status.Conditions != nil && tt.last.Status.Conditions[len(tt.last.Status.Conditions)-1].Status != v1.ConditionTrue {
				t.Fatal("the last status was modified")
			}
		})
	}
}
