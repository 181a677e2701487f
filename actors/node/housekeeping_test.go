package node

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

// fakeSweeper records the keep set of every sweep; with a gate set, a
// sweep waits for it to close.
type fakeSweeper struct {
	mu         sync.Mutex
	calls      [][]types.UID // each sweep's keep set, sorted
	gate       chan struct{}
	running    int
	maxRunning int
}

var _ Sweeper = (*fakeSweeper)(nil)

func (f *fakeSweeper) Sweep(_ context.Context, keep map[types.UID]bool) ([]string, error) {
	var uids []types.UID
	for uid, ok := range keep {
		if ok {
			uids = append(uids, uid)
		}
	}
	slices.Sort(uids)
	f.mu.Lock()
	f.calls = append(f.calls, uids)
	f.running++
	f.maxRunning = max(f.maxRunning, f.running)
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	f.running--
	f.mu.Unlock()
	return nil, nil
}

func (f *fakeSweeper) sweeps() [][]types.UID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

const hkPeriod = 10 * time.Second

// newSweepHarness starts a NodeActor with a fake sweeper on a fake clock.
func newSweepHarness(t *testing.T, sources ...string) (*harness, *fakeSweeper, func()) {
	t.Helper()
	sw := &fakeSweeper{}
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := newHarness(t, Config{NodeName: "n1", Sources: sources, Sweeper: sw, HousekeepingPeriod: hkPeriod, Clock: clk})
	h.quiesce() // Started armed the timer
	// tick runs one housekeeping step (the timer's message is queued
	// during Step) and waits until the NodeActor handled it.
	tick := func() {
		clk.Step(hkPeriod)
		h.quiesce()
	}
	return h, sw, tick
}

// sweepAgain ticks until the NodeActor starts sweep number n (the one
// before it has reported back) and returns its keep set. Unless the test
// holds the sweeps itself, sweep n is held until it has been seen: a sweep
// that reported back at once could otherwise let a tick start sweep n+1
// before the count is read.
func sweepAgain(t *testing.T, sw *fakeSweeper, tick func(), n int) []types.UID {
	t.Helper()
	sw.mu.Lock()
	var own chan struct{}
	if sw.gate == nil {
		own = make(chan struct{})
		sw.gate = own
	}
	sw.mu.Unlock()
	if own != nil {
		defer func() {
			sw.mu.Lock()
			sw.gate = nil
			sw.mu.Unlock()
			close(own)
		}()
	}
	actortest.Eventually(t, "a new sweep", func() bool {
		tick()
		return len(sw.sweeps()) >= n
	})
	got := sw.sweeps()
	if len(got) != n {
		t.Fatalf("%d sweeps, want %d: %v", len(got), n, got)
	}
	return got[n-1]
}

// sweepUntil ticks until a sweep keeps exactly want (a PodActor's entry
// goes once its stop is seen, a moment after it stopped) and checks that
// every sweep meanwhile kept at least mustKeep.
func sweepUntil(t *testing.T, sw *fakeSweeper, tick func(), want, mustKeep []types.UID) {
	t.Helper()
	from := len(sw.sweeps())
	actortest.EventuallyDetail(t, "a sweep keeping "+fmt.Sprint(want), func() bool {
		tick()
		got := sw.sweeps()
		return len(got) > from && slices.Equal(got[len(got)-1], want)
	}, func() string { return fmt.Sprint(sw.sweeps()[from:]) })
	for _, keep := range sw.sweeps()[from:] {
		for _, uid := range mustKeep {
			if !slices.Contains(keep, uid) {
				t.Fatalf("a sweep kept %q, without %s", keep, uid)
			}
		}
	}
}

func TestHousekeepingKeepsEveryPodThatExists(t *testing.T) {
	h, sw, tick := newSweepHarness(t, messages.SourceFile)
	// a desired and running; c and e removed from the source (killed), e
	// then gone; b desired but rejected (its node selector); d only in the
	// runtime (an orphan being killed).
	h.send(set(messages.SourceFile, mkPod("a", "img"), mkPod("c", "img"), mkPod("e", "img")))
	h.quiesce()
	h.send(set(messages.SourceFile, mkPod("a", "img")))
	h.send(&messages.RuntimePods{UIDs: []types.UID{"a", "d"}})
	h.quiesce()
	h.terminated("e")
	b := mkPod("b", "img")
	b.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	h.send(set(messages.SourceFile, mkPod("a", "img"), b))
	h.quiesce()
	if got := h.statusLog(); !slices.Contains(got, "update b Failed NodeAffinity") {
		t.Fatalf("b was not rejected: %q", got)
	}
	if h.msgs("d") != "KillPod" || !h.alive("c") || !h.alive("d") {
		t.Fatalf("c and d are not being killed: c %q, d %q", h.msgs("c"), h.msgs("d"))
	}
	sweepUntil(t, sw, tick, []types.UID{"a", "b", "c", "d"}, []types.UID{"a", "b", "c", "d"})

	// c's kill ends; d leaves the runtime but its killer is still alive.
	h.terminated("c")
	h.send(&messages.RuntimePods{UIDs: []types.UID{"a"}})
	sweepUntil(t, sw, tick, []types.UID{"a", "b", "d"}, []types.UID{"a", "b", "d"})

	// d's killer is done; b leaves its source.
	h.terminated("d")
	h.send(set(messages.SourceFile, mkPod("a", "img")))
	sweepUntil(t, sw, tick, []types.UID{"a"}, []types.UID{"a"})
}

