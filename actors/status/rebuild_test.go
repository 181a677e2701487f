package status

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/supervisors"
)

const readWait = 5 * time.Second

// rebuildHarness runs a StatusActor under a restarting parent (chaos
// middleware, so a ChaosPanic crashes it), with a node stub that records
// Resyncs and a fake clock for the read wait.
type rebuildHarness struct {
	t     *testing.T
	sys   *actor.ActorSystem
	clk   *clocktesting.FakeClock
	node  *nodeStub
	nodeP *actor.PID
	pid   *actor.PID
}

func newRebuildHarness(t *testing.T) *rebuildHarness {
	t.Helper()
	h := &rebuildHarness{t: t, sys: newSystem(), clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	h.nodeP, h.node = spawnNodeStub(h.sys)
	props := actor.PropsFromProducer(New(h.nodeP, WithClock(h.clk), WithReadWait(readWait), WithResyncEvery(time.Hour), WithLogger(quiet)),
		actor.WithReceiverMiddleware(supervisors.Chaos(), actortest.Barrier()))
	h.pid = spawnChild(t, h.sys, props)
	return h
}

// spawnChild spawns props under a parent that restarts its children, and
// returns the child's PID.
func spawnChild(t *testing.T, sys *actor.ActorSystem, props *actor.Props) *actor.PID {
	t.Helper()
	type spawnIt struct{}
	parent := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(spawnIt); ok {
			c.Respond(c.Spawn(props))
		}
	}, actor.WithSupervisor(actor.NewRestartingStrategy())))
	t.Cleanup(func() { _ = sys.Root.StopFuture(parent).Wait() })
	res, err := sys.Root.RequestFuture(parent, spawnIt{}, 5*time.Second).Result()
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	return res.(*actor.PID)
}

func (h *rebuildHarness) send(msgs ...any) {
	for _, m := range msgs {
		h.sys.Root.Send(h.pid, m)
	}
}

// answer is the node's ResyncPods to the newest Resync.
func (h *rebuildHarness) answer(uids ...types.UID) {
	h.send(&messages.ResyncPods{Ask: h.node.lastAsk(), UIDs: uids})
}

// client is the sender of one read: it records the replies, so a test can
// tell "not answered" for certain (sync the StatusActor, then the client).
type client struct {
	h   *rebuildHarness
	pid *actor.PID
	mu  sync.Mutex
	got []any
}

// ask sends msg now (queued behind what was sent before) from a new client.
func (h *rebuildHarness) ask(msg any) *client {
	c := &client{h: h}
	c.pid = h.sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started, *actor.Stopping, *actor.Stopped:
			return
		}
		c.mu.Lock()
		c.got = append(c.got, ctx.Message())
		c.mu.Unlock()
	}, actor.WithReceiverMiddleware(actortest.Barrier())))
	h.t.Cleanup(func() { h.sys.Root.Stop(c.pid) })
	h.sys.Root.RequestWithCustomSender(h.pid, msg, c.pid)
	return c
}

func (c *client) replies() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]any(nil), c.got...)
}

func (h *rebuildHarness) sync() { actortest.Sync(h.t, h.sys, h.pid) }

// notAnswered checks the actor handled the request and kept it waiting:
// a reply would be in the client's mailbox before the barrier's.
func (h *rebuildHarness) notAnswered(what string, c *client) {
	h.t.Helper()
	h.sync()
	actortest.Sync(h.t, h.sys, c.pid)
	if r := c.replies(); len(r) > 0 {
		h.t.Fatalf("%s answered during the rebuild: %s", what, describe(r[0]))
	}
}

// reply waits for the client's one reply.
func (h *rebuildHarness) reply(what string, c *client) any {
	h.t.Helper()
	actortest.Eventually(h.t, what+" answered", func() bool { return len(c.replies()) > 0 })
	r := c.replies()
	if len(r) != 1 {
		h.t.Fatalf("%s: %d replies", what, len(r))
	}
	return r[0]
}

