// Command benchplot draws the charts of docs/BENCHMARKS.md from the JSON
// results of `actorlet-bench` (gonum.org/v1/plot, in its own module so the
// main go.mod stays free of plotting dependencies):
//
//	go run . -cdf OUT.svg -timeline OUT.svg RESULT.json [RESULT.json ...]
//
// -cdf draws the start latency CDF of every result given; -timeline draws
// pods reaching the goal over time (and agent RSS) of the first one.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// result is the part of internal/bench.Result the charts need.
type result struct {
	Scenario       string                               `json:"scenario"`
	Pods           int                                  `json:"pods"`
	Running        int                                  `json:"running"`
	Goal           string                               `json:"goal"`
	Seconds        float64                              `json:"seconds"`
	PodsPerSecond  float64                              `json:"pods_per_second"`
	LatencyMS      struct{ P50, P90, P99, Max float64 } `json:"latency_ms"`
	RSSPeakBytes   float64                              `json:"rss_peak_bytes"`
	RSSEndBytes    float64                              `json:"rss_end_bytes"`
	RSSIdleBytes   float64                              `json:"rss_idle_bytes"`
	RSSPerPodBytes float64                              `json:"rss_per_pod_bytes"`
	CPUSeconds     float64                              `json:"cpu_seconds"`
	CPUPerPodMS    float64                              `json:"cpu_per_pod_ms"`
	CPUCoresMean   float64                              `json:"cpu_cores_mean"`
	GoroutinesPeak int                                  `json:"goroutines_peak"`
	ActorsEnd      int                                  `json:"actors_end"`
	Violations     int                                  `json:"violations"`
	Churn          *struct {
		Creates         int     `json:"creates"`
		ConvergeSeconds float64 `json:"converge_seconds"`
		ChaosCrashes    int     `json:"chaos_crashes"`
	} `json:"churn"`
	Probes *struct {
		PeriodMS struct{ P50, P99 float64 } `json:"period_ms"`
	} `json:"probes"`
	file             string
	LatencySamplesMS []float64 `json:"latency_samples_ms"`
	RunningOverTime  []sample  `json:"running_over_time"`
	RSSOverTime      []sample  `json:"rss_over_time"`
}

type sample struct {
	T float64 `json:"t"`
	V float64 `json:"v"`
}

func main() {
	cdf := flag.String("cdf", "", "write the start latency CDF (SVG) here")
	timeline := flag.String("timeline", "", "write pods reaching the goal over time (SVG) of the first result here")
	markdown := flag.String("markdown", "", "rewrite the table between <!-- bench-table --> and <!-- /bench-table --> in this file")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: benchplot [-cdf out.svg] [-timeline out.svg] result.json...")
		os.Exit(2)
	}
	var rs []result
	var names []string
	for _, p := range flag.Args() {
		b, err := os.ReadFile(p)
		if err != nil {
			fail(err)
		}
		var r result
		if err := json.Unmarshal(b, &r); err != nil {
			fail(fmt.Errorf("%s: %w", p, err))
		}
		r.file = filepath.Base(p)
		rs = append(rs, r)
		names = append(names, fmt.Sprintf("%s, %d pods", r.Scenario, r.Pods))
	}
	if *cdf != "" {
		if err := drawCDF(*cdf, rs, names); err != nil {
			fail(err)
		}
	}
	if *timeline != "" {
		if err := drawTimeline(*timeline, rs[0]); err != nil {
			fail(err)
		}
	}
	if *markdown != "" {
		if err := writeTable(*markdown, rs); err != nil {
			fail(err)
		}
	}
}

const (
	tableStart = "<!-- bench-table -->"
	tableEnd   = "<!-- /bench-table -->"
)

