package bench

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actorlet/actorlet/internal/actortest"
)

// series returns n samples, one every 10 s from t=0, with values f(i).
func series(n int, f func(i int) float64) (ts, vs []float64) {
	for i := range n {
		ts = append(ts, float64(10*i))
		vs = append(vs, f(i))
	}
	return ts, vs
}

func TestFlatness(t *testing.T) {
	tol := Tolerance{Rel: 0.2, Abs: 10}
	tests := []struct {
		name    string
		n       int
		f       func(i int) float64
		warmup  float64
		flat    bool
		checked bool
		ratio   float64 // checked when not NaN
		slopeH  float64 // per hour, checked when not NaN
	}{
		{"constant", 100, func(int) float64 { return 500 }, 0, true, true, 1, 0},
		{"steady leak", 100, func(i int) float64 { return 100 + float64(i) }, 0, false, true, math.NaN(), 360},
		{"slow leak still beyond 20 %", 360, func(i int) float64 { return 1000 + float64(i) }, 0, false, true, math.NaN(), 360},
		{"one step in the first half, then a plateau", 100, func(i int) float64 {
			if i < 30 {
				return 100
			}
			return 200
		}, 0, true, true, 2, 0},
		{"late growth in the last quarter", 100, func(i int) float64 {
			if i < 75 {
				return 100
			}
			return 100 + 10*float64(i-75)
		}, 0, false, true, math.NaN(), math.NaN()},
		{"saw-tooth noise", 120, func(i int) float64 { return 100 + 15*float64(i%4) }, 0, true, true, math.NaN(), math.NaN()},
		{"growth under the absolute floor", 100, func(i int) float64 { return 20 + float64(i)/20 }, 0, true, true, math.NaN(), 18},
		{"decreasing", 100, func(i int) float64 { return 1000 - 5*float64(i) }, 0, true, true, math.NaN(), -1800},
		{"warm-up ramp left out", 100, func(i int) float64 { return min(50*float64(i), 1000) }, 200, true, true, 1, 0},
		{"a ramp that ends in the first half is flat without a warm-up too", 100, func(i int) float64 { return min(50*float64(i), 1000) }, 0, true, true, math.NaN(), 0},
		{"a ramp still rising in the second half", 100, func(i int) float64 { return min(10*float64(i), 700) }, 0, false, true, math.NaN(), math.NaN()},
		{"unread samples skipped", 100, func(i int) float64 {
			if i%3 == 0 {
				return -1
			}
			return 300
		}, 0, true, true, 1, 0},
		{"growing from zero", 100, func(i int) float64 {
			if i < 50 {
				return 0
			}
			return float64(i)
		}, 0, false, true, -1, math.NaN()},
		{"too few samples after the warm-up", 10, func(i int) float64 { return float64(1000 * i) }, 50, true, false, math.NaN(), math.NaN()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, vs := series(tc.n, tc.f)
			tr := Flatness(ts, vs, tc.warmup, tol)
			if tr.Flat != tc.flat || tr.Checked != tc.checked {
				t.Fatalf("flat %v checked %v, want %v %v: %+v", tr.Flat, tr.Checked, tc.flat, tc.checked, tr)
			}
			if !math.IsNaN(tc.ratio) && math.Abs(tr.Ratio-tc.ratio) > 0.001 {
				t.Errorf("ratio %v, want %v", tr.Ratio, tc.ratio)
			}
			if !math.IsNaN(tc.slopeH) && math.Abs(tr.SlopePerHour-tc.slopeH) > 0.01 {
				t.Errorf("slope per hour %v, want %v", tr.SlopePerHour, tc.slopeH)
			}
		})
	}
}

