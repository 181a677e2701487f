package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAgainstRatios(t *testing.T) {
	x := &AgentFigures{CreatePodsPerSecond: 30, DeletePodsPerSecond: 40, StartLatencyMS: Latency{P50: 1000, P90: 2000, P99: 3000},
		RSSPeakBytes: 100 << 20, CPUPerPodMS: 10, CPUToReadyPerPodMS: 4, APIWritesPerPod: 3, APIWritesPerPodNoEvents: 1, Recovery: &Recovery{Seconds: 1},
		Memory: &MemoryFigures{Steady: MemorySample{RSSBytes: 40 << 20}}}
	u := &AgentFigures{CreatePodsPerSecond: 15, DeletePodsPerSecond: 0, StartLatencyMS: Latency{P50: 4000, P90: 4000, P99: 6000},
		RSSPeakBytes: 200 << 20, CPUPerPodMS: 30, CPUToReadyPerPodMS: 16, APIWritesPerPod: 6, APIWritesPerPodNoEvents: 3, Recovery: &Recovery{Seconds: 0.5},
		Memory: &MemoryFigures{Steady: MemorySample{RSSBytes: 160 << 20}}}
	got := ratios(x, u)
	want := map[string]float64{"create_pods_per_second": 2, "start_p50": 0.25, "start_p90": 0.5, "start_p99": 0.5,
		"rss_peak": 0.5, "cpu_per_pod": 0.333, "cpu_to_ready_per_pod": 0.25, "api_writes_per_pod": 0.5, "api_writes_per_pod_excluding_events": 0.333,
		"recovery_seconds": 2, "rss_steady": 0.25}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, ok := got["delete_pods_per_second"]; ok || len(got) != len(want) {
		t.Errorf("a ratio over upstream's 0 is left out: %v", got)
	}
}

func TestWriteMarkdown(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		want    string
		wantErr string
	}{
		{"replaces between the markers", "a\n<!-- t -->\nold\n<!-- /t -->\nb\n", "a\n<!-- t -->\nnew\n<!-- /t -->\nb\n", ""},
		{"empty block", "<!-- t -->\n<!-- /t -->\n", "<!-- t -->\nnew\n<!-- /t -->\n", ""},
		{"no markers", "a\n", "a\n", "no \"<!-- t -->\""},
		{"end before start", "<!-- /t -->\n<!-- t -->\n", "<!-- /t -->\n<!-- t -->\n", "markers"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "doc.md")
			if err := os.WriteFile(p, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			err := WriteMarkdown(p, "t", "new\n")
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
			b, _ := os.ReadFile(p)
			if string(b) != tc.want {
				t.Errorf("got %q, want %q", b, tc.want)
			}
		})
	}
}

func TestAgainstMarkdown(t *testing.T) {
	f := func(rps float64) *AgentFigures {
		return &AgentFigures{Ready: 100, CreatePodsPerSecond: rps, CreateSeconds: 100 / rps, LoadAvg1: 1.5,
			StartLatencyMS: Latency{P50: 2500, P90: 3000, P99: 3500}, RSSPeakBytes: 90 << 20,
			Recovery: &Recovery{Pods: 200, Recovered: true, Seconds: 1.25, HealthySeconds: 1, ReadyFlaps: 2}}
	}
	a := &Against{KubeletVersion: "v1.37.2", Actorlet: f(25), Upstream: f(15)}
	a.Actorlet.Memory = &MemoryFigures{Idle: MemorySample{RSSBytes: 30 << 20}, Steady: MemorySample{RSSBytes: 45 << 20}, SteadySettleSeconds: 30,
		AfterDelete: MemorySample{RSSBytes: 32 << 20}, AfterDeleteSettleSeconds: 30}
	a.Upstream.Memory = &MemoryFigures{Idle: MemorySample{RSSBytes: 90 << 20}, Steady: MemorySample{RSSBytes: 180 << 20}, SteadySettleSeconds: 30}
	a.Ratios = ratios(a.Actorlet, a.Upstream)
	md := a.Markdown(&Result{Pods: 100}, "bench/upstream/against-upstream-100.json")
	for _, want := range []string{
		"|  | upstream kubelet v1.37.2 | actorlet | actorlet / upstream |",
		"| create throughput (pods/s) | 15.0 | 25.0 | 1.67 |",
		"| start latency p99 | 3.50 s | 3.50 s | 1.00 |",
		"| RSS peak | 90 MiB | 90 MiB | 1.00 |",
		"| RSS idle / all running (+30 s) | 90 MiB / 180 MiB | 30 MiB / 45 MiB | 0.25 |",
		"| RSS after every pod deleted (+30 s) |  | 32 MiB |  |",
		"| kill -9 with 200 pods: back, all Ready | 1.25 s (healthy 1.00 s) | 1.25 s (healthy 1.00 s) | 1.00 |",
		"| kill -9: restarts / duplicate sandboxes / Ready flaps | 0 / 0 / 2 | 0 / 0 / 2 |  |",
		"JSON: [against-upstream-100.json](bench/upstream/against-upstream-100.json).",
		"upstream 1.50, actorlet 1.50",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in\n%s", want, md)
		}
	}
	if (&Against{Actorlet: f(1)}).Markdown(&Result{}, "") != "" {
		t.Error("a comparison with one agent gave a table")
	}
}