// writeTable replaces the table between the markers of path.
func writeTable(path string, rs []result) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, tableStart), strings.Index(s, tableEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %s ... %s markers", path, tableStart, tableEnd)
	}
	var t strings.Builder
	t.WriteString(tableStart + "\n")
	t.WriteString("| run | pods reached goal | seconds | pods/s | start p50 | p99 | max | RSS peak | RSS per pod | CPU s | CPU per pod | goroutines peak | notes |\n")
	t.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		var notes []string
		if c := r.Churn; c != nil {
			notes = append(notes, fmt.Sprintf("%d creates; converged %.1f s after the load", c.Creates, c.ConvergeSeconds))
			if c.ChaosCrashes > 0 {
				notes = append(notes, fmt.Sprintf("%d actor crashes injected; %d violations", c.ChaosCrashes, r.Violations))
			}
		}
		if p := r.Probes; p != nil {
			notes = append(notes, fmt.Sprintf("probe period p50 %.0f ms, p99 %.0f ms (1 s configured)", p.PeriodMS.P50, p.PeriodMS.P99))
		}
		fmt.Fprintf(&t, "| [%s](bench/%s) | %d/%d %s | %.1f | %.1f | %s | %s | %s | %.0f MiB | %s | %.1f | %.1f ms | %d | %s |\n",
			strings.TrimSuffix(r.file, ".json"), r.file, r.Running, r.Pods, goal(r), r.Seconds, r.PodsPerSecond,
			ms(r.LatencyMS.P50), ms(r.LatencyMS.P99), ms(r.LatencyMS.Max),
			r.RSSPeakBytes/(1<<20), kib(r.RSSPerPodBytes), r.CPUSeconds, r.CPUPerPodMS, r.GoroutinesPeak, strings.Join(notes, "; "))
	}
	s = s[:i] + t.String() + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}

func ms(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.2f s", v/1000)
	}
	return fmt.Sprintf("%.0f ms", v)
}

func kib(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f KiB", v/1024)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "benchplot:", err)
	os.Exit(1)
}

func drawCDF(path string, rs []result, names []string) error {
	p := plot.New()
	p.Title.Text = "Pod start latency (create request to Running, seen on /pods)"
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "fraction of pods"
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	for i, r := range rs {
		n := len(r.LatencySamplesMS)
		if n == 0 {
			continue
		}
		pts := make(plotter.XYs, 0, 2*n)
		for j, ms := range r.LatencySamplesMS { // sorted by the bench
			pts = append(pts, plotter.XY{X: ms / 1000, Y: float64(j) / float64(n)})
			pts = append(pts, plotter.XY{X: ms / 1000, Y: float64(j+1) / float64(n)})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(names[i], l)
	}
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs = -vg.Points(8)
	p.Legend.YOffs = vg.Points(8)
	return save(p, path)
}

func drawTimeline(path string, r result) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %d pods, %s over time", r.Scenario, r.Pods, strings.ToLower(goal(r)))
	p.X.Label.Text = "seconds since the first create request"
	p.Y.Label.Text = "pods " + goal(r) + " (as seen on /pods)"
	p.Add(plotter.NewGrid())
	pts := make(plotter.XYs, 0, len(r.RunningOverTime))
	for _, s := range r.RunningOverTime {
		pts = append(pts, plotter.XY{X: s.T, Y: s.V})
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Width = vg.Points(1.5)
	l.Color = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	p.Add(l)
	p.Legend.Add("pods "+goal(r), l)
	// Agent RSS on the same axes, scaled so its peak sits at the top.
	var peak float64
	for _, s := range r.RSSOverTime {
		peak = max(peak, s.V)
	}
	if peak > 0 && r.Pods > 0 {
		rss := make(plotter.XYs, 0, len(r.RSSOverTime))
		for _, s := range r.RSSOverTime {
			rss = append(rss, plotter.XY{X: s.T, Y: s.V / peak * float64(r.Pods)})
		}
		rl, err := plotter.NewLine(rss)
		if err != nil {
			return err
		}
		rl.Color = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
		rl.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(rl)
		p.Legend.Add(fmt.Sprintf("agent RSS (peak %.0f MiB = top)", peak/(1<<20)), rl)
	}
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs = -vg.Points(8)
	p.Legend.YOffs = vg.Points(8)
	return save(p, path)
}

func goal(r result) string {
	if r.Goal == "" {
		return "Running"
	}
	return r.Goal
}

func save(p *plot.Plot, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}
