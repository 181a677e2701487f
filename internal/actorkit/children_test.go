package actorkit_test

import (
	"log/slog"
	"sync"
	"testing"
	"weak"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/internal/actortest"
)

// child holds a payload, as a PodActor holds its pod and statuses.
type child struct{ payload []byte }

func (*child) Receive(actor.Context) {}

type (
	spawnChildren struct{ n int }
	stopChildren  struct{}
)

// parent spawns children, sends each a message (which caches the
// process in the PID, as every send does) and stops them on command;
// forget says whether it calls ForgetStoppedChildren on each Terminated.
type parent struct {
	forget  bool
	mu      *sync.Mutex
	weak    *[]weak.Pointer[child]
	stopped *int
	pids    []*actor.PID
}

func (p *parent) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case spawnChildren:
		for range m.n {
			pid := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
				c := &child{payload: make([]byte, 64<<10)}
				p.mu.Lock()
				*p.weak = append(*p.weak, weak.Make(c))
				p.mu.Unlock()
				return c
			}))
			ctx.Send(pid, "hello")
			p.pids = append(p.pids, pid)
		}
	case stopChildren:
		for _, pid := range p.pids {
			ctx.Stop(pid)
		}
		p.pids = nil
	case *actor.Terminated:
		if p.forget {
			actorkit.ForgetStoppedChildren(ctx)
		}
		p.mu.Lock()
		*p.stopped++
		p.mu.Unlock()
	}
}

func TestStoppedChildrenAreCollected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		forget bool
	}{
		{name: "forgotten on Terminated: every stopped child is collected", forget: true},
		// What ForgetStoppedChildren is for: protoactor's set of children
		// keeps stopped children past its length. When this case fails,
		// protoactor clears the slots itself and the helper can go.
		{name: "not forgotten: the set of children keeps them", forget: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 20
			sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
			var (
				mu      sync.Mutex
				ws      []weak.Pointer[child]
				stopped int
			)
			pp := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
				return &parent{forget: tc.forget, mu: &mu, weak: &ws, stopped: &stopped}
			}))
			t.Cleanup(func() { _ = sys.Root.StopFuture(pp).Wait() })
			sys.Root.Send(pp, spawnChildren{n: n})
			sys.Root.Send(pp, stopChildren{})
			actortest.Eventually(t, "every child stopped", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return stopped == n
			})
			mu.Lock()
			got := append([]weak.Pointer[child](nil), ws...)
			mu.Unlock()
			if len(got) != n {
				t.Fatalf("%d children made, want %d", len(got), n)
			}
			if tc.forget {
				actortest.Collected(t, "stopped children", got)
				return
			}
			if alive := actortest.Alive(got); alive == 0 {
				t.Fatalf("no stopped child kept without ForgetStoppedChildren: protoactor clears its set now; drop the helper")
			}
		})
	}
}
