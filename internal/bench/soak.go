package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Soak defaults: a rate a shared 2-core machine holds for an hour.
const (
	soakDefaultPods        = 50
	soakDefaultChurnRate   = 5 // pods replaced per second
	soakDefaultKillRate    = 5 // actor crashes per second
	soakDefaultSampleEvery = 10 * time.Second
	soakPollEvery          = 250 * time.Millisecond // /pods polls: latency resolution matters less than load here
)

// Soak holds what the soak scenario adds: the agent's footprint sampled
// every SampleSeconds during chaos plus churn, and for each series whether
// it stayed flat after the warm-up.
type Soak struct {
	SampleSeconds float64 `json:"sample_seconds"`
	WarmupSeconds float64 `json:"warmup_seconds"`
	// ChurnRate is pods replaced per second (delete one, create one).
	ChurnRate float64 `json:"churn_rate"`
	// Dirs are the directories whose entries (files and directories,
	// recursively) are counted: the agent's --root-dir and --pod-logs-dir.
	Dirs    []string         `json:"dirs,omitempty"`
	Samples []SoakSample     `json:"samples"`
	Trends  map[string]Trend `json:"trends"`
	// Leaks names the series that grew (empty when all stayed flat).
	Leaks []string `json:"leaks,omitempty"`
}

// SoakSample is one look at the agent, T seconds after the load started.
// A value that could not be read is -1.
type SoakSample struct {
	T        float64 `json:"t"`
	RSSBytes float64 `json:"rss_bytes"`
	// RSSAnonBytes is the anonymous part of RSS (RssAnon: heap, stacks):
	// what a leak grows. The rest is file pages (the binary's text paged
	// in as more code runs), which the kernel reclaims.
	RSSAnonBytes float64 `json:"rss_anon_bytes"`
	// HeapBytes is the Go heap allocated (go_memstats_heap_alloc_bytes).
	HeapBytes   float64 `json:"heap_bytes"`
	Goroutines  float64 `json:"goroutines"`
	OpenFiles   float64 `json:"open_files"`
	DiskEntries float64 `json:"disk_entries"`
	Pods        float64 `json:"pods"`
	Actors      float64 `json:"actors"`
}

// Series names of a soak, in report order.
const (
	SeriesRSS         = "rss_bytes"
	SeriesRSSAnon     = "rss_anon_bytes"
	SeriesHeap        = "heap_bytes"
	SeriesGoroutines  = "goroutines"
	SeriesOpenFiles   = "open_files"
	SeriesDiskEntries = "disk_entries"
	SeriesPods        = "pods"
	SeriesActors      = "actors"
)

// SoakSeries lists the series in report order.
var SoakSeries = []string{SeriesRSS, SeriesRSSAnon, SeriesHeap, SeriesGoroutines, SeriesOpenFiles, SeriesDiskEntries, SeriesPods, SeriesActors}

func (s SoakSample) value(series string) float64 {
	switch series {
	case SeriesRSS:
		return s.RSSBytes
	case SeriesRSSAnon:
		return s.RSSAnonBytes
	case SeriesHeap:
		return s.HeapBytes
	case SeriesGoroutines:
		return s.Goroutines
	case SeriesOpenFiles:
		return s.OpenFiles
	case SeriesDiskEntries:
		return s.DiskEntries
	case SeriesPods:
		return s.Pods
	case SeriesActors:
		return s.Actors
	}
	return -1
}

// Tolerance says how much a series may grow and still count as flat: the
// larger of Rel times its early mean and Abs (in the series' unit).
type Tolerance struct {
	Rel float64 `json:"rel"`
	Abs float64 `json:"abs"`
}

// soakTolerances: 20 % or a floor that absorbs the noise of small counts
// (a GC cycle, a few pods in flight, a restarting actor's goroutines).
var soakTolerances = map[string]Tolerance{
	SeriesRSS:         {Rel: 0.2, Abs: 16 << 20},
	SeriesRSSAnon:     {Rel: 0.2, Abs: 16 << 20},
	SeriesHeap:        {Rel: 0.2, Abs: 8 << 20},
	SeriesGoroutines:  {Rel: 0.2, Abs: 25},
	SeriesOpenFiles:   {Rel: 0.2, Abs: 10},
	SeriesDiskEntries: {Rel: 0.2, Abs: 100},
	SeriesPods:        {Rel: 0.2, Abs: 10},
	SeriesActors:      {Rel: 0.2, Abs: 25},
}

// soakInformational are series reported with a trend but not counted as
// leaks: total RSS holds file pages too (see RSSAnonBytes).
var soakInformational = map[string]bool{SeriesRSS: true}

