package node

import (
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

// An API pod whose graceful deletion has finished on the node stays in the
// API source until the API server deletes it. A relist that still lists it
// (it started before the PodActor removed everything) must not make it an
// orphan: its second "kill" would forget it and lose the final delete
// (issue: pods stuck Terminating at 500-2,000 deletions).
func TestDeletedAPIPodIsNoOrphanUntilItLeavesTheSource(t *testing.T) {
	h := newHarness(t, Config{NodeName: "n1", Sources: []string{messages.SourceAPI}})
	h.send(set(messages.SourceAPI, mkPod("a", "img:1")))
	h.send(&messages.RuntimePods{UIDs: []types.UID{"a"}})
	deleting := mkPod("a", "img:1")
	now := metav1.Now()
	grace := int64(30)
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, &grace
	h.send(add(messages.SourceAPI, deleting))
	h.quiesce()
	if got := h.msgs("a"); got != "SyncPod img:1,KillPod" {
		t.Fatalf("a received %q, want SyncPod then KillPod", got)
	}
	h.terminated("a")
	h.quiesce()

	// A stale relist still lists the pod.
	h.send(&messages.RuntimePods{UIDs: []types.UID{"a"}})
	h.quiesce()
	if got := h.msgs("a"); got != "SyncPod img:1,KillPod" {
		t.Fatalf("a received %q after a stale relist, want no orphan killer", got)
	}
	if log := h.statusLog(); len(log) == 0 || log[len(log)-1] != "forget a" {
		t.Fatalf("status log %v, want one final forget of a", log)
	}
	forgets := 0
	for _, l := range h.statusLog() {
		if l == "forget a" {
			forgets++
		}
	}
	if forgets != 1 {
		t.Fatalf("a forgotten %d times, want 1: %v", forgets, h.statusLog())
	}

	// Once the API server has deleted it, a relist still listing it (the
	// runtime really holds something) does make it an orphan.
	// (The first PodActor's end reaches the NodeActor as a system message,
	// maybe after this relist: relisted until it is seen, as the PLEG does.)
	h.send(remove(messages.SourceAPI, deleting))
	actortest.EventuallyDetail(t, "an orphan killer once deleted from the API", func() bool {
		h.send(&messages.RuntimePods{UIDs: []types.UID{"a"}})
		h.quiesce()
		return h.msgs("a") != "SyncPod img:1,KillPod"
	}, func() string { return h.msgs("a") })
	if got := h.msgs("a"); got != "SyncPod img:1,KillPod|KillPod" {
		t.Fatalf("a received %q once deleted from the API, want one orphan killer", got)
	}
}

// finalStatus is a status stub that keeps each PodForget: "forget <uid>
// delete" when it asks for the final delete from the API, else "forget
// <uid>".
type finalStatus struct {
	mu      sync.Mutex
	forgets []string
}

func (s *finalStatus) receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.PodForget:
		f := "forget " + string(m.UID)
		if m.DeleteFromAPI {
			f += " delete " + m.Namespace + "/" + m.Name
		}
		s.mu.Lock()
		s.forgets = append(s.forgets, f)
		s.mu.Unlock()
	case barrier:
		close(m.done)
	}
}

func (s *finalStatus) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.forgets...)
}

// reports counts the NodeActor's desired-pod reports (one follows each
// entry it drops once a PodActor has stopped).
type reports struct {
	mu sync.Mutex
	n  int
}

func (r *reports) SetDesiredPods(bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
}

func (r *reports) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

var _ Metrics = (*reports)(nil)

// An API pod whose graceful deletion finished here is deleted from the API
// once, by the StatusActor. Updates of it that the API server sends
// meanwhile (the echo of its last status patch: under a mass deletion it
// lands after the PodActor has gone) must not start a second PodActor to
// kill it again, and a second final delete (answered 404: 0.35-0.70 extra
// DELETEs per pod at 300-2,000 pods, issue 9 item 8). A restarted
// StatusActor, which lost the final deletes it held, gets them again on
// its Resync, until the API server has deleted the pod.
func TestFinishedDeletionIsNotKilledAgainAndIsHandedToARestartedStatusActor(t *testing.T) {
	st, m := &finalStatus{}, &reports{}
	h := &harness{t: t, sys: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet })), rec: newRecorder()}
	h.status = h.sys.Root.Spawn(actor.PropsFromFunc(st.receive))
	node, err := h.sys.Root.SpawnNamed(actor.PropsFromProducer(New(Config{NodeName: "n1", Sources: []string{messages.SourceAPI}},
		h.status, h.rec.podProps, m, quiet), actor.WithReceiverMiddleware(barrierMiddleware)), "node")
	if err != nil {
		t.Fatal(err)
	}
	h.node = node
	t.Cleanup(func() { h.sys.Root.Stop(h.node); h.sys.Root.Stop(h.status) })

	h.send(set(messages.SourceAPI, mkPod("a", "img:1")))
	h.send(&messages.RuntimePods{UIDs: []types.UID{"a"}})
	deleting := mkPod("a", "img:1")
	now := metav1.Now()
	grace := int64(2)
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, &grace
	h.send(add(messages.SourceAPI, deleting))
	h.quiesce()
	n := m.count()
	h.terminated("a")
	actortest.Eventually(t, "the NodeActor dropped a's entry", func() bool { return m.count() > n })
	h.quiesce()
	final := "forget a delete " + deleting.Namespace + "/" + deleting.Name

	steps := []struct {
		name    string
		send    []any
		msgs    string
		forgets []string
	}{
		{"terminated: one final delete", nil, "SyncPod img:1,KillPod", []string{final}},
		{"the echo of its status patch: no second kill, no second delete",
			[]any{add(messages.SourceAPI, echo(deleting, v1.PodSucceeded)), add(messages.SourceAPI, echo(deleting, v1.PodSucceeded))},
			"SyncPod img:1,KillPod", []string{final}},
		{"a restarted StatusActor asks: the final delete again",
			[]any{&messages.Resync{Ask: 1}}, "SyncPod img:1,KillPod", []string{final, final}},
		{"deleted from the API: nothing more on the next ask",
			[]any{remove(messages.SourceAPI, deleting), &messages.Resync{Ask: 2}}, "SyncPod img:1,KillPod", []string{final, final}},
	}
	for _, s := range steps {
		for _, msg := range s.send {
			h.send(msg)
		}
		h.quiesce()
		if got := h.msgs("a"); got != s.msgs {
			t.Fatalf("%s: a's PodActors received %q, want %q", s.name, got, s.msgs)
		}
		if got := st.got(); !slices.Equal(got, s.forgets) {
			t.Fatalf("%s: forgets %q, want %q", s.name, got, s.forgets)
		}
	}
}

// echo is p as the API server sends it after the node patched its status
// to phase.
func echo(p *v1.Pod, phase v1.PodPhase) *v1.Pod {
	out := p.DeepCopy()
	out.Status.Phase = phase
	out.ResourceVersion += "1"
	return out
}
