package probe

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
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

// fakeHTTP answers httpGet probes with one scripted outcome.
type fakeHTTP struct {
	mu      sync.Mutex
	ok      bool
	warning bool
	out     string
	urls    []string
}

var _ HTTPGetter = (*fakeHTTP)(nil)

func (f *fakeHTTP) HTTPGet(_ context.Context, u *url.URL, _ http.Header, _ time.Duration) (bool, bool, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.urls = append(f.urls, u.String())
	return f.ok, f.warning, f.out, nil
}

// TestRedirectWarning: an httpGet probe whose redirect to another host was
// not followed succeeds (the container stays healthy) and the parent hears
// the warning once, to record a ProbeWarning event, as upstream.
func TestRedirectWarning(t *testing.T) {
	const body = `Probe terminated redirects, Response body: <a href="http://0.0.0.0/">Found</a>.`
	tests := []struct {
		name     string
		warning  bool
		warnings int
	}{
		{name: "redirect to another host: a warning, once", warning: true, warnings: 1},
		{name: "plain success: no warning", warning: false, warnings: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			h := &fakeHTTP{ok: true, warning: tt.warning, out: body}
			met := &fakeMetrics{}
			var mu sync.Mutex
			var results []messages.ProbeResult
			var warnings []messages.ProbeWarning
			spawned := make(chan *actor.PID, 1)
			target := Target{Kind: messages.ProbeLiveness, PodName: "p", Namespace: "ns", PodUID: "uid", PodIP: "10.0.0.1",
				Container: &v1.Container{Name: "app"}, ContainerID: "c1", StartedAt: clk.Now(),
				Probe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/redirect", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}}
			parent := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
				switch m := c.Message().(type) {
				case *actor.Started:
					pid, _ := c.SpawnNamed(actor.PropsFromProducer(New(target, Deps{Handlers: Handlers{HTTP: h}, Clock: clk, Log: quiet, Metrics: met}),
						actor.WithReceiverMiddleware(actortest.Barrier())), "probe")
					spawned <- pid
				case *messages.ProbeResult:
					mu.Lock()
					results = append(results, *m)
					mu.Unlock()
				case *messages.ProbeWarning:
					mu.Lock()
					warnings = append(warnings, *m)
					mu.Unlock()
				}
			}, actor.WithReceiverMiddleware(actortest.Barrier())))
			t.Cleanup(func() { _ = sys.Root.StopFuture(parent).Wait() })
			probe := <-spawned
			for n := 1; n <= 3; n++ {
				actortest.Eventually(t, "probe handled", func() bool { return met.count() >= n })
				actortest.Eventually(t, "next tick armed", clk.HasWaiters)
				clk.Step(time.Second)
			}
			actortest.Eventually(t, "three probes", func() bool { return met.count() >= 3 })
			actortest.Sync(t, sys, probe)
			actortest.Sync(t, sys, parent)
			mu.Lock()
			defer mu.Unlock()
			if len(results) != 1 || !results[0].Success {
				t.Errorf("results %+v, want one success", results)
			}
			if len(warnings) != tt.warnings {
				t.Fatalf("warnings %+v, want %d", warnings, tt.warnings)
			}
			if tt.warnings > 0 {
				if w := warnings[0]; w.Message != body || w.Kind != messages.ProbeLiveness || w.ContainerID != "c1" || w.Container != "app" {
					t.Errorf("warning %+v", w)
				}
			}
		})
	}
}
