package actorkit_test

import (
	"log/slog"
	"runtime"
	"strconv"
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

func TestShrink(t *testing.T) {
	for _, tc := range []struct {
		name        string
		peak, after int
		rebuilt     bool
	}{
		{name: "small maps are left alone", peak: 100, after: 0, rebuilt: false},
		{name: "above a quarter of the peak: kept", peak: 1000, after: 251, rebuilt: false},
		{name: "a quarter of the peak: rebuilt", peak: 1000, after: 250, rebuilt: true},
		{name: "emptied: rebuilt", peak: 10000, after: 0, rebuilt: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s actorkit.Shrinker
			m := map[int]string{}
			for i := range tc.peak {
				m[i] = "v"
				m = actorkit.Shrink(&s, m)
			}
			orig := m
			for i := tc.after; i < tc.peak; i++ {
				delete(m, i)
				m = actorkit.Shrink(&s, m)
			}
			if len(m) != tc.after {
				t.Fatalf("%d entries left, want %d", len(m), tc.after)
			}
			for i := range tc.after {
				if m[i] != "v" {
					t.Fatalf("entry %d lost", i)
				}
			}
			// A rebuilt map is a new one: writing to it leaves the old alone.
			m[-1] = "new"
			_, inOrig := orig[-1]
			if rebuilt := !inOrig; rebuilt != tc.rebuilt {
				t.Fatalf("rebuilt %v, want %v", rebuilt, tc.rebuilt)
			}
		})
	}
}

func TestShrinkTracksThePeakAgain(t *testing.T) {
	var s actorkit.Shrinker
	m := map[int]bool{}
	fill := func(n int) {
		for i := range n {
			m[i] = true
			m = actorkit.Shrink(&s, m)
		}
	}
	drain := func() {
		for k := range m {
			delete(m, k)
			m = actorkit.Shrink(&s, m)
		}
	}
	fill(1000)
	drain()
	fill(400)
	before := m
	for i := range 300 {
		delete(m, i)
		m = actorkit.Shrink(&s, m)
	}
	before[-1] = true
	if _, same := m[-1]; same {
		t.Fatalf("a map refilled to 400 and drained to 100 was not rebuilt: the old peak of 1000 was kept")
	}
}

// BenchmarkShrinkReturnsMemory: the live heap of a map of 10,000 UIDs once
// all but 10 are deleted, without and with Shrink.
func BenchmarkShrinkReturnsMemory(b *testing.B) {
	for _, shrink := range []bool{false, true} {
		b.Run(map[bool]string{false: "kept", true: "shrunk"}[shrink], func(b *testing.B) {
			var live uint64
			for range b.N {
				var s actorkit.Shrinker
				m := map[string]*int{}
				for i := range 10000 {
					m[strconv.Itoa(i)+"-0000-0000-0000-000000000000"] = new(int)
				}
				for i := 10; i < 10000; i++ {
					delete(m, strconv.Itoa(i)+"-0000-0000-0000-000000000000")
					if shrink {
						m = actorkit.Shrink(&s, m)
					}
				}
				var ms0, ms1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms0)
				runtime.KeepAlive(m) // and dead from here
				runtime.GC()
				runtime.ReadMemStats(&ms1)
				live += ms0.HeapAlloc - ms1.HeapAlloc
			}
			b.ReportMetric(float64(live)/float64(b.N), "live-B/map")
		})
	}
}
