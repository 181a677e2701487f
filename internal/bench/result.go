// Package bench drives a real actorlet process from the outside and measures
// what a user sees: how long pods take from the create request to Running
// (or Ready), how fast a node fills, what the agent costs in memory and CPU,
// and, under chaos, whether the node converges without breaking the
// invariants (checked through the CRI, never through actorlet's own view).
//
// It is the engine of actorlet-bench (cmd/actorlet-bench); the command parses flags into
// Options and writes the Result as JSON.
package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Latency summarises per-pod latencies in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Sample is one point of a time series: seconds since the run started.
type Sample struct {
	T     float64 `json:"t"`
	Value float64 `json:"v"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs      int    `json:"cpus"`
	MemBytes  uint64 `json:"mem_bytes"`
	Kernel    string `json:"kernel"`
	CPUModel  string `json:"cpu_model"`
	GoVersion string `json:"go_version"`
	// LoadAvg1 is the 1-minute load average when the run started: other
	// work on the machine skews every number.
	LoadAvg1 float64 `json:"load_avg_1m"`
}

// Churn holds what the churn and chaos scenarios add.
type Churn struct {
	Creates         int     `json:"creates"`
	Deletes         int     `json:"deletes"`
	DeleteLatencyMS Latency `json:"delete_latency_ms"`
	// ConvergeSeconds is the time from the end of the load (and of chaos)
	// to the node showing exactly the desired pods, Running, in the
	// runtime and on /pods.
	ConvergeSeconds float64 `json:"converge_seconds"`
	Converged       bool    `json:"converged"`
	ChaosKillRate   float64 `json:"chaos_kill_rate,omitempty"`
	ChaosCrashes    int     `json:"chaos_crashes,omitempty"`
	// ChurnRate is the pacing (pods replaced per second), 0 if none.
	ChurnRate     float64 `json:"churn_rate,omitempty"`
	ActorRestarts float64 `json:"actor_restarts,omitempty"`
	HTTPRetries   int     `json:"http_retries,omitempty"`
}

// Probes holds what the probes scenario adds: the probe period as seen by
// the runtime (executions of each pod's probe command over the window).
type Probes struct {
	PeriodSeconds float64 `json:"period_seconds"`
	WindowSeconds float64 `json:"window_seconds"`
	// PeriodMS is the distribution over pods of each pod's mean observed
	// period; DriftMS the same minus the configured period.
	PeriodMS Latency `json:"period_ms"`
	DriftMS  Latency `json:"drift_ms"`
	// Executions counted through the runtime in the window, and expected.
	Executions int `json:"executions"`
	Expected   int `json:"expected"`
	// Missed counts pods whose probe never ran in the window.
	Missed int `json:"missed"`
}

// Result is what one run reports. The JSON field names are stable: tests,
// docs/bench/*.json and the chart generator read them.
type Result struct {
	Scenario      string  `json:"scenario"`
	Pods          int     `json:"pods"`
	Running       int     `json:"running"`
	Goal          string  `json:"goal"`
	Seconds       float64 `json:"seconds"`
	PodsPerSecond float64 `json:"pods_per_second"`
	LatencyMS     Latency `json:"latency_ms"`
	// CreatedSeconds is when the last create request returned (or the
	// last manifest was written), since the start.
	CreatedSeconds float64 `json:"created_seconds"`

	RSSPeakBytes    uint64         `json:"rss_peak_bytes"`
	RSSEndBytes     uint64         `json:"rss_end_bytes"`
	RSSIdleBytes    uint64         `json:"rss_idle_bytes"`
	RSSPerPodBytes  float64        `json:"rss_per_pod_bytes"`
	CPUSeconds      float64        `json:"cpu_seconds"`
	CPUPerPodMS     float64        `json:"cpu_per_pod_ms"`
	CPUCoresMean    float64        `json:"cpu_cores_mean"`
	GoroutinesPeak  int            `json:"goroutines_peak"`
	GoroutinesEnd   int            `json:"goroutines_end"`
	ActorsEnd       int            `json:"actors_end"`
	ActorsByKindEnd map[string]int `json:"actors_by_kind_end,omitempty"`

	// RuntimeOpsPerPod is CRI calls per pod by operation (the agent's
	// kubelet_runtime_operations_total at the end over pods).
	RuntimeOpsPerPod map[string]float64 `json:"runtime_ops_per_pod,omitempty"`

	// APIRequestsPerPod is cluster-sim's count of the agent's API requests
	// by "verb resource" (as the API server dispatched them for the node's
	// user) from the first create to the last pod Ready, over pods;
	// APIWritesPerPod sums its create, update, patch and delete.
	// APIRequestsStartup is the same from the agent's start to the Node
	// Ready (not per pod).
	APIRequestsPerPod map[string]float64 `json:"api_requests_per_pod,omitempty"`
	APIWritesPerPod   float64            `json:"api_writes_per_pod,omitempty"`
	// APIWritesPerPodAtReady counts only up to the last pod Ready (events
	// and other writes may trail it).
	APIWritesPerPodAtReady float64            `json:"api_writes_per_pod_at_ready,omitempty"`
	APIRequestsStartup     map[string]float64 `json:"api_requests_startup,omitempty"`

	Violations       int      `json:"violations"`
	ViolationDetails []string `json:"violation_details,omitempty"`

	// Memory: standalone-sim with AfterDelete, idle, Ready and after
	// every pod was deleted.
	Memory *MemoryFigures `json:"memory,omitempty"`

	Churn  *Churn  `json:"churn,omitempty"`
	Probes *Probes `json:"probes,omitempty"`
	Soak   *Soak   `json:"soak,omitempty"`
	// Eviction and Stats: the node-resource scenarios (eviction.go).
	Eviction *Eviction  `json:"eviction,omitempty"`
	Stats    *StatsCost `json:"stats,omitempty"`
	// Storm: the status-storm scenario (storm.go).
	Storm *Storm `json:"storm,omitempty"`
	// Against: --against upstream (upstream.go), each agent's figures and
	// the ratios.
	Against *Against `json:"against,omitempty"`
	// Resize: the resize scenario (resize.go).
	Resize *Resize `json:"resize,omitempty"`

	// How the run was observed: /pods polls (count and mean duration),
	// and the agent's command line.
	Polls       int       `json:"polls"`
	PollMeanMS  float64   `json:"poll_mean_ms"`
	Concurrency int       `json:"concurrency"`
	Source      string    `json:"source"`
	Runtime     string    `json:"runtime"`
	AgentArgs   []string  `json:"agent_args,omitempty"`
	Machine     Machine   `json:"machine"`
	StartedAt   time.Time `json:"started_at"`
	// FileSystem is the file system of the agent's directories at the
	// start (nil when it could not be measured: a warning says why).
	FileSystem *FileSystem `json:"file_system,omitempty"`

	// Series for charts: pods Running over time, agent RSS over time,
	// every pod's start latency (sorted, ms).
	RunningOverTime  []Sample  `json:"running_over_time,omitempty"`
	RSSOverTime      []Sample  `json:"rss_over_time,omitempty"`
	LatencySamplesMS []float64 `json:"latency_samples_ms,omitempty"`

	Error string `json:"error,omitempty"`
}

// Summarize returns the percentiles of ms (nearest rank). An empty input
// gives zeros.
func Summarize(ms []float64) Latency {
	if len(ms) == 0 {
		return Latency{}
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	return Latency{
		P50:  round(percentile(s, 50)),
		P90:  round(percentile(s, 90)),
		P99:  round(percentile(s, 99)),
		Max:  round(s[len(s)-1]),
		Mean: round(sum / float64(len(s))),
	}
}

// percentile is the nearest-rank percentile of sorted s.
func percentile(s []float64, p float64) float64 {
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

func round(v float64) float64 { return math.Round(v*10) / 10 }

// WriteJSON writes r, indented, to path ("-" or "" is stdout).
func (r *Result) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	b = append(b, '\n')
	if path == "" || path == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}

// Summary is a one-line human summary of r.
func (r *Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d/%d pods %s in %.1fs (%.1f pods/s), start p50 %.0fms p99 %.0fms max %.0fms, RSS peak %.1f MiB, CPU %.1fs (%.1f ms/pod)",
		r.Scenario, r.Running, r.Pods, r.Goal, r.Seconds, r.PodsPerSecond, r.LatencyMS.P50, r.LatencyMS.P99, r.LatencyMS.Max,
		float64(r.RSSPeakBytes)/(1<<20), r.CPUSeconds, r.CPUPerPodMS)
	if r.Churn != nil {
		fmt.Fprintf(&b, ", creates %d, deletes %d, converged=%v in %.1fs", r.Churn.Creates, r.Churn.Deletes, r.Churn.Converged, r.Churn.ConvergeSeconds)
	}
	if r.Probes != nil {
		fmt.Fprintf(&b, ", probe period p50 %.0fms p99 %.0fms (drift p99 %.0fms)", r.Probes.PeriodMS.P50, r.Probes.PeriodMS.P99, r.Probes.DriftMS.P99)
	}
	if len(r.APIRequestsPerPod) > 0 {
		fmt.Fprintf(&b, ", API writes %.2f per pod (%s)", r.APIWritesPerPod, apiSummary(r.APIRequestsPerPod))
	}
	if r.Soak != nil {
		fmt.Fprintf(&b, ", soak: %s", r.Soak.summary())
	}
	if r.Eviction != nil {
		fmt.Fprintf(&b, ", eviction: %s", r.Eviction.summary())
	}
	if r.Stats != nil {
		fmt.Fprintf(&b, ", stats: %s", r.Stats.summary())
	}
	if r.Against != nil {
		return r.Scenario + ": " + r.Against.summary()
	}
	if r.Resize != nil {
		return r.Scenario + ": " + r.Resize.summary()
	}
	if r.Scenario == ScenarioChaos || r.Scenario == ScenarioSoak || r.Violations > 0 {
		fmt.Fprintf(&b, ", violations %d", r.Violations)
	}
	return b.String()
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				m.MemBytes = parseKB(v)
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			m.LoadAvg1, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}