func TestMedianFigures(t *testing.T) {
	round := func(rps, p99 float64, rss uint64, flaps int, args string) *AgentFigures {
		return &AgentFigures{Args: []string{args}, Ready: 10, CreatePodsPerSecond: rps, StartLatencyMS: Latency{P99: p99},
			RSSPeakBytes: rss, Recovery: &Recovery{Recovered: true, Seconds: rps / 10, ReadyFlaps: flaps}}
	}
	tests := []struct {
		name      string
		rounds    []*AgentFigures
		wantRPS   float64
		wantP99   float64
		wantRSS   uint64
		wantFlaps int
		wantArgs  string
	}{
		{"one round is itself", []*AgentFigures{round(10, 100, 5, 0, "a")}, 10, 100, 5, 0, "a"},
		{"odd: each figure's median, the median round's args, the worst flaps",
			[]*AgentFigures{round(30, 100, 9, 0, "a"), round(10, 300, 5, 2, "b"), round(20, 200, 7, 0, "c")}, 20, 200, 7, 2, "c"},
		{"even: the mean of the middle two", []*AgentFigures{round(10, 100, 4, 0, "a"), round(20, 300, 8, 0, "b")}, 15, 200, 6, 0, "b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := medianFigures(tc.rounds)
			if m.CreatePodsPerSecond != tc.wantRPS || m.StartLatencyMS.P99 != tc.wantP99 || m.RSSPeakBytes != tc.wantRSS ||
				m.Recovery.ReadyFlaps != tc.wantFlaps || m.Args[0] != tc.wantArgs || !m.Recovery.Recovered {
				t.Errorf("got %+v (recovery %+v)", m, m.Recovery)
			}
		})
	}
	if medianFigures(nil) != nil {
		t.Error("no rounds gave figures")
	}
}

func TestHomeRelative(t *testing.T) {
	home := "/home/bench"
	t.Setenv("HOME", home)
	if got := homeRelative(home + "/.cache/actorlet/bin/kubelet"); got != "~/.cache/actorlet/bin/kubelet" {
		t.Errorf("homeRelative under home = %q", got)
	}
	if got := homeRelative("/usr/bin/kubelet"); got != "/usr/bin/kubelet" {
		t.Errorf("homeRelative elsewhere = %q", got)
	}
}

// TestAgainstDirUnderRootDir: --root-dir places each agent's directory
// under it (the file system the pods' directories land on is the user's
// choice), a temporary directory otherwise; the two agents never share.
func TestAgainstDirUnderRootDir(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "made")
	a, err := againstDir(parent, "actorlet")
	if err != nil {
		t.Fatal(err)
	}
	u, err := againstDir(parent, "upstream")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(a) != parent || filepath.Dir(u) != parent || a == u {
		t.Errorf("dirs %q and %q, want two apart under %q", a, u, parent)
	}
	for _, d := range []string{a, u} {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			t.Errorf("%s: %v", d, err)
		}
	}
	tmp, err := againstDir("", "actorlet")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	if filepath.Dir(tmp) != filepath.Clean(os.TempDir()) {
		t.Errorf("default dir %q, want it under %q", tmp, os.TempDir())
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := againstDir(file, "actorlet"); err == nil || !strings.Contains(err.Error(), "--root-dir") {
		t.Errorf("a file as --root-dir: %v, want an error naming the flag", err)
	}
}
