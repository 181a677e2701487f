package supervisors

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/internal/actortest"
)

// fakeSupervisor records what a strategy asks of it.
type fakeSupervisor struct {
	mu        sync.Mutex
	restarted []string
	stopped   []string
	escalated []any
}

var _ actor.Supervisor = (*fakeSupervisor)(nil)

func (f *fakeSupervisor) Children() []*actor.PID { return nil }
func (f *fakeSupervisor) EscalateFailure(reason, _ any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.escalated = append(f.escalated, reason)
}
func (f *fakeSupervisor) RestartChildren(pids ...*actor.PID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range pids {
		f.restarted = append(f.restarted, p.Id)
	}
}
func (f *fakeSupervisor) StopChildren(pids ...*actor.PID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range pids {
		f.stopped = append(f.stopped, p.Id)
	}
}
func (f *fakeSupervisor) ResumeChildren(...*actor.PID) {}

func (f *fakeSupervisor) counts() (restarted, stopped, escalated int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.restarted), len(f.stopped), len(f.escalated)
}

// nestedSupervisor is a supervisor that has a parent, so it can escalate.
type nestedSupervisor struct{ fakeSupervisor }

func (*nestedSupervisor) Parent() *actor.PID { return actor.NewPID("nonhost", "root") }

func TestBackoff(t *testing.T) {
	cfg := StrategyConfig{BackoffBase: 100 * time.Millisecond, BackoffCap: time.Second}
	tests := []struct {
		n    int
		want time.Duration
	}{
		{1, 0}, {2, 100 * time.Millisecond}, {3, 200 * time.Millisecond},
		{4, 400 * time.Millisecond}, {5, 800 * time.Millisecond}, {6, time.Second}, {60, time.Second},
	}
	for _, tt := range tests {
		if got := cfg.Backoff(tt.n); got != tt.want {
			t.Errorf("Backoff(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

func TestStrategyDecisions(t *testing.T) {
	pod := actor.NewPID("nonhost", "root/node/pod-1")
	probe := actor.NewPID("nonhost", "root/node/pod-1/probe-web-liveness")
	node := actor.NewPID("nonhost", "root/node")
	root := actor.NewPID("nonhost", "root")
	tests := []struct {
		name          string
		sup           interface{ counts() (int, int, int) }
		child         *actor.PID
		contained     []string
		failures      int
		wantRestarted int
		wantStopped   int
		wantEscalated int
		wantGiveUp    bool
	}{
		{name: "within intensity restarts", sup: &nestedSupervisor{}, child: pod, failures: 3, wantRestarted: 3},
		{name: "a pod beyond intensity is stopped, not escalated", sup: &nestedSupervisor{}, child: pod, failures: 4, wantRestarted: 3, wantStopped: 1},
		{name: "a probe beyond intensity is stopped, not escalated", sup: &nestedSupervisor{}, child: probe, failures: 4, wantRestarted: 3, wantStopped: 1},
		{name: "a singleton beyond intensity escalates", sup: &nestedSupervisor{}, child: node, failures: 4, wantRestarted: 3, wantEscalated: 1},
		{name: "nothing contained: a pod escalates", sup: &nestedSupervisor{}, child: pod, contained: []string{}, failures: 4, wantRestarted: 3, wantEscalated: 1},
		{name: "beyond intensity at the top stops and gives up", sup: &fakeSupervisor{}, child: root, failures: 4, wantRestarted: 3, wantStopped: 1, wantGiveUp: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, _ := testLogger(t)
			var kinds []string
			var gaveUp []GiveUp
			var mu sync.Mutex
			cfg := StrategyConfig{MaxRestarts: 3, Window: time.Minute, BackoffBase: time.Nanosecond, BackoffCap: time.Nanosecond,
				Contained: tt.contained, OnGiveUp: func(g GiveUp) { mu.Lock(); gaveUp = append(gaveUp, g); mu.Unlock() }}
			s := NewStrategy(cfg, clocktesting.NewFakeClock(time.Unix(1000, 0)), log, func(k string) { mu.Lock(); kinds = append(kinds, k); mu.Unlock() })
			for range tt.failures {
				s.HandleFailure(nil, tt.sup.(actor.Supervisor), tt.child, nil, "boom", nil)
			}
			// Later restarts wait 1ns on the fake clock.
			s.(*strategy).clk.(*clocktesting.FakeClock).Step(time.Nanosecond)
			r, st, e := tt.sup.counts()
			if r != tt.wantRestarted || st != tt.wantStopped || e != tt.wantEscalated {
				t.Fatalf("restarted/stopped/escalated = %d/%d/%d, want %d/%d/%d", r, st, e, tt.wantRestarted, tt.wantStopped, tt.wantEscalated)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(kinds) != tt.wantRestarted || (len(kinds) > 0 && kinds[0] != KindOf(tt.child)) {
				t.Fatalf("onRestart kinds = %v", kinds)
			}
			if tt.wantGiveUp != (len(gaveUp) == 1) || len(gaveUp) > 1 {
				t.Fatalf("OnGiveUp calls = %+v, want one: %v", gaveUp, tt.wantGiveUp)
			}
			if tt.wantGiveUp && (gaveUp[0].PID != tt.child.Id || gaveUp[0].Failures != 4 || gaveUp[0].Reason != "boom") {
				t.Fatalf("OnGiveUp(%+v)", gaveUp[0])
			}
		})
	}
}

func TestStrategyWindowSlides(t *testing.T) {
	log, _ := testLogger(t)
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	s := NewStrategy(StrategyConfig{MaxRestarts: 2, Window: time.Minute, BackoffBase: time.Second, BackoffCap: time.Second}, fc, log, nil)
	sup := &nestedSupervisor{}
	child := actor.NewPID("nonhost", "root/pleg")
	s.HandleFailure(nil, sup, child, nil, "1", nil) // immediate
	s.HandleFailure(nil, sup, child, nil, "2", nil) // after 1s
	fc.Step(61 * time.Second)                       // both fall out of the window
	s.HandleFailure(nil, sup, child, nil, "3", nil) // first in the new window: immediate, no escalation
	r, _, e := sup.counts()
	if r != 3 || e != 0 {
		t.Fatalf("restarted=%d escalated=%d, want 3 and 0", r, e)
	}
	// A child without failures for a window is forgotten.
	other := actor.NewPID("nonhost", "root/status")
	fc.Step(2 * time.Minute)
	s.HandleFailure(nil, sup, other, nil, "x", nil)
	if got := s.(*strategy).tracked(); got != 1 {
		t.Fatalf("tracked children = %d, want 1 (stale history pruned)", got)
	}
}

// backoffTree runs a real tree: a root with one counter child, pleg (its PID
// is returned), under a strategy whose backoff (1 s, doubling, capped at 4 s)
// and registry run on the returned fake clock.
func backoffTree(t *testing.T) (*actor.ActorSystem, *clocktesting.FakeClock, *Registry, *actor.PID) {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	sys, reg, mws := observed(t, fc)
	log, _ := testLogger(t)
	strategy := NewStrategy(StrategyConfig{MaxRestarts: 100, Window: time.Hour, BackoffBase: time.Second, BackoffCap: 4 * time.Second}, fc, log, nil)
	root, err := SpawnRoot(sys, strategy, mws, []Child{{Name: "pleg", Props: counterProps(mws)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Stop(sys, root) })
	return sys, fc, reg, pidOf(sys, "root/pleg")
}

// TestBackoffOnFakeClock runs a real tree: a child that fails repeatedly is
// restarted at once the first time, then only after the fake clock has been
// stepped by the (doubling, capped) backoff.
func TestBackoffOnFakeClock(t *testing.T) {
	sys, fc, reg, pid := backoffTree(t)

	crash := func() { sys.Root.Send(pid, &chaosMsg) }
	// First failure: immediate restart.
	crash()
	actortest.Eventually(t, "first restart", func() bool { return restartsOf(reg, pid.Id) == 1 })
	ask(t, sys, pid, get{})

	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		want := i + 2
		crash()
		actortest.Eventually(t, "backoff timer armed", fc.HasWaiters)
		fc.Step(wait - time.Millisecond)
		// The restart comes only from the backoff timer: still armed, no restart.
		if !fc.HasWaiters() || restartsOf(reg, pid.Id) >= want {
			t.Fatalf("failure %d: restarted before the backoff (%v) elapsed", want, wait)
		}
		fc.Step(time.Millisecond)
		actortest.Eventually(t, "restart after the backoff", func() bool { return restartsOf(reg, pid.Id) == want })
		if got := ask(t, sys, pid, get{}); got != 0 {
			t.Fatalf("restarted actor has state %v, want fresh", got)
		}
	}
}

// TestChaosSkipsActorsBackingOff checks that the injector never picks an
// actor that waits for its restart (or already has a crash on its way):
// crashes would queue in its suspended mailbox and play back, each with a
// longer backoff, long after chaos stopped.
func TestChaosSkipsActorsBackingOff(t *testing.T) {
	sys, fc, reg, pid := backoffTree(t)
	rng := rand.New(rand.NewPCG(1, 2))
	actortest.Eventually(t, "child registered", func() bool { return len(reg.chaosVictims(KindPLEG)) == 1 })

	// First crash: restarted at once, then it is a candidate again.
	if v := pickVictim(rng, reg, []string{KindPLEG}); v == nil || v.Id != pid.Id {
		t.Fatalf("victim %v", v)
	}
	if v := pickVictim(rng, reg, []string{KindPLEG}); v != nil {
		t.Fatalf("picked %s again with a crash on its way", v.Id)
	}
	sys.Root.Send(pid, chaosMsg)
	actortest.Eventually(t, "first restart", func() bool { return restartsOf(reg, pid.Id) == 1 })
	actortest.Eventually(t, "candidate again", func() bool { return len(reg.chaosVictims(KindPLEG)) == 1 })

	// Second crash: 1 s backoff on the fake clock; not a candidate meanwhile.
	if v := pickVictim(rng, reg, []string{KindPLEG}); v == nil {
		t.Fatal("no victim")
	}
	sys.Root.Send(pid, chaosMsg)
	actortest.Eventually(t, "backoff timer armed", fc.HasWaiters)
	if v := pickVictim(rng, reg, []string{KindPLEG}); v != nil {
		t.Fatalf("picked %s while it backs off", v.Id)
	}
	fc.Step(time.Second)
	actortest.Eventually(t, "second restart", func() bool { return restartsOf(reg, pid.Id) == 2 })
	actortest.Eventually(t, "candidate after its restart", func() bool { return len(reg.chaosVictims(KindPLEG)) == 1 })
}
