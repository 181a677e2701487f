package actorkit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	testclock "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/internal/actortest"
)

func TestBackoffDelay(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    actorkit.Backoff
		n    int
		want time.Duration
	}{
		{name: "none before the first", b: actorkit.Backoff{Base: time.Second, Cap: time.Minute}, n: 0, want: 0},
		{name: "first is the base", b: actorkit.Backoff{Base: 10 * time.Second, Cap: 300 * time.Second}, n: 1, want: 10 * time.Second},
		{name: "doubles", b: actorkit.Backoff{Base: 10 * time.Second, Cap: 300 * time.Second}, n: 3, want: 40 * time.Second},
		{name: "capped", b: actorkit.Backoff{Base: 10 * time.Second, Cap: 300 * time.Second}, n: 6, want: 300 * time.Second},
		{name: "far past the cap", b: actorkit.Backoff{Base: 10 * time.Second, Cap: 300 * time.Second}, n: 1000, want: 300 * time.Second},
		{name: "cap below base caps the base", b: actorkit.Backoff{Base: time.Second, Cap: time.Millisecond}, n: 1, want: time.Millisecond},
		{name: "no cap doubles on", b: actorkit.Backoff{Base: time.Second}, n: 11, want: 1024 * time.Second},
		{name: "no base, no delay", b: actorkit.Backoff{}, n: 4, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.b.Delay(tc.n); got != tc.want {
				t.Errorf("Delay(%d) = %s, want %s", tc.n, got, tc.want)
			}
		})
	}
}

// probe is a test actor: it arms timers and runs calls on command and
// records what reaches its handlers.
type probe struct {
	clk  *testclock.FakeClock
	self actorkit.Self
	tm   actorkit.Timer
	mu   *sync.Mutex
	got  *[]string
}

type (
	arm     struct{ d time.Duration }
	armAt   struct{ at time.Time }
	disarm  struct{}
	call    struct{ v string }
	restart struct{}
	result  struct {
		actorkit.Tag
		v string
	}
)

func (p *probe) record(s string) {
	p.mu.Lock()
	*p.got = append(*p.got, s)
	p.mu.Unlock()
}

func (p *probe) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.self = actorkit.Start(ctx, p.clk)
		p.tm = actorkit.NewTimer("wake")
	case *arm:
		p.tm.Arm(p.self, m.d)
	case *armAt:
		p.tm.ArmAt(p.self, m.at)
	case *disarm:
		p.tm.Stop()
	case *call:
		v := m.v
		actorkit.Go(p.self, time.Minute, func(ctx context.Context) *result {
			if _, ok := ctx.Deadline(); !ok {
				return &result{v: "no deadline"}
			}
			return &result{v: v}
		})
	case *restart:
		panic("restart on purpose")
	case *actorkit.Fired:
		if p.tm.Fired(p.self, m) {
			p.record("fired")
		} else {
			p.record("stale")
		}
	case *result:
		if p.self.Mine(m) {
			p.record("result " + m.v)
		} else {
			p.record("stale result")
		}
	}
}

func spawn(t *testing.T) (*actor.ActorSystem, *actor.PID, *testclock.FakeClock, func() []string) {
	t.Helper()
	sys := actor.NewActorSystem()
	clk := testclock.NewFakeClock(time.Unix(1000, 0))
	mu, got := &sync.Mutex{}, &[]string{}
	props := actor.PropsFromProducer(func() actor.Actor { return &probe{clk: clk, mu: mu, got: got} },
		actor.WithReceiverMiddleware(actortest.Barrier()))
	pid := sys.Root.Spawn(props)
	t.Cleanup(func() { sys.Root.Stop(pid) })
	return sys, pid, clk, func() []string {
		actortest.Sync(t, sys, pid)
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), *got...)
	}
}

func TestTimerFiresOnTheInjectedClock(t *testing.T) {
	sys, pid, clk, got := spawn(t)
	sys.Root.Send(pid, &arm{d: 10 * time.Second})
	actortest.Sync(t, sys, pid)
	clk.Step(9 * time.Second)
	if g := got(); len(g) != 0 {
		t.Fatalf("fired early: %v", g)
	}
	clk.Step(time.Second)
	actortest.Eventually(t, "the timer fired", func() bool { g := got(); return len(g) == 1 && g[0] == "fired" })
}

func TestTimerRearmReplacesAndStopDrops(t *testing.T) {
	sys, pid, clk, got := spawn(t)
	sys.Root.Send(pid, &arm{d: 5 * time.Second})
	sys.Root.Send(pid, &arm{d: 20 * time.Second}) // replaces the first
	actortest.Sync(t, sys, pid)
	clk.Step(10 * time.Second)
	if g := got(); len(g) != 0 {
		t.Fatalf("the replaced arming fired: %v", g)
	}
	sys.Root.Send(pid, &disarm{})
	actortest.Sync(t, sys, pid)
	clk.Step(30 * time.Second)
	if g := got(); len(g) != 0 {
		t.Fatalf("a stopped timer fired: %v", g)
	}
}

func TestTimerArmAtKeepsTheEarlier(t *testing.T) {
	sys, pid, clk, got := spawn(t)
	now := clk.Now()
	sys.Root.Send(pid, &armAt{at: now.Add(5 * time.Second)})
	sys.Root.Send(pid, &armAt{at: now.Add(50 * time.Second)}) // later: ignored
	actortest.Sync(t, sys, pid)
	clk.Step(5 * time.Second)
	actortest.Eventually(t, "the earlier arming fired", func() bool { g := got(); return len(g) == 1 && g[0] == "fired" })
	clk.Step(time.Minute)
	if g := got(); len(g) != 1 {
		t.Fatalf("the later arming was not dropped: %v", g)
	}
}

func TestGoSendsTaggedResultWithDeadline(t *testing.T) {
	sys, pid, _, got := spawn(t)
	sys.Root.Send(pid, &call{v: "a"})
	actortest.Eventually(t, "the result came back", func() bool { g := got(); return len(g) == 1 && g[0] == "result a" })
}

func TestEarlierIncarnationIsStale(t *testing.T) {
	sys, pid, clk, got := spawn(t)
	sys.Root.Send(pid, &arm{d: time.Second})
	sys.Root.Send(pid, &restart{}) // the default strategy restarts: a new generation
	actortest.Sync(t, sys, pid)
	clk.Step(time.Second)
	actortest.Eventually(t, "the earlier incarnation's timer arrived and was dropped",
		func() bool { g := got(); return len(g) == 1 && g[0] == "stale" })
}
