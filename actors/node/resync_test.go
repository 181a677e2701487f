package node

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlet/actorlet/messages"
)

// resyncStatus is a status stub that keeps the ResyncPods answers.
type resyncStatus struct {
	mu      sync.Mutex
	answers []string // "<ask>:<uid>,<uid>" (UIDs sorted)
}

func (s *resyncStatus) receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.ResyncPods:
		uids := make([]string, 0, len(m.UIDs))
		for _, u := range m.UIDs {
			uids = append(uids, string(u))
		}
		slices.Sort(uids)
		s.mu.Lock()
		s.answers = append(s.answers, fmt.Sprintf("%d:%s", m.Ask, strings.Join(uids, ",")))
		s.mu.Unlock()
	case barrier:
		close(m.done)
	}
}

func (s *resyncStatus) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.answers...)
}

// A restarted StatusActor's Resync is answered with the pods whose status
// it gets again (ResyncPods): every pod with a PodActor that is not being
// killed, and every rejected pod. While a source has not delivered its
// pods yet (the NodeActor restarted too) the set is not known, and the
// answer waits for it: an early, short answer would let the StatusActor
// serve a partial list.
func TestResyncIsAnsweredWithThePodsToComeBack(t *testing.T) {
	h, st := newResyncHarness(t, Config{NodeName: "n1", MaxPods: 2, Sources: []string{messages.SourceFile, messages.SourceAPI}})
	steps := []resyncStep{
		{name: "no answer before the sources delivered their pods", send: []any{&messages.Resync{Ask: 1}}},
		{name: "one source of two: still none",
			send: []any{set(messages.SourceFile, mkPod("a", "img"), mkPod("b", "img"), mkPod("c", "img"))}},
		{name: "every source synced: the running and the rejected pods",
			send: []any{set(messages.SourceAPI)}, want: []string{"1:a,b,c"}},
		{name: "a pod being killed is not awaited",
			send: []any{set(messages.SourceFile, mkPod("a", "img"), mkPod("c", "img")), &messages.Resync{Ask: 2}},
			want: []string{"1:a,b,c", "2:a,c"}},
	}
	runResyncSteps(t, h, st, steps)
}

// A source that never delivers (an unreachable manifest URL) does not keep
// the StatusActor waiting for good: its second ask (after its ResyncEvery)
// is answered with the pods known.
func TestResyncAskedAgainIsAnsweredBeforeEverySourceSynced(t *testing.T) {
	h, st := newResyncHarness(t, Config{NodeName: "n1", Sources: []string{messages.SourceFile, messages.SourceURL}})
	runResyncSteps(t, h, st, []resyncStep{
		{name: "first ask: no answer", send: []any{set(messages.SourceFile, mkPod("a", "img")), &messages.Resync{Ask: 1}}},
		{name: "asked again: the pods known", send: []any{&messages.Resync{Ask: 1}}, want: []string{"1:a"}},
		{name: "the late source answers no one again", send: []any{set(messages.SourceURL, mkPod("b", "img"))}, want: []string{"1:a"}},
	})
}

type resyncStep struct {
	name string
	send []any
	want []string
}

func runResyncSteps(t *testing.T, h *harness, st *resyncStatus, steps []resyncStep) {
	t.Helper()
	for _, s := range steps {
		for _, m := range s.send {
			h.send(m)
		}
		h.quiesce()
		if got := st.got(); !slices.Equal(got, s.want) {
			t.Fatalf("%s: answers %q, want %q", s.name, got, s.want)
		}
	}
}

func newResyncHarness(t *testing.T, cfg Config) (*harness, *resyncStatus) {
	t.Helper()
	st := &resyncStatus{}
	h := &harness{t: t, sys: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet })), rec: newRecorder()}
	h.status = h.sys.Root.Spawn(actor.PropsFromFunc(st.receive))
	node, err := h.sys.Root.SpawnNamed(actor.PropsFromProducer(New(cfg, h.status, h.rec.podProps, h.rec, quiet),
		actor.WithReceiverMiddleware(barrierMiddleware)), "node")
	if err != nil {
		t.Fatal(err)
	}
	h.node = node
	t.Cleanup(func() { h.sys.Root.Stop(h.node); h.sys.Root.Stop(h.status) })
	return h, st
}