// soakFloors are series judged on their floor: the minimum over a
// trailing window. Disk entries are a saw-tooth (a deleted pod's
// directories stay until the next housekeeping sweep, every 10 s, later
// when the NodeActor restarts); a leak raises what is left after the
// sweeps, the peaks in between are noise.
var soakFloors = map[string]time.Duration{SeriesDiskEntries: time.Minute}

// trailingMin replaces each value by the minimum of the last w values
// (itself included; unread values, negative, are skipped and stay
// unread).
func trailingMin(vs []float64, w int) []float64 {
	out := make([]float64, len(vs))
	for i := range vs {
		out[i] = -1
		if vs[i] < 0 {
			continue
		}
		for j := max(0, i-w+1); j <= i; j++ {
			if vs[j] >= 0 && (out[i] < 0 || vs[j] < out[i]) {
				out[i] = vs[j]
			}
		}
	}
	return out
}

// Trend is how one series moved after the warm-up.
type Trend struct {
	// Informational: reported, never counted as a leak.
	Informational bool `json:"informational,omitempty"`
	// FloorSeconds, when set, says the series was judged on its minimum
	// over that trailing window (and Start, End, Max and the means are of
	// that floor).
	FloorSeconds float64 `json:"floor_seconds,omitempty"`
	// Checked is false when too few samples followed the warm-up (fewer
	// than minTrendSamples) to say anything; such a series counts as flat.
	Checked bool    `json:"checked"`
	Samples int     `json:"samples"`
	Start   float64 `json:"start"` // first sample after the warm-up
	End     float64 `json:"end"`   // last sample
	Max     float64 `json:"max"`
	// FirstQuarter and LastQuarter are the means of the first and last
	// quarter of the samples after the warm-up; Ratio = Last/First.
	FirstQuarter float64 `json:"first_quarter_mean"`
	LastQuarter  float64 `json:"last_quarter_mean"`
	Ratio        float64 `json:"ratio"`
	// SlopePerHour is the least-squares slope over the second half of the
	// samples after the warm-up; Growth is that slope times the second
	// half's length (how much the fit rose over it).
	SlopePerHour float64   `json:"slope_per_hour"`
	Growth       float64   `json:"second_half_growth"`
	Allowed      float64   `json:"allowed"`
	Tolerance    Tolerance `json:"tolerance"`
	Flat         bool      `json:"flat"`
}

// minTrendSamples is the fewest samples after the warm-up that a trend
// is judged on.
const minTrendSamples = 8

// Flatness judges one series (times ts in seconds, values vs; negative
// values are unread samples and skipped) after warmup seconds. It is a
// leak, not flat, when both the last quarter's mean exceeds the first
// quarter's by more than allowed = max(tol.Rel*first, tol.Abs), and the
// least-squares fit of the second half still rises by more than
// allowed/2 over that half (a steady leak rises by 3/4 of its total
// between the quarter means and 1/2 over the second half): a series that
// grew once and then held (a cache filling) is flat; one still rising at
// the end is not.
func Flatness(ts, vs []float64, warmup float64, tol Tolerance) Trend {
	tr := Trend{Tolerance: tol, Flat: true}
	var t, v []float64
	for i := range ts {
		if i < len(vs) && ts[i] >= warmup && vs[i] >= 0 {
			t = append(t, ts[i])
			v = append(v, vs[i])
		}
	}
	n := len(v)
	tr.Samples = n
	if n == 0 {
		return tr
	}
	tr.Start, tr.End, tr.Max = v[0], v[n-1], slices.Max(v)
	if n < minTrendSamples {
		return tr
	}
	tr.Checked = true
	q := n / 4
	tr.FirstQuarter = mean(v[:q])
	tr.LastQuarter = mean(v[n-q:])
	switch {
	case tr.FirstQuarter > 0:
		tr.Ratio = tr.LastQuarter / tr.FirstQuarter
	case tr.LastQuarter == 0:
		tr.Ratio = 1
	default:
		tr.Ratio = math.Inf(1)
	}
	h := n / 2
	slope := lsSlope(t[h:], v[h:])
	tr.SlopePerHour = slope * 3600
	tr.Growth = slope * (t[n-1] - t[h])
	tr.Allowed = max(tol.Rel*tr.FirstQuarter, tol.Abs)
	tr.Flat = !(tr.LastQuarter-tr.FirstQuarter > tr.Allowed && tr.Growth > tr.Allowed/2)
	tr.Ratio = roundSigned(tr.Ratio)
	if math.IsInf(tr.Ratio, 0) {
		tr.Ratio = -1 // JSON has no infinity: -1 means "from zero"
	}
	tr.SlopePerHour, tr.Growth = roundSigned(tr.SlopePerHour), roundSigned(tr.Growth)
	tr.FirstQuarter, tr.LastQuarter = roundSigned(tr.FirstQuarter), roundSigned(tr.LastQuarter)
	tr.Allowed = roundSigned(tr.Allowed)
	return tr
}