func describe(r any) string {
	switch m := r.(type) {
	case *messages.PodList:
		if m == nil {
			return "nil PodList"
		}
		return "PodList [" + strings.Join(summary(m.Items), ",") + "]"
	case *messages.PodFound:
		if m == nil || m.Pod == nil {
			return "PodFound(not found)"
		}
		return "PodFound " + m.Pod.Namespace + "/" + m.Pod.Name
	case *messages.StatusUnavailable:
		if m != nil {
			return "StatusUnavailable " + m.Reason
		}
	}
	return "something else"
}

// A restarted StatusActor starts empty. Until every pod the NodeActor
// listed has reported again (or was forgotten), reads wait and, after the
// read wait, get StatusUnavailable: never the short list the old actor
// answered (the issue saw 2, 110, 113, ... of 201 pods).
func TestRestartedStatusActorNeverServesAPartialList(t *testing.T) {
	h := newRebuildHarness(t)
	actortest.Eventually(t, "the first Resync", func() bool { return h.node.count() == 1 })
	firstAsk := h.node.lastAsk()
	h.answer() // nothing yet at the first start
	h.send(update("default", "a", "u1", v1.PodRunning), update("default", "b", "u2", v1.PodRunning),
		update("default", "c", "u3", v1.PodRunning))
	if got := summary(getPods(t, h.sys, h.pid)); !slices.Equal(got, []string{"default/a=Running", "default/b=Running", "default/c=Running"}) {
		t.Fatalf("before the restart: %v", got)
	}

	h.send(&messages.ChaosPanic{Reason: "test"})
	actortest.Eventually(t, "a Resync from the restarted actor", func() bool { return h.node.count() == 2 })
	if h.node.lastAsk() == firstAsk {
		t.Fatalf("the restarted actor asks with the old incarnation's Ask")
	}
	// An answer to the earlier incarnation's Resync does not count, and
	// one pod reports again before the node's answer.
	h.send(&messages.ResyncPods{Ask: firstAsk})
	h.send(update("default", "a", "u1", v1.PodRunning))
	early := h.ask(&messages.GetPods{})
	h.notAnswered("GetPods before the node's answer", early)

	h.answer("u1", "u2", "u3")
	list := h.ask(&messages.GetPods{})
	one := h.ask(&messages.GetPod{Namespace: "default", Name: "c"})
	unknown := h.ask(&messages.GetPod{Namespace: "default", Name: "nope"})
	h.notAnswered("GetPods with 2 of 3 pods missing", list)
	h.notAnswered("GetPod of a pod not back yet", one)
	h.notAnswered("GetPod of an unknown pod", unknown)

	// The read wait passes: 503 material, with the count.
	h.clk.Step(readWait)
	for what, ch := range map[string]*client{"early GetPods": early, "GetPods": list, "GetPod": one, "unknown GetPod": unknown} {
		r := h.reply(what, ch)
		u, ok := r.(*messages.StatusUnavailable)
		if !ok {
			t.Fatalf("%s after the read wait: %s, want StatusUnavailable", what, describe(r))
		}
		if what != "early GetPods" && (u.Missing != 2 || u.Expected != 3 || u.Reason == "") {
			t.Errorf("%s: %+v, want 2 of 3 missing with a reason", what, u)
		}
	}

	// A read of one pod is answered as soon as that pod is back.
	list = h.ask(&messages.GetPods{})
	one = h.ask(&messages.GetPod{Namespace: "default", Name: "c"})
	h.notAnswered("GetPod", one)
	h.send(update("default", "c", "u3", v1.PodPending))
	r := h.reply("GetPod of c", one)
	if found, ok := r.(*messages.PodFound); !ok || found.Pod == nil || found.Pod.UID != "u3" {
		t.Fatalf("GetPod of c once back: %s", describe(r))
	}
	h.notAnswered("GetPods with 1 of 3 pods missing", list)

	// The last one is forgotten (deleted meanwhile): the view is whole.
	h.send(&messages.PodForget{UID: "u2"})
	r = h.reply("GetPods", list)
	got, ok := r.(*messages.PodList)
	if !ok {
		t.Fatalf("GetPods once rebuilt: %s", describe(r))
	}
	if s := summary(got.Items); !slices.Equal(s, []string{"default/a=Running", "default/c=Pending"}) {
		t.Fatalf("GetPods once rebuilt: %v", s)
	}
	// Rebuilt: an unknown pod is "not found" at once.
	r = h.reply("GetPod", h.ask(&messages.GetPod{Namespace: "default", Name: "nope"}))
	if f, ok := r.(*messages.PodFound); !ok || f.Pod != nil {
		t.Fatalf("GetPod of an unknown pod once rebuilt: %s", describe(r))
	}
}

