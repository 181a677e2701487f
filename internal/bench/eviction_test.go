package bench

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/actorlet/actorlet/internal/testenv"
)

func TestParseCrossed(t *testing.T) {
	tests := []struct {
		name, log string
		want      string // RFC3339Nano, "" for an error
	}{
		{"one line", "2026-11-25T17:37:48.49011301Z crossed\n", "2026-11-25T17:37:48.49011301Z"},
		{"among others", "2026-11-25T17:37:48.1Z hello\n2026-11-25T17:37:48.2Z crossed\n2026-11-25T17:37:49Z later\n", "2026-11-25T17:37:48.2Z"},
		{"no line", "2026-11-25T17:37:48.1Z hello\n", ""},
		{"empty", "", ""},
		{"not a timestamp", "yesterday crossed\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCrossed(tc.log)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("got %v, want an error", got)
				}
				return
			}
			want, _ := time.Parse(time.RFC3339Nano, tc.want)
			if err != nil || !got.Equal(want) {
				t.Fatalf("got %v, %v; want %v", got, err, want)
			}
		})
	}
}

func TestMemoryThreshold(t *testing.T) {
	tests := []struct {
		name, hard string
		capacity   int64
		want       int64
		err        string
	}{
		{"quantity", "memory.available<1Gi", 16 << 30, 1 << 30, ""},
		{"among others", "nodefs.available<10%, memory.available<100Mi ,imagefs.available<15%", 16 << 30, 100 << 20, ""},
		{"percentage", "memory.available<10%", 10 << 30, 1 << 30, ""},
		{"none", "nodefs.available<10%", 16 << 30, 0, "no memory.available"},
		{"bad quantity", "memory.available<lots", 16 << 30, 0, "memory.available<lots"},
		{"bad percentage", "memory.available<200%", 16 << 30, 0, "not a percentage"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := memoryThreshold(tc.hard, tc.capacity)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %d, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestFlagValue(t *testing.T) {
	tests := []struct {
		name string
		args []string
		has  bool
		want string
	}{
		{"absent", []string{"--max-pods", "5"}, false, ""},
		{"separate", []string{"--eviction-hard", "memory.available<2Gi"}, true, "memory.available<2Gi"},
		{"equals", []string{"--eviction-hard=memory.available<2Gi"}, true, "memory.available<2Gi"},
		{"the last wins", []string{"--eviction-hard=a<1", "--eviction-hard", "b<2"}, true, "b<2"},
		{"a longer name", []string{"--eviction-hard-x=a<1"}, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := hasFlag(tc.args, "--eviction-hard"); got != tc.has {
				t.Errorf("hasFlag %v, want %v", got, tc.has)
			}
			if got := flagValue(tc.args, "--eviction-hard"); got != tc.want {
				t.Errorf("flagValue %q, want %q", got, tc.want)
			}
		})
	}
}

// benchOptions are the options of a scenario run by the tests: the
// actorlet under test, progress in the test's log.
func benchOptions(t *testing.T, scenario string, pods int) Options {
	o := Options{Scenario: scenario, Pods: pods, Binary: testenv.ActorletBinary(t),
		Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	return o
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// checkEviction asserts what a complete eviction run reports: every
// round's pod killed after its crossing and then shown Failed/Evicted.
func checkEviction(t *testing.T, r *Result, rounds, background int) {
	t.Helper()
	ev := r.Eviction
	if ev == nil {
		t.Fatal("no eviction figures")
	}
	if ev.Rounds != rounds || ev.Evicted != rounds || len(ev.Failures) > 0 || ev.BackgroundPods != background {
		t.Fatalf("eviction %+v", ev)
	}
	if r.Pods != rounds || r.Running != rounds || r.Goal != "Evicted" || len(r.LatencySamplesMS) != rounds {
		t.Errorf("result: pods %d, running %d, goal %q, samples %v", r.Pods, r.Running, r.Goal, r.LatencySamplesMS)
	}
	if !slices.IsSorted(ev.KillSamplesMS) || ev.KillSamplesMS[0] <= 0 {
		t.Errorf("kill samples %v: each after its crossing, sorted", ev.KillSamplesMS)
	}
	k, s := ev.KillMS, ev.StatusMS
	if !(k.P50 > 0 && k.P50 <= k.P90 && k.P90 <= k.P99 && k.P99 <= k.Max) {
		t.Errorf("kill latencies not ordered: %+v", k)
	}
	// /pods is read after the runtime reported the stop.
	if s.P50 < k.P50 || s.Max < k.Max {
		t.Errorf("Failed/Evicted on /pods (%+v) before the container stopped (%+v)", s, k)
	}
	if ev.AllocMiB <= 0 || ev.SummaryMS.P50 <= 0 || ev.Threshold != evictionHard {
		t.Errorf("alloc %v MiB, summary %+v, threshold %q", ev.AllocMiB, ev.SummaryMS, ev.Threshold)
	}
	if !slices.Contains(r.AgentArgs, "--eviction-hard") || r.RSSPeakBytes == 0 {
		t.Errorf("args %v, rss peak %d", r.AgentArgs, r.RSSPeakBytes)
	}
}

func TestEvictionScenario(t *testing.T) {
	t.Parallel()
	o := benchOptions(t, ScenarioEviction, 2)
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%+v", err, r)
	}
	checkEviction(t, r, 2, 0)
	if !strings.Contains(r.Summary(), "2/2 evicted with 0 pods running") {
		t.Errorf("summary: %s", r.Summary())
	}
}

func TestEvictionWithPodsRunning(t *testing.T) {
	t.Parallel()
	o := benchOptions(t, ScenarioEvictionDensity, 30)
	r := &Result{Scenario: o.Scenario}
	if err := runEviction(context.Background(), o, r, 1, 30); err != nil {
		t.Fatalf("%v\n%+v", err, r.Eviction)
	}
	checkEviction(t, r, 1, 30)
	if r.Eviction.BackgroundSeconds <= 0 {
		t.Errorf("background pods' start not measured: %+v", r.Eviction)
	}
}

func TestEvictionWithoutMemoryThreshold(t *testing.T) {
	t.Parallel()
	o := benchOptions(t, ScenarioEviction, 1)
	o.AgentArgs = []string{"--eviction-hard=nodefs.available<10%"}
	r, err := Run(context.Background(), o)
	if err == nil || r.Eviction == nil || len(r.Eviction.Failures) != 1 ||
		!strings.Contains(r.Eviction.Failures[0], "no memory.available threshold") {
		t.Fatalf("got %v, %+v; want the round failed for want of a memory threshold", err, r.Eviction)
	}
	if slices.Contains(r.AgentArgs, evictionHard) {
		t.Errorf("the bench's --eviction-hard added to the user's: %v", r.AgentArgs)
	}
}

func TestStatsScenario(t *testing.T) {
	t.Parallel()
	o := benchOptions(t, ScenarioStats, 20)
	o.Duration = 2 * time.Second
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%+v", err, r)
	}
	st := r.Stats
	if st == nil || st.Pods != 20 || st.SummaryPods != 20 || st.Requests != statsRequests {
		t.Fatalf("stats %+v", st)
	}
	if r.Running != 20 || r.Goal != GoalRunning {
		t.Errorf("%d of 20 pods %s", r.Running, r.Goal)
	}
	if st.IdleSeconds < 2 || st.IdleCPUSeconds < 0 || st.IdleCorePercent < 0 || st.SummaryBytes == 0 || st.ResourceBytes == 0 {
		t.Errorf("stats %+v", st)
	}
	for _, l := range []Latency{st.SummaryMS, st.ResourceMS} {
		if !(l.P50 > 0 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.Max) {
			t.Errorf("latencies not ordered: %+v", l)
		}
	}
	if !strings.Contains(r.Summary(), "stats: 20 pods") {
		t.Errorf("summary: %s", r.Summary())
	}
}

func TestNodeScenarioDefaults(t *testing.T) {
	tests := []struct {
		scenario string
		pods     int
		duration time.Duration
	}{
		{ScenarioEviction, evictionDefaultRounds, 30 * time.Second},
		{ScenarioEvictionDensity, evictionDensityDefaultPods, 30 * time.Second},
		{ScenarioStats, statsDefaultPods, statsDefaultIdle},
	}
	for _, tc := range tests {
		t.Run(tc.scenario, func(t *testing.T) {
			o := Options{Scenario: tc.scenario, Binary: os.Args[0]}
			if err := o.defaults(); err != nil {
				t.Fatal(err)
			}
			if o.Pods != tc.pods || o.Duration != tc.duration {
				t.Fatalf("pods %d, duration %v; want %d, %v", o.Pods, o.Duration, tc.pods, tc.duration)
			}
		})
	}
}
