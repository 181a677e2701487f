package probe

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

var quiet = slog.New(slog.DiscardHandler)

// fakeExec answers exec probes with scripted exit codes and records when
// (on the fake clock) each probe ran.
type fakeExec struct {
	mu    sync.Mutex
	clk   *clocktesting.FakeClock
	codes []int32 // next exit codes; the last one repeats
	at    []time.Time
	cmds  [][]string
}

var _ Execer = (*fakeExec)(nil)

func (f *fakeExec) ExecSync(_ context.Context, _ string, cmd []string, _ time.Duration) ([]byte, []byte, int32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at = append(f.at, f.clk.Now())
	f.cmds = append(f.cmds, cmd)
	code := f.codes[0]
	if len(f.codes) > 1 {
		f.codes = f.codes[1:]
	}
	return []byte("out"), nil, code, nil
}

func (f *fakeExec) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.at)
}

// fakeMetrics counts observed probes: a probe is observed once its result
// has been handled by the actor.
type fakeMetrics struct {
	mu  sync.Mutex
	n   int
	res []string
}

var _ Metrics = (*fakeMetrics)(nil)

func (f *fakeMetrics) ObserveProbe(probeType, result, container, pod, namespace, podUID string, _ time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.res = append(f.res, probeType+"/"+result+"/"+container+"/"+pod+"/"+namespace+"/"+podUID)
}

func (f *fakeMetrics) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

type harness struct {
	parent  *actor.PID
	probe   *actor.PID // set before newHarness returns
	met     *fakeMetrics
	t       *testing.T
	sys     *actor.ActorSystem
	clk     *clocktesting.FakeClock
	exec    *fakeExec
	mu      sync.Mutex
	results []messages.ProbeResult
}

func newHarness(t *testing.T, kind messages.ProbeKind, p *v1.Probe, codes ...int32) *harness {
	t.Helper()
	h := &harness{t: t, sys: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet })),
		clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	h.exec = &fakeExec{clk: h.clk, codes: codes}
	target := Target{Kind: kind, PodName: "p", Namespace: "ns", PodUID: "uid", PodIP: "10.0.0.1",
		Container: &v1.Container{Name: "app", Env: []v1.EnvVar{{Name: "F", Value: "/tmp/ok"}}}, ContainerID: "c1",
		StartedAt: h.clk.Now(), Probe: p}
	h.met = &fakeMetrics{}
	deps := Deps{Handlers: Handlers{Exec: h.exec}, Clock: h.clk, Log: quiet, Metrics: h.met}
	h.parent, h.probe = spawnProbe(t, h.sys, target, deps, func(r messages.ProbeResult) {
		h.mu.Lock()
		h.results = append(h.results, r)
		h.mu.Unlock()
	})
	return h
}

// spawnProbe spawns the ProbeActor of target under a parent that hands its
// results to onResult; both take the mailbox barrier of actortest.
func spawnProbe(t *testing.T, sys *actor.ActorSystem, target Target, deps Deps, onResult func(messages.ProbeResult)) (parent, probe *actor.PID) {
	t.Helper()
	spawned := make(chan *actor.PID, 1)
	parent = sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			pid, err := c.SpawnNamed(actor.PropsFromProducer(New(target, deps), actor.WithReceiverMiddleware(actortest.Barrier())), Name(target.Container.Name, target.Kind))
			if err != nil {
				panic(err)
			}
			spawned <- pid
		case *messages.ProbeResult:
			onResult(*m)
		}
	}, actor.WithReceiverMiddleware(actortest.Barrier())))
	t.Cleanup(func() { sys.Root.Stop(parent) })
	return parent, <-spawned
}

func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	actortest.Eventually(h.t, what, cond)
}

// step advances the fake clock once a timer is armed.
func (h *harness) step(d time.Duration) {
	h.t.Helper()
	h.waitFor("an armed timer", h.clk.HasWaiters)
	h.clk.Step(d)
}

// probeAt steps to the next probe and waits for it to have run and for
// its result to be handled.
func (h *harness) probeAt(d time.Duration, n int) {
	h.t.Helper()
	h.step(d)
	h.waitFor("probe to run and its result to be handled", func() bool { return h.met.count() >= n })
}

// settle returns once the probe actor has handled everything queued for it
// and the parent has recorded every result the probe actor sent.
func (h *harness) settle() {
	h.t.Helper()
	actortest.Sync(h.t, h.sys, h.probe)
	actortest.Sync(h.t, h.sys, h.parent)
}

func (h *harness) got() []messages.ProbeResult {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]messages.ProbeResult(nil), h.results...)
}

func execProbe(delay, period, success, failure int32) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"test", "-f", "$(F)"}}},
		InitialDelaySeconds: delay, PeriodSeconds: period, TimeoutSeconds: 1, SuccessThreshold: success, FailureThreshold: failure}
}