// Reads waiting when the actor crashes again are answered at once, not
// left to their caller's timeout.
func TestStatusActorCrashAnswersWaitingReads(t *testing.T) {
	h := newRebuildHarness(t)
	actortest.Eventually(t, "the first Resync", func() bool { return h.node.count() == 1 })
	list := h.ask(&messages.GetPods{})
	h.notAnswered("GetPods before the node's answer", list)
	h.send(&messages.ChaosPanic{Reason: "test"})
	r := h.reply("GetPods", list)
	if u, ok := r.(*messages.StatusUnavailable); !ok || u.Reason == "" {
		t.Fatalf("waiting GetPods after a crash: %s", describe(r))
	}
	actortest.Eventually(t, "a Resync from the restarted actor", func() bool { return h.node.count() == 2 })
	h.answer()
	if got := getPods(t, h.sys, h.pid); len(got) != 0 {
		t.Fatalf("pods %v", summary(got))
	}
}

// At start-up the StatusActor is spawned before the NodeActor: its first
// Resync goes to dead letters, and it asks again soon (not after the
// ResyncEvery period).
func TestStatusActorAsksANodeSpawnedAfterIt(t *testing.T) {
	sys := newSystem()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	nodePID := actor.NewPID(sys.Address(), "node-later")
	pid := sys.Root.Spawn(actor.PropsFromProducer(New(nodePID, WithClock(clk), WithReadWait(time.Hour), WithResyncEvery(time.Hour), WithLogger(quiet)),
		actor.WithReceiverMiddleware(actortest.Barrier())))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	actortest.Sync(t, sys, pid)

	n := &nodeStub{}
	if _, err := sys.Root.SpawnNamed(nodeStubProps(n), "node-later"); err != nil {
		t.Fatal(err)
	}
	// The retry is due after at most a second of back-off (50 ms doubling).
	actortest.Eventually(t, "a Resync at the node spawned later", func() bool {
		actortest.Sync(t, sys, pid)
		clk.Step(100 * time.Millisecond)
		return n.count() >= 1
	})
	sys.Root.Send(pid, &messages.ResyncPods{Ask: n.lastAsk()})
	if got := getPods(t, sys, pid); len(got) != 0 {
		t.Fatalf("pods %v", summary(got))
	}
}

// In cluster mode (NewWithAPI) the StatusActor rebuilds the same way, on
// the writer's clock.
func TestClusterStatusActorWaitsForItsRebuild(t *testing.T) {
	h := &rebuildHarness{t: t, sys: newSystem(), clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	h.nodeP, h.node = spawnNodeStub(h.sys)
	h.pid = h.sys.Root.Spawn(actor.PropsFromProducer(NewWithAPI(h.nodeP, newFakeAPI(), WriterConfig{}, h.clk, quiet),
		actor.WithReceiverMiddleware(actortest.Barrier())))
	t.Cleanup(func() { _ = h.sys.Root.StopFuture(h.pid).Wait() })
	actortest.Eventually(t, "the first Resync", func() bool { return h.node.count() == 1 })
	list := h.ask(&messages.GetPods{})
	h.notAnswered("GetPods before the node's answer", list)
	h.clk.Step(DefaultReadWait)
	if r := h.reply("GetPods", list); !isUnavailable(r) {
		t.Fatalf("GetPods after the read wait: %s", describe(r))
	}
	h.answer("u1")
	list = h.ask(&messages.GetPods{})
	h.notAnswered("GetPods with u1 missing", list)
	h.send(update("default", "a", "u1", v1.PodRunning))
	if r, ok := h.reply("GetPods", list).(*messages.PodList); !ok || len(r.Items) != 1 {
		t.Fatalf("GetPods once rebuilt: %s", describe(r))
	}
}

func isUnavailable(r any) bool {
	_, ok := r.(*messages.StatusUnavailable)
	return ok
}
