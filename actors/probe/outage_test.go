package probe

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

// outageExec answers exec probes with exit 0 while the runtime is up and
// with an ErrUnavailable error (what the CRI client returns when the
// runtime's socket does not answer) while it is down.
type outageExec struct {
	mu    sync.Mutex
	down  bool
	code  int32
	calls int
}

var _ Execer = (*outageExec)(nil)

func (f *outageExec) ExecSync(_ context.Context, id string, _ []string, _ time.Duration) ([]byte, []byte, int32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down {
		return nil, nil, 0, errdefs.Wrap(errdefs.ErrUnavailable, errors.New("exec in container "+id+": connection refused"))
	}
	return nil, nil, f.code, nil
}

func (f *outageExec) set(down bool, code int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down, f.code = down, code
}

// TestRuntimeOutageNeitherFailsNorPasses: a runtime that is down (exec
// answers ErrUnavailable) for many periods does not fail a liveness or a
// readiness probe (as upstream, which throws prober errors away), and the
// probe still works after the outage: a real failure then is reported. On
// the old code the errors counted as failures: the liveness probe reported
// a failure during the outage (its container was to be killed) and then
// stopped probing for good.
func TestRuntimeOutageNeitherFailsNorPasses(t *testing.T) {
	for _, kind := range []messages.ProbeKind{messages.ProbeLiveness, messages.ProbeReadiness} {
		t.Run(string(kind), func(t *testing.T) {
			sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			ex := &outageExec{}
			met := &fakeMetrics{}
			var mu sync.Mutex
			var results []messages.ProbeResult
			got := func() []messages.ProbeResult {
				mu.Lock()
				defer mu.Unlock()
				return append([]messages.ProbeResult(nil), results...)
			}
			target := Target{Kind: kind, PodName: "p", Namespace: "ns", PodUID: "uid", PodIP: "10.0.0.1",
				Container: &v1.Container{Name: "app"}, ContainerID: "c1", StartedAt: clk.Now(), Probe: execProbe(0, 1, 1, 3)}
			deps := Deps{Handlers: Handlers{Exec: ex}, Clock: clk, Log: quiet, Metrics: met}
			parent, pid := spawnProbe(t, sys, target, deps, func(r messages.ProbeResult) {
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			})
			n := 0
			probe := func() {
				t.Helper()
				n++
				actortest.Eventually(t, "an armed timer", clk.HasWaiters)
				clk.Step(time.Second)
				actortest.Eventually(t, "probe handled", func() bool { return met.count() >= n })
			}
			actortest.Eventually(t, "first probe", func() bool { return met.count() == 1 })
			n = 1
			actortest.Sync(t, sys, pid)
			actortest.Sync(t, sys, parent)
			if r := got(); len(r) != 1 || !r[0].Success {
				t.Fatalf("results before the outage %+v, want one success", r)
			}

			ex.set(true, 0) // the runtime goes down for 30 periods
			for range 30 {
				probe()
			}
			actortest.Sync(t, sys, pid)
			actortest.Sync(t, sys, parent)
			if r := got(); len(r) != 1 {
				t.Fatalf("results after a 30 s runtime outage %+v: an unreachable runtime must not fail the probe", r)
			}

			ex.set(false, 1) // back, and the container really fails now
			for range 3 {
				probe()
			}
			actortest.Sync(t, sys, pid)
			actortest.Sync(t, sys, parent)
			r := got()
			if len(r) != 2 || r[1].Success {
				t.Fatalf("results %+v: a real failure after the outage must be reported (the probe must still run)", r)
			}
		})
	}
}