func TestHousekeepingWaitsForSourcesAndRuntime(t *testing.T) {
	h, sw, tick := newSweepHarness(t, messages.SourceFile, messages.SourcePush)
	steps := []struct {
		name string
		msg  any
	}{
		{name: "nothing known", msg: nil},
		{name: "file synced", msg: set(messages.SourceFile, mkPod("a", "img"))},
		{name: "the runtime listed, push not synced", msg: &messages.RuntimePods{UIDs: []types.UID{"a", "x"}}},
	}
	for _, s := range steps {
		if s.msg != nil {
			h.send(s.msg)
		}
		tick()
		tick()
		if n := len(sw.sweeps()); n != 0 {
			t.Fatalf("%s: %d sweeps, want none", s.name, n)
		}
	}
	// A sweep started too early would have kept a and x only (and been
	// recorded first: its goroutine ran long before the one below).
	h.send(set(messages.SourceFile, mkPod("a", "img"), mkPod("b", "img")))
	h.send(&messages.SourceSynced{Source: messages.SourcePush})
	if keep := sweepAgain(t, sw, tick, 1); !slices.Equal(keep, []types.UID{"a", "b", "x"}) {
		t.Fatalf("the first sweep keeps %q, want a, b and the orphan x", keep)
	}
}

func TestHousekeepingRuntimeFirstThenSources(t *testing.T) {
	h, sw, tick := newSweepHarness(t, messages.SourceFile)
	h.send(set(messages.SourceFile, mkPod("a", "img")))
	tick()
	if n := len(sw.sweeps()); n != 0 {
		t.Fatalf("%d sweeps before the runtime was listed, want none", n)
	}
	h.send(&messages.RuntimePods{UIDs: []types.UID{"r"}})
	if keep := sweepAgain(t, sw, tick, 1); !slices.Equal(keep, []types.UID{"a", "r"}) {
		t.Fatalf("the first sweep keeps %q, want a and the orphan r", keep)
	}
}

func TestHousekeepingNeverRunsTwoSweeps(t *testing.T) {
	h, sw, tick := newSweepHarness(t, messages.SourceFile)
	gate := make(chan struct{})
	sw.mu.Lock()
	sw.gate = gate
	sw.mu.Unlock()
	h.send(set(messages.SourceFile, mkPod("a", "img")))
	h.send(&messages.RuntimePods{UIDs: []types.UID{"a"}})
	sweepAgain(t, sw, tick, 1)
	for range 3 {
		tick() // the sweep is still in flight
	}
	sw.mu.Lock()
	sw.gate = nil
	sw.mu.Unlock()
	close(gate)
	// Once it reported back, the next tick sweeps again: the second sweep
	// of all (the ticks meanwhile started none).
	sweepAgain(t, sw, tick, 2)
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.maxRunning != 1 {
		t.Fatalf("%d sweeps ran at once", sw.maxRunning)
	}
}

