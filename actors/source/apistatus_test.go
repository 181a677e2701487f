package source

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

// chanWatcher hands the test the watch's callbacks.
type chanWatcher struct{ upsert chan func(*v1.Pod) }

func (w chanWatcher) WatchPods(ctx context.Context, upsert, _ func(*v1.Pod), synced func()) {
	synced()
	w.upsert <- upsert
	<-ctx.Done()
}

// TestAPISourceTellsStatusWhatTheAPIHolds: a pod's status changed in the
// API server by another writer (the node lifecycle controller after an API
// server outage) goes to the StatusActor, which writes its own again; a
// change of the status only does not go to the NodeActor.
func TestAPISourceTellsStatusWhatTheAPIHolds(t *testing.T) {
	sys, node, nodePID := newSystem(t)
	var mu sync.Mutex
	var got []*messages.PodAPIStatus
	statusPID := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.PodAPIStatus:
			mu.Lock()
			got = append(got, m)
			mu.Unlock()
		case flush:
			c.Respond(m)
		}
	}))
	w := chanWatcher{upsert: make(chan func(*v1.Pod), 1)}
	src := sys.Root.Spawn(actor.PropsFromProducer(NewAPI(nodePID, statusPID, w, quietLog())))
	t.Cleanup(func() { sys.Root.Stop(src) })
	upsert := <-w.upsert

	p := pod("a", "uid-a")
	p.ResourceVersion = "5"
	p.Status.Phase = v1.PodRunning
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	upsert(p)
	marked := p.DeepCopy()
	marked.ResourceVersion = "7"
	marked.Status.Conditions[0].Status = v1.ConditionFalse
	upsert(marked)
	same := marked.DeepCopy()
	same.ResourceVersion = "8" // a change elsewhere: the status is the same
	upsert(same)

	statuses := func() []*messages.PodAPIStatus {
		mu.Lock()
		defer mu.Unlock()
		return append([]*messages.PodAPIStatus(nil), got...)
	}
	actortest.Eventually(t, "two statuses to the StatusActor", func() bool { return len(statuses()) == 2 })
	s := statuses()
	if s[0].ResourceVersion != "5" || s[1].ResourceVersion != "7" || s[1].Status.Conditions[0].Status != v1.ConditionFalse {
		t.Fatalf("statuses %+v %+v", s[0], s[1])
	}
	// Every upsert was handled once the resync's set reached the node
	// (the source handles its mailbox in order); then whatever the source
	// sent the StatusActor is in (flush).
	sys.Root.Send(src, &messages.Resync{})
	actortest.Eventually(t, "the resync handled", func() bool { u := node.updates(); return len(u) == 2 && u[1].Op == messages.OpSet })
	if u := node.updates(); u[0].Op != messages.OpAdd {
		t.Fatalf("node got %s, want the add and the resync's set only (a status change is not the node's)", describe(node.snapshot()))
	}
	if _, err := sys.Root.RequestFuture(statusPID, flush{}, 5*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	if n := len(statuses()); n != 2 {
		t.Fatalf("%d statuses, want 2: an unchanged status is not sent again", n)
	}
}