// roundSigned rounds to 3 decimals, negative values too.
func roundSigned(v float64) float64 { return math.Round(v*1000) / 1000 }

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// lsSlope is the least-squares slope of v over t (0 for fewer than two
// distinct times).
func lsSlope(t, v []float64) float64 {
	mt, mv := mean(t), mean(v)
	var num, den float64
	for i := range t {
		num += (t[i] - mt) * (v[i] - mv)
		den += (t[i] - mt) * (t[i] - mt)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// judge fills the trends and leaks of s from its samples.
func (s *Soak) judge() {
	s.Trends = map[string]Trend{}
	s.Leaks = nil
	ts := make([]float64, len(s.Samples))
	for i, x := range s.Samples {
		ts[i] = x.T
	}
	for _, name := range SoakSeries {
		vs := make([]float64, len(s.Samples))
		for i, x := range s.Samples {
			vs[i] = x.value(name)
		}
		if win, ok := soakFloors[name]; ok && s.SampleSeconds > 0 {
			vs = trailingMin(vs, max(1, int(math.Round(win.Seconds()/s.SampleSeconds))))
		}
		tr := Flatness(ts, vs, s.WarmupSeconds, soakTolerances[name])
		tr.Informational = soakInformational[name]
		tr.FloorSeconds = soakFloors[name].Seconds()
		s.Trends[name] = tr
		if !tr.Flat && !tr.Informational {
			s.Leaks = append(s.Leaks, name)
		}
	}
}

// leakErr describes the leaks of s, or is nil.
func (s *Soak) leakErr() error {
	if len(s.Leaks) == 0 {
		return nil
	}
	var parts []string
	for _, name := range s.Leaks {
		tr := s.Trends[name]
		parts = append(parts, fmt.Sprintf("%s %.0f -> %.0f (x%.2f, +%.0f over the second half, allowed %.0f)",
			name, tr.FirstQuarter, tr.LastQuarter, tr.Ratio, tr.Growth, tr.Allowed))
	}
	return fmt.Errorf("leak: %s", strings.Join(parts, "; "))
}

// soakWarmup is the part of the run left out of the trends: a tenth of
// it, at least 30 s, at most a quarter.
func soakWarmup(d time.Duration) time.Duration {
	return min(max(d/10, 30*time.Second), d/4)
}

// soakProbe reads one agent's footprint.
type soakProbe struct {
	procRoot string // "/proc" but in tests
	pid      int
	dirs     []string
	a        *agent     // its /metrics; nil: not read
	pods     func() int // pods the node lists; nil: not read
	now      func() float64
}

// sample takes one SoakSample (unreadable values are -1).
func (p *soakProbe) sample(ctx context.Context) SoakSample {
	x := SoakSample{T: round3(p.now()), RSSBytes: -1, RSSAnonBytes: -1, HeapBytes: -1, Goroutines: -1, OpenFiles: -1, DiskEntries: -1, Pods: -1, Actors: -1}
	if rss, anon, err := readRSS(p.procRoot, p.pid); err == nil {
		x.RSSBytes, x.RSSAnonBytes = float64(rss), float64(anon)
	}
	if n, err := countFDs(p.procRoot, p.pid); err == nil {
		x.OpenFiles = float64(n)
	}
	if len(p.dirs) > 0 {
		x.DiskEntries = float64(countEntries(p.dirs...))
	}
	if p.a != nil {
		mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		ms, err := p.a.scrapeMetrics(mctx)
		cancel()
		if err == nil {
			x.Goroutines, x.HeapBytes = float64(ms.goroutines), ms.heapAlloc
			var actors int
			for _, n := range ms.actors {
				actors += n
			}
			x.Actors = float64(actors)
		}
	}
	if p.pods != nil {
		x.Pods = float64(p.pods())
	}
	return x
}

// readRSS reads VmRSS and RssAnon of pid under procRoot, in bytes.
func readRSS(procRoot string, pid int) (rss, anon uint64, err error) {
	if pid <= 0 {
		return 0, 0, errors.New("no agent pid")
	}
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0, err
	}
	m := parseStatus(b)
	if !m.hasRSS {
		return 0, 0, fmt.Errorf("%s/%d/status: no VmRSS", procRoot, pid)
	}
	return m.rss, m.anon, nil
}

// countFDs counts the open file descriptors of pid (entries of its fd
// directory).
func countFDs(procRoot string, pid int) (int, error) {
	if pid <= 0 {
		return 0, errors.New("no agent pid")
	}
	es, err := os.ReadDir(filepath.Join(procRoot, strconv.Itoa(pid), "fd"))
	if err != nil {
		return 0, err
	}
	return len(es), nil
}

// countEntries counts files and directories under each dir (not the dir
// itself); a dir inside another of dirs is counted with it, once.
// Entries that vanish while it walks (the agent removes them) are
// skipped.
func countEntries(dirs ...string) int {
	n := 0
	for _, d := range dirs {
		if nestedIn(d, dirs) {
			continue
		}
		_ = filepath.WalkDir(d, func(path string, _ fs.DirEntry, err error) error {
			// A directory that cannot be read is reported twice (once
			// before, once with the error): count it once, skip its
			// contents.
			if err == nil && path != d {
				n++
			}
			return nil
		})
	}
	return n
}

// nestedIn reports whether d lies strictly inside another of dirs.
func nestedIn(d string, dirs []string) bool {
	d = filepath.Clean(d)
	for _, o := range dirs {
		o = filepath.Clean(o)
		if o != d && strings.HasPrefix(d, o+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// soakSampler samples a probe every interval until stopped.
type soakSampler struct {
	mu      sync.Mutex
	samples []SoakSample
	stop    chan struct{}
	done    chan struct{}
}

func startSoakSampler(ctx context.Context, p *soakProbe, every time.Duration, log func(SoakSample)) *soakSampler {
	s := &soakSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			x := p.sample(ctx)
			s.mu.Lock()
			s.samples = append(s.samples, x)
			s.mu.Unlock()
			if log != nil {
				log(x)
			}
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// finish stops sampling and returns the samples.
func (s *soakSampler) finish() []SoakSample {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

// soakDirs are the agent's --root-dir and --pod-logs-dir (from its
// command line, or the bench's --root-dir for an external agent).
func soakDirs(a *agent, rootDir string) []string {
	var dirs []string
	add := func(d string) {
		if d != "" && !slices.Contains(dirs, d) {
			dirs = append(dirs, filepath.Clean(d))
		}
	}
	add(a.rootDir)
	for i, arg := range a.args {
		switch {
		case arg == "--pod-logs-dir" && i+1 < len(a.args):
			add(a.args[i+1])
		case strings.HasPrefix(arg, "--pod-logs-dir="):
			add(strings.TrimPrefix(arg, "--pod-logs-dir="))
		}
	}
	if len(dirs) == 0 {
		add(rootDir)
	}
	return dirs
}

// startSoak starts sampling s's agent for the soak scenario.
func (s *session) startSoak(ctx context.Context, r *Result) *soakSampler {
	dirs := soakDirs(s.a, s.o.RootDir)
	r.Soak = &Soak{
		SampleSeconds: s.o.SampleEvery.Seconds(),
		WarmupSeconds: soakWarmup(s.o.Duration).Seconds(),
		ChurnRate:     s.o.ChurnRate,
		Dirs:          dirs,
	}
	p := &soakProbe{
		procRoot: "/proc", pid: s.a.pid, dirs: dirs, a: s.a,
		pods: func() int { return len(s.obs.listed()) },
		now:  func() float64 { return time.Since(s.start).Seconds() },
	}
	log := func(x SoakSample) {
		s.o.Log.Info("soak", "t", time.Duration(x.T*float64(time.Second)).Round(time.Second),
			"rss_mib", round(x.RSSBytes/(1<<20)), "rss_anon_mib", round(x.RSSAnonBytes/(1<<20)), "heap_mib", round(x.HeapBytes/(1<<20)), "goroutines", x.Goroutines, "open_files", x.OpenFiles,
			"disk_entries", x.DiskEntries, "pods", x.Pods, "actors", x.Actors)
	}
	return startSoakSampler(ctx, p, s.o.SampleEvery, log)
}

// finishSoak stops sampling and judges the series.
func (s *session) finishSoak(r *Result, ss *soakSampler) {
	r.Soak.Samples = ss.finish()
	r.Soak.judge()
}

// thinSoak drops the per-pod and sub-second series of a soak result (an
// hour of them would make the JSON megabytes): the samples carry the
// footprint, the summaries the latencies.
func thinSoak(r *Result) {
	r.RSSOverTime, r.RunningOverTime, r.LatencySamplesMS = nil, nil, nil
}

// summary is one line: each series from its first to its last quarter.
func (s *Soak) summary() string {
	var parts []string
	for _, name := range SoakSeries {
		tr, ok := s.Trends[name]
		if !ok || !tr.Checked {
			continue
		}
		f, l := tr.FirstQuarter, tr.LastQuarter
		if name == SeriesRSS || name == SeriesRSSAnon || name == SeriesHeap {
			f, l = f/(1<<20), l/(1<<20)
		}
		flat := "flat"
		switch {
		case !tr.Flat && tr.Informational:
			flat = "grows (not judged)"
		case !tr.Flat:
			flat = "GROWS"
		}
		parts = append(parts, fmt.Sprintf("%s %.0f->%.0f %s", name, f, l, flat))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%d samples, too few after the warm-up to judge", len(s.Samples))
	}
	return strings.Join(parts, ", ")
}