// A NodeActor sweeps about a second after its view is complete, not a
// whole period after its start: one that crashes more often than the
// period (chaos) still sweeps (issue 9: the disk filled up under chaos
// because every restart re-armed the 10 s timer). While the view is not
// complete, it looks again every second.
func TestHousekeepingSweepsSoonAfterStart(t *testing.T) {
	sw := &fakeSweeper{}
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := newHarness(t, Config{NodeName: "n1", Sources: []string{messages.SourceFile}, Sweeper: sw, HousekeepingPeriod: time.Hour, Clock: clk})
	h.quiesce()
	step := func() {
		actortest.Eventually(t, "the next housekeeping timer", clk.HasWaiters)
		clk.Step(sweepSoon)
		h.quiesce()
	}
	step() // nothing known yet: no sweep, looked at again in a second
	if n := len(sw.sweeps()); n != 0 {
		t.Fatalf("%d sweeps before the sources and the runtime were known", n)
	}
	h.send(set(messages.SourceFile, mkPod("a", "img")))
	h.send(&messages.RuntimePods{UIDs: []types.UID{"a"}})
	h.quiesce()
	step()
	actortest.Eventually(t, "a sweep one second after the view was complete", func() bool { return len(sw.sweeps()) == 1 })
	if got := sw.sweeps()[0]; !slices.Equal(got, []types.UID{"a"}) {
		t.Fatalf("the sweep kept %v, want [a]", got)
	}
	// Then the period: a second later nothing more.
	step()
	if n := len(sw.sweeps()); n != 1 {
		t.Fatalf("%d sweeps within a second of the first, want 1 (the period is an hour)", n)
	}
}

// With its view complete, the housekeeping tells the StatusActor every pod
// the node knows, so that a status whose forget was lost (a PodTerminated
// queued while the NodeActor restarted) is dropped, as upstream's
// RemoveOrphanedStatuses.
func TestHousekeepingTellsStatusTheKnownPods(t *testing.T) {
	h, sw, tick := newSweepHarness(t, messages.SourceFile)
	h.send(set(messages.SourceFile, mkPod("a", "img")))
	h.send(&messages.RuntimePods{UIDs: []types.UID{"a", "orphan"}})
	sweepAgain(t, sw, tick, 1)
	actortest.EventuallyDetail(t, "the known pods told to the StatusActor", func() bool {
		return slices.Contains(h.statusLog(), "known a,orphan")
	}, func() string { return fmt.Sprint(h.statusLog()) })
}

// The housekeeping part: soon while the view is not complete, at the
// period once it is, one sweep in flight at most.
func TestHousekeepingStep(t *testing.T) {
	var h housekeeping
	period := time.Minute
	if next, sweep := h.step(false, period); next != sweepSoon || sweep {
		t.Fatalf("view not complete: next %s sweep %v", next, sweep)
	}
	if next, _ := h.step(false, sweepSoon/2); next != sweepSoon/2 {
		t.Fatalf("a period under sweepSoon: next %s", next)
	}
	if next, sweep := h.step(true, period); next != period || !sweep {
		t.Fatalf("view complete: next %s sweep %v", next, sweep)
	}
	if !h.begin() || h.begin() {
		t.Fatal("begin: want one sweep in flight")
	}
	if _, sweep := h.step(true, period); sweep {
		t.Fatal("a second sweep while one is in flight")
	}
	h.done()
	if _, sweep := h.step(true, period); !sweep || !h.begin() {
		t.Fatal("no sweep after the last one ended")
	}
}

// Every housekeeping tells the CgroupActor the active pods and every pod
// that still exists: pods being killed and runtime orphans are kept, not
// active.
func TestHousekeepingTellsCgroupsActiveAndKept(t *testing.T) {
	var mu sync.Mutex
	var got []*messages.SweepPodCgroups
	receive := func(c actor.Context) {
		if m, ok := c.Message().(*messages.SweepPodCgroups); ok {
			mu.Lock()
			got = append(got, m)
			mu.Unlock()
		}
	}
	sw := &fakeSweeper{}
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	// The stub is spawned under this name in the harness's system.
	h := newHarnessWith(t, Config{NodeName: "n1", Sources: []string{messages.SourceFile}, Sweeper: sw,
		HousekeepingPeriod: hkPeriod, Clock: clk, Cgroups: actor.NewPID("nonhost", "cgroups")},
		map[string]actor.ReceiveFunc{"cgroups": receive})
	h.quiesce()
	tick := func() { clk.Step(hkPeriod); h.quiesce() }
	h.send(set(messages.SourceFile, mkPod("a", "img"), mkPod("c", "img")))
	h.quiesce()
	h.send(set(messages.SourceFile, mkPod("a", "img"))) // c is killed
	h.send(&messages.RuntimePods{UIDs: []types.UID{"a", "c", "orphan"}})
	h.quiesce()
	sweepAgain(t, sw, tick, 1)
	actortest.Eventually(t, "SweepPodCgroups", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0
	})
	mu.Lock()
	m := got[0]
	mu.Unlock()
	if len(m.Active) != 1 || m.Active[0].UID != "a" {
		t.Errorf("active %v, want only a", m.Active)
	}
	for _, uid := range []types.UID{"a", "c", "orphan"} {
		if !m.Keep[uid] {
			t.Errorf("%s not kept: %v", uid, m.Keep)
		}
	}
}