func TestFlatnessFigures(t *testing.T) {
	// 40 samples of 100+i after a 5-sample warm-up: the first quarter
	// (i=5..13) has mean 109, the last (i=36..44) 140; the second half
	// (i=25..44) rises by exactly 19.
	ts, vs := series(45, func(i int) float64 { return 100 + float64(i) })
	tr := Flatness(ts, vs, 50, Tolerance{Rel: 0.1, Abs: 5})
	want := Trend{Checked: true, Samples: 40, Start: 105, End: 144, Max: 144, FirstQuarter: 109.5, LastQuarter: 139.5,
		Ratio: round3(139.5 / 109.5), SlopePerHour: 360, Growth: 19, Allowed: 10.95, Tolerance: Tolerance{Rel: 0.1, Abs: 5}}
	if tr != want {
		t.Fatalf("got  %+v\nwant %+v", tr, want)
	}
}

func TestLSSlope(t *testing.T) {
	tests := []struct {
		name string
		t, v []float64
		want float64
	}{
		{"line", []float64{0, 1, 2, 3}, []float64{1, 3, 5, 7}, 2},
		{"flat", []float64{0, 5, 10}, []float64{4, 4, 4}, 0},
		{"one time", []float64{3, 3}, []float64{1, 9}, 0},
		{"noise around a line", []float64{0, 1, 2, 3}, []float64{0, 2, 1, 3}, 0.8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := lsSlope(tc.t, tc.v); math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("slope %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSoakJudge(t *testing.T) {
	s := &Soak{WarmupSeconds: 0}
	for i := range 40 {
		s.Samples = append(s.Samples, SoakSample{T: float64(10 * i), RSSBytes: float64(80<<20 + i<<20), RSSAnonBytes: 40 << 20, HeapBytes: 20 << 20, Goroutines: 100 + 5*float64(i),
			OpenFiles: 20, DiskEntries: 600, Pods: 50, Actors: 57})
	}
	s.judge()
	if len(s.Leaks) != 1 || s.Leaks[0] != SeriesGoroutines {
		t.Fatalf("leaks %v, want [goroutines]; trends %+v", s.Leaks, s.Trends)
	}
	if len(s.Trends) != len(SoakSeries) {
		t.Errorf("%d trends, want %d", len(s.Trends), len(SoakSeries))
	}
	err := s.leakErr()
	if err == nil || !strings.Contains(err.Error(), "goroutines 122 -> 272") {
		t.Fatalf("leak error %v", err)
	}
	if tr := s.Trends[SeriesRSS]; tr.Flat || !tr.Informational {
		t.Errorf("total RSS grew by 1 MiB a sample: %+v, want growing and informational", tr)
	}
	if sum := s.summary(); !strings.Contains(sum, "goroutines 122->272 GROWS") || !strings.Contains(sum, "rss_bytes 84->114 grows (not judged)") ||
		!strings.Contains(sum, "rss_anon_bytes 40->40 flat") || !strings.Contains(sum, "heap_bytes 20->20 flat") {
		t.Errorf("summary %q", sum)
	}
}

func TestTrailingMin(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		w    int
		want []float64
	}{
		{"window 1 is the series", []float64{3, 1, 2}, 1, []float64{3, 1, 2}},
		{"saw-tooth becomes its floor", []float64{100, 500, 900, 100, 500, 900, 100}, 3, []float64{100, 100, 100, 100, 100, 100, 100}},
		{"a rising floor stays visible", []float64{100, 900, 200, 900, 300, 900, 400}, 2, []float64{100, 100, 200, 200, 300, 300, 400}},
		{"unread values skipped", []float64{-1, 5, -1, 7, 9}, 2, []float64{-1, 5, -1, 7, 7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := trailingMin(tc.in, tc.w); !slices.Equal(got, tc.want) {
				t.Fatalf("%v, want %v", got, tc.want)
			}
		})
	}
}

// The disk entries of a soak: a saw-tooth of up to 4,000 entries between
// housekeeping sweeps is flat; directories left behind by every sweep
// (the floor rising by 2 a sample) are a leak.
func TestSoakJudgesDiskEntriesOnTheirFloor(t *testing.T) {
	tests := []struct {
		name  string
		disk  func(i int) float64
		leaks []string
	}{
		{"saw-tooth", func(i int) float64 { return 500 + float64((i*37)%4000) }, nil},
		{"saw-tooth on a rising floor", func(i int) float64 { return 500 + 2*float64(i) + float64((i%6)*600) }, []string{SeriesDiskEntries}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Soak{SampleSeconds: 10, WarmupSeconds: 60}
			for i := range 360 {
				s.Samples = append(s.Samples, SoakSample{T: float64(10 * i), RSSBytes: 80 << 20, RSSAnonBytes: 40 << 20, HeapBytes: 20 << 20,
					Goroutines: 30, OpenFiles: 18, DiskEntries: tc.disk(i), Pods: 50, Actors: 57})
			}
			s.judge()
			if !slices.Equal(s.Leaks, tc.leaks) {
				t.Fatalf("leaks %v, want %v: %+v", s.Leaks, tc.leaks, s.Trends[SeriesDiskEntries])
			}
			if s.Trends[SeriesDiskEntries].FloorSeconds != 60 {
				t.Errorf("floor window %v, want 60 s", s.Trends[SeriesDiskEntries].FloorSeconds)
			}
		})
	}
}

func TestSoakWarmup(t *testing.T) {
	tests := []struct {
		d, want time.Duration
	}{
		{time.Hour, 6 * time.Minute},
		{5 * time.Minute, 30 * time.Second},
		{time.Minute, 15 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.d.String(), func(t *testing.T) {
			if got := soakWarmup(tc.d); got != tc.want {
				t.Fatalf("warm-up %s, want %s", got, tc.want)
			}
		})
	}
}

// fakeProc writes what the sampler reads of pid under a fake /proc.
func fakeProc(t *testing.T, pid int, rssKB, fds int) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
		t.Fatal(err)
	}
	status := fmt.Sprintf("Name:\tactorlet\nVmHWM:\t  99999 kB\nVmRSS:\t  %d kB\nRssAnon:\t  %d kB\nRssFile:\t  7 kB\nThreads:\t9\n", rssKB, rssKB/2)
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range fds {
		if err := os.WriteFile(filepath.Join(dir, "fd", strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// tree makes files (and their parent directories) under root.
func tree(t *testing.T, root string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// metricsServer serves an agent's /metrics text.
func metricsServer(t *testing.T, body string) *agent {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return &agent{roURL: srv.URL}
}

func TestSoakProbeSample(t *testing.T) {
	root := t.TempDir()
	logs := filepath.Join(root, "pods")
	// 2 pod dirs with a file each, one log dir with a container dir and
	// a log: pods, pods/u1, pods/u1/etc-hosts, pods/u2, pods/u2/etc-hosts,
	// pods/ns_a_u1, pods/ns_a_u1/main, pods/ns_a_u1/main/0.log, and
	// actorlet.log at the root: 9 entries.
	tree(t, root, "pods/u1/etc-hosts", "pods/u2/etc-hosts", "pods/ns_a_u1/main/0.log", "actorlet.log")
	a := metricsServer(t, strings.Join([]string{
		"# HELP go_goroutines Number of goroutines that currently exist.",
		"# TYPE go_goroutines gauge",
		"go_goroutines 123",
		"go_memstats_heap_alloc_bytes 2.5e+07",
		`actorlet_actors{kind="pod"} 50`,
		`actorlet_actors{kind="node"} 1`,
		`actorlet_actors{kind="status"} 1`,
		"kubelet_running_pods 50",
	}, "\n")+"\n")
	tests := []struct {
		name string
		p    soakProbe
		want SoakSample
	}{
		{"everything read", soakProbe{procRoot: fakeProc(t, 4242, 81920, 17), pid: 4242, dirs: []string{root, logs}, a: a,
			pods: func() int { return 50 }},
			SoakSample{T: 12.5, RSSBytes: 81920 * 1024, RSSAnonBytes: 40960 * 1024, HeapBytes: 25e6, Goroutines: 123, OpenFiles: 17, DiskEntries: 9, Pods: 50, Actors: 52}},
		{"only the log dir", soakProbe{procRoot: fakeProc(t, 7, 1, 3), pid: 7, dirs: []string{logs}},
			SoakSample{T: 12.5, RSSBytes: 1024, RSSAnonBytes: 0, HeapBytes: -1, Goroutines: -1, OpenFiles: 3, DiskEntries: 7, Pods: -1, Actors: -1}},
		{"process gone, agent down", soakProbe{procRoot: fakeProc(t, 7, 1, 3), pid: 8, dirs: []string{filepath.Join(root, "nope")},
			a: &agent{roURL: "http://127.0.0.1:1"}},
			SoakSample{T: 12.5, RSSBytes: -1, RSSAnonBytes: -1, HeapBytes: -1, Goroutines: -1, OpenFiles: -1, DiskEntries: 0, Pods: -1, Actors: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.now = func() float64 { return 12.5 }
			if got := tc.p.sample(context.Background()); got != tc.want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestCountEntries(t *testing.T) {
	root := t.TempDir()
	tree(t, root, "a/b/c", "a/d", "e")
	tests := []struct {
		name string
		dirs []string
		want int
	}{
		{"one tree", []string{root}, 5},
		{"nested dir counted once", []string{root, filepath.Join(root, "a"), filepath.Join(root, "a") + "/"}, 5},
		{"sub tree", []string{filepath.Join(root, "a")}, 3},
		{"missing", []string{filepath.Join(root, "missing")}, 0},
		{"two trees", []string{filepath.Join(root, "a"), filepath.Join(root, "a", "b")}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := countEntries(tc.dirs...); got != tc.want {
				t.Fatalf("%d entries, want %d", got, tc.want)
			}
		})
	}
}

func TestSoakDirs(t *testing.T) {
	tests := []struct {
		name    string
		a       *agent
		rootDir string
		want    []string
	}{
		{"started agent", &agent{rootDir: "/r", args: []string{"--root-dir", "/r", "--pod-logs-dir", "/r/pods"}}, "", []string{"/r", "/r/pods"}},
		{"logs elsewhere, = form", &agent{rootDir: "/r/", args: []string{"--pod-logs-dir=/var/log/pods"}}, "", []string{"/r", "/var/log/pods"}},
		{"external agent", &agent{}, "/var/lib/actorlet", []string{"/var/lib/actorlet"}},
		{"nothing known", &agent{}, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := soakDirs(tc.a, tc.rootDir)
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("dirs %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSoakSamplerHelperProcess samples real processes through the real
// /proc: two helpers, one holding 25 more open files than the other.
func TestSoakSamplerHelperProcess(t *testing.T) {
	fds := func(extra int) SoakSample {
		t.Helper()
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "SOAK_HELPER_FILES="+strconv.Itoa(extra))
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() && sc.Text() != "ready" {
		}
		p := &soakProbe{procRoot: "/proc", pid: cmd.Process.Pid, now: func() float64 { return 0 }}
		var last SoakSample
		s := startSoakSampler(context.Background(), p, 5*time.Millisecond, nil)
		actortest.Eventually(t, "three samples", func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return len(s.samples) >= 3
		})
		samples := s.finish()
		last = samples[len(samples)-1]
		for _, x := range samples {
			if x.OpenFiles != last.OpenFiles || x.RSSBytes <= 0 {
				t.Fatalf("samples of an idle helper differ: %+v", samples)
			}
		}
		return last
	}
	base, more := fds(0), fds(25)
	if more.OpenFiles-base.OpenFiles != 25 {
		t.Fatalf("open files %v and %v, want 25 apart", base.OpenFiles, more.OpenFiles)
	}
}

// TestMain runs the test binary as the helper process of
// TestSoakSamplerHelperProcess when SOAK_HELPER_FILES is set: it opens
// that many files, says "ready" and waits for its stdin to close.
func TestMain(m *testing.M) {
	if v := os.Getenv("SOAK_HELPER_FILES"); v != "" {
		os.Exit(helperOpenFiles(v))
	}
	os.Exit(m.Run())
}

func helperOpenFiles(v string) int {
	n, err := strconv.Atoi(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, "SOAK_HELPER_FILES:", err)
		return 2
	}
	var open []*os.File
	for range n {
		f, err := os.Open(os.DevNull)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		open = append(open, f)
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	for _, f := range open {
		_ = f.Close()
	}
	return 0
}