func TestInitialDelayAndPeriodOnTheFakeClock(t *testing.T) {
	h := newHarness(t, messages.ProbeReadiness, execProbe(5, 2, 1, 3), 0)
	start := h.clk.Now()
	h.step(4 * time.Second)
	h.settle()
	if n := h.exec.calls(); n != 0 {
		t.Fatalf("probed %d times before initialDelaySeconds", n)
	}
	h.probeAt(time.Second, 1)
	for i := 2; i <= 4; i++ {
		h.probeAt(2*time.Second, i)
	}
	h.exec.mu.Lock()
	defer h.exec.mu.Unlock()
	for i, at := range h.exec.at {
		if want := start.Add(5*time.Second + time.Duration(i)*2*time.Second); !at.Equal(want) {
			t.Errorf("probe %d at %s, want %s", i, at.Sub(start), want.Sub(start))
		}
	}
	if got := h.exec.cmds[0]; len(got) != 3 || got[2] != "/tmp/ok" {
		t.Errorf("command %q: $(F) not expanded from the container env", got)
	}
	h.met.mu.Lock()
	if got := h.met.res[0]; got != "Readiness/successful/app/p/ns/uid" {
		t.Errorf("metric labels %s", got)
	}
	h.met.mu.Unlock()
	if res := h.got(); len(res) != 1 || !res[0].Success {
		t.Errorf("results %+v: want one success (results flow only on change)", res)
	}
}

func TestThresholds(t *testing.T) {
	tests := []struct {
		name  string
		kind  messages.ProbeKind
		codes []int32
		probe *v1.Probe
		want  []bool // reported results after all probes ran
		runs  int
	}{
		{name: "readiness fails after failureThreshold", kind: messages.ProbeReadiness, codes: []int32{0, 1, 1, 1, 1},
			probe: execProbe(0, 1, 1, 3), want: []bool{true, false}, runs: 5},
		{name: "two failures are not enough", kind: messages.ProbeReadiness, codes: []int32{0, 1, 1, 0},
			probe: execProbe(0, 1, 1, 3), want: []bool{true}, runs: 4},
		{name: "readiness needs successThreshold", kind: messages.ProbeReadiness, codes: []int32{1, 1, 1, 0, 1, 0, 0},
			probe: execProbe(0, 1, 2, 3), want: []bool{false, true}, runs: 7},
		{name: "liveness fails once and holds", kind: messages.ProbeLiveness, codes: []int32{1},
			probe: execProbe(0, 1, 1, 2), want: []bool{false}, runs: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.kind, tt.probe, tt.codes...)
			h.waitFor("first probe", func() bool { return h.met.count() == 1 })
			for i := 2; i <= tt.runs; i++ {
				h.probeAt(time.Second, i)
			}
			h.settle() // every run was handled (probeAt): its result is recorded
			res := h.got()
			if len(res) != len(tt.want) {
				t.Fatalf("results %+v, want %v", res, tt.want)
			}
			for i, r := range res {
				if r.Success != tt.want[i] || r.ContainerID != "c1" || r.Kind != tt.kind {
					t.Errorf("result %d = %+v, want success=%v", i, r, tt.want[i])
				}
			}
		})
	}
}

func TestLivenessStopsProbingAfterFailure(t *testing.T) {
	h := newHarness(t, messages.ProbeLiveness, execProbe(0, 1, 1, 1), 1)
	h.waitFor("failure reported", func() bool { return len(h.got()) == 1 })
	h.clk.Step(10 * time.Second)
	h.settle()
	if n := h.exec.calls(); n != 1 {
		t.Fatalf("%d probes after a liveness failure; the container is being killed, want 1", n)
	}
}

func TestSlowProbeSkipsTicksKeepsSchedule(t *testing.T) {
	h := newHarness(t, messages.ProbeReadiness, execProbe(0, 1, 1, 3), 0)
	h.waitFor("first probe", func() bool { return h.met.count() == 1 })
	start := h.clk.Now()
	h.probeAt(time.Second, 2)
	h.probeAt(time.Second, 3)
	h.exec.mu.Lock()
	defer h.exec.mu.Unlock()
	if got := h.exec.at[2].Sub(start); got != 2*time.Second {
		t.Fatalf("third probe at +%s, want +2s", got)
	}
}

func TestMissingHandlerFails(t *testing.T) {
	h := newHarness(t, messages.ProbeReadiness, &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(80)}},
		PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}, 0)
	h.waitFor("a failure", func() bool { return len(h.got()) == 1 })
	if r := h.got()[0]; r.Success || r.Message == "" {
		t.Fatalf("result %+v", r)
	}
}
