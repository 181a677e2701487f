package bench_test

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/actorlet/actorlet/internal/bench"
	"github.com/actorlet/actorlet/internal/testenv"
)

// runBench runs `actorlet-bench args...` as a user would (the agent it
// starts: the actorlet beside it, found by default) and returns the JSON
// result, the exit code and stderr.
func runBench(t *testing.T, args ...string) (bench.Result, int, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "result.json")
	cmd := exec.Command(testenv.ActorletBenchBinary(t), append([]string{"--out", out}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var r bench.Result
	b, rerr := os.ReadFile(out)
	if rerr == nil {
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("result is not JSON: %v\n%s", err, b)
		}
	}
	return r, code, stderr.String()
}

// checkSane asserts what every complete run reports: every pod reached
// the goal, ordered latencies, and the agent's footprint.
func checkSane(t *testing.T, r bench.Result, scenario string, pods int) {
	t.Helper()
	if r.Scenario != scenario {
		t.Errorf("scenario %q, want %q", r.Scenario, scenario)
	}
	if pods > 0 && r.Pods != pods {
		t.Errorf("pods %d, want %d", r.Pods, pods)
	}
	if r.Running != r.Pods || r.Pods == 0 {
		t.Errorf("%d of %d pods reached %s", r.Running, r.Pods, r.Goal)
	}
	l := r.LatencyMS
	if !(l.P50 > 0 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.Max) {
		t.Errorf("latencies not ordered: %+v", l)
	}
	if len(r.LatencySamplesMS) != r.Running {
		t.Errorf("%d latency samples for %d pods", len(r.LatencySamplesMS), r.Running)
	}
	if r.Seconds <= 0 || r.PodsPerSecond <= 0 {
		t.Errorf("seconds %v, pods/s %v", r.Seconds, r.PodsPerSecond)
	}
	if r.RSSPeakBytes == 0 || r.RSSEndBytes == 0 || r.RSSPeakBytes < r.RSSEndBytes {
		t.Errorf("rss peak %d, end %d", r.RSSPeakBytes, r.RSSEndBytes)
	}
	if r.CPUSeconds < 0 || r.GoroutinesPeak <= 0 || r.ActorsEnd <= 0 {
		t.Errorf("cpu %v, goroutines peak %d, actors %d", r.CPUSeconds, r.GoroutinesPeak, r.ActorsEnd)
	}
	if r.Polls == 0 || len(r.RunningOverTime) == 0 {
		t.Errorf("no observation: %d polls", r.Polls)
	}
	if r.Machine.CPUs == 0 || len(r.AgentArgs) == 0 {
		t.Errorf("machine %+v, args %v", r.Machine, r.AgentArgs)
	}
}

func TestBenchStandaloneSim(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"push", nil},
		{"manifest dir", []string{"--source", "file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, code, stderr := runBench(t, append([]string{"--scenario", "standalone-sim", "--pods", "20"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			checkSane(t, r, bench.ScenarioStandaloneSim, 20)
			if r.Goal != bench.GoalRunning || r.Violations != 0 {
				t.Errorf("goal %q, violations %d", r.Goal, r.Violations)
			}
			if fs := r.FileSystem; fs == nil || fs.Type == "" || fs.InodeCPUMicros <= 0 {
				t.Errorf("file system of the agent's directories %+v, want its type and CPU per inode", fs)
			}
			if !strings.Contains(stderr, "20/20 pods Running") {
				t.Errorf("no summary on stderr:\n%s", stderr)
			}
		})
	}
}

// TestBenchStandaloneAfterDelete: with --after-delete the standalone run
// holds its pods, deletes them and reports the agent's memory idle, Ready,
// steady and after the deletion, with a heap profile at both ends.
func TestBenchStandaloneAfterDelete(t *testing.T) {
	heap := filepath.Join(t.TempDir(), "heap.pprof")
	r, code, stderr := runBench(t, "--scenario", "standalone-sim", "--pods", "20", "--after-delete", "--heap-profile", heap)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	checkSane(t, r, bench.ScenarioStandaloneSim, 20)
	m := r.Memory
	if m == nil {
		t.Fatal("no memory figures")
	}
	for name, s := range map[string]bench.MemorySample{"idle": m.Idle, "ready": m.Ready, "steady": m.Steady, "after_delete": m.AfterDelete} {
		if s.RSSBytes == 0 || s.RSSAnonBytes == 0 || s.HeapBytes == 0 || s.RSSAnonBytes > s.RSSBytes ||
			s.HeapInuseBytes < s.HeapBytes || s.StackBytes == 0 || s.RuntimeBytes == 0 {
			t.Errorf("%s: %+v", name, s)
		}
	}
	if m.SteadySettleSeconds <= 0 {
		t.Errorf("steady_settle_seconds %v", m.SteadySettleSeconds)
	}
	if m.AfterDeleteSettleSeconds <= 0 {
		t.Errorf("after_delete_settle_seconds %v", m.AfterDeleteSettleSeconds)
	}
	for _, f := range []string{heap, strings.TrimSuffix(heap, ".pprof") + "-after-delete.pprof"} {
		checkProfile(t, f)
	}
}

// checkProfile: path is a pprof profile (gzip-compressed, not empty).
func checkProfile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Errorf("profile: %v", err)
		return
	}
	defer func() { _ = f.Close() }()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Errorf("profile %s: %v", path, err)
		return
	}
	if b, err := io.ReadAll(z); err != nil || len(b) == 0 {
		t.Errorf("profile %s: %d bytes, %v", path, len(b), err)
	}
}

func TestBenchChurn(t *testing.T) {
	r, code, stderr := runBench(t, "--scenario", "churn", "--pods", "10", "--duration", "3s")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	checkSane(t, r, bench.ScenarioChurn, 0)
	c := r.Churn
	if c == nil || c.Creates <= 10 || c.Deletes != c.Creates-10 || !c.Converged || r.Violations != 0 {
		t.Fatalf("churn: %+v, violations %v", c, r.ViolationDetails)
	}
	if d := c.DeleteLatencyMS; !(d.P50 > 0 && d.P50 <= d.P99 && d.P99 <= d.Max) {
		t.Errorf("delete latencies: %+v", d)
	}
}

func TestBenchChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos waits for convergence; skipped with -short")
	}
	r, code, stderr := runBench(t, "--scenario", "chaos", "--pods", "10", "--duration", "3s", "--chaos-kill-rate", "20")
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, r.ViolationDetails, stderr)
	}
	checkSane(t, r, bench.ScenarioChaos, 0)
	c := r.Churn
	if c == nil || !c.Converged || c.ChaosKillRate != 20 || c.ChaosCrashes == 0 || c.ActorRestarts == 0 {
		t.Fatalf("chaos: %+v", c)
	}
	if r.Violations != 0 {
		t.Fatalf("violations: %v", r.ViolationDetails)
	}
}

// TestBenchSoak runs a short soak: chaos plus paced churn, the agent
// sampled every second; every series is read and judged flat (the agent
// leaks nothing in 20 s), the node converges, no invariant breaks. The
// rates are low so that 20 s judge something: a deleted pod's directories
// stay until the next housekeeping sweep (every 10 s, re-armed at each
// NodeActor restart), a saw-tooth of churn rate x 10 s x ~8 entries that
// must stay under the 100-entry floor.
func TestBenchSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak runs 20 s and waits for convergence; skipped with -short")
	}
	r, code, stderr := runBench(t, "--scenario", "soak", "--pods", "10", "--duration", "20s",
		"--churn-rate", "0.5", "--chaos-kill-rate", "0.5", "--sample-interval", "1s")
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, r.ViolationDetails, stderr)
	}
	s, c := r.Soak, r.Churn
	if s == nil || c == nil {
		t.Fatalf("no soak or churn in the result: %+v", r)
	}
	if !c.Converged || r.Violations != 0 || c.ChaosCrashes == 0 || c.ChurnRate != 0.5 || c.Deletes < 5 {
		t.Fatalf("churn %+v, violations %v", c, r.ViolationDetails)
	}
	if len(s.Samples) < 15 || s.SampleSeconds != 1 || s.WarmupSeconds != 5 || len(s.Leaks) != 0 || len(s.Dirs) != 2 {
		t.Fatalf("soak: %d samples every %vs, warm-up %vs, leaks %v, dirs %v", len(s.Samples), s.SampleSeconds, s.WarmupSeconds, s.Leaks, s.Dirs)
	}
	for _, name := range bench.SoakSeries {
		tr, ok := s.Trends[name]
		if !ok || !tr.Checked || (!tr.Flat && !tr.Informational) || tr.Start < 0 {
			t.Errorf("%s: %+v", name, tr)
		}
	}
	last := s.Samples[len(s.Samples)-1]
	if last.RSSBytes <= 0 || last.RSSAnonBytes <= 0 || last.HeapBytes <= 0 || last.Goroutines <= 0 || last.OpenFiles <= 0 || last.DiskEntries <= 0 || last.Pods <= 0 || last.Actors <= 0 {
		t.Errorf("last sample %+v", last)
	}
	if r.RSSOverTime != nil || r.RunningOverTime != nil || r.LatencySamplesMS != nil {
		t.Errorf("per-pod series kept in a soak result")
	}
	if !strings.Contains(stderr, "soak: rss_bytes") || !strings.Contains(stderr, "violations 0") {
		t.Errorf("no soak summary on stderr:\n%s", stderr)
	}
}

func TestBenchProbes(t *testing.T) {
	r, code, stderr := runBench(t, "--scenario", "probes", "--pods", "10", "--duration", "3s")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	checkSane(t, r, bench.ScenarioProbes, 10)
	p := r.Probes
	if r.Goal != bench.GoalReady || p == nil || p.Executions == 0 || p.Missed != 0 || p.PeriodSeconds != 1 {
		t.Fatalf("probes: %+v", p)
	}
	if pm := p.PeriodMS; !(pm.P50 > 0 && pm.P50 <= pm.P90 && pm.P90 <= pm.P99 && pm.P99 <= pm.Max) {
		t.Errorf("probe periods: %+v", pm)
	}
}

// TestBenchContainerd runs busybox pods on a private containerd (its own
// state dir, bridge and subnet, so that agents of other test packages on
// the shared one do not kill these pods as orphans).
func TestBenchContainerd(t *testing.T) {
	t.Setenv("ACTORLET_CONTAINERD_DIR", "/tmp/actorlet-containerd-bench")
	t.Setenv("ACTORLET_CNI_BRIDGE", "actorletb0")
	t.Setenv("ACTORLET_CNI_SUBNET", "10.244.214.0/24")
	env := testenv.ContainerdInfo(t)
	r, code, stderr := runBench(t, "--scenario", "containerd", "--pods", "5",
		"--runtime-endpoint", env.Endpoint, "--image", env.BusyboxImage)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	checkSane(t, r, bench.ScenarioContainerd, 5)
	if r.Runtime != env.Endpoint {
		t.Errorf("runtime %q, want %q", r.Runtime, env.Endpoint)
	}
}

// TestBenchClusterSim creates pods through the local control plane's API
// server for an agent in cluster mode (its own node name, so that a bench
// run by hand does not collide) and checks the API server counted the
// agent's requests.
func TestBenchClusterSim(t *testing.T) {
	env := testenv.ControlPlane(t)
	const node = "bench-test-node"
	nodeKubeconfig := testenv.NodeKubeconfig(t, node)
	r, code, stderr := runBench(t, "--scenario", "cluster-sim", "--pods", "20", "--node-name", node,
		"--kubeconfig", env.AdminKubeconfig, "--node-kubeconfig", nodeKubeconfig)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	checkSane(t, r, bench.ScenarioClusterSim, 20)
	if r.Goal != bench.GoalReady {
		t.Errorf("goal %q, want Ready", r.Goal)
	}
	// Every pod's status reaches the API server through the agent's own
	// identity: at least one status write and one token per pod.
	if r.APIRequestsPerPod["patch pods/status"] < 1 || r.APIRequestsPerPod["create serviceaccounts/token"] < 1 || r.APIWritesPerPod < 2 {
		t.Errorf("API requests per pod: %v (writes %v)", r.APIRequestsPerPod, r.APIWritesPerPod)
	}
	if r.APIRequestsStartup["create nodes"] != 1 {
		t.Errorf("startup requests: %v", r.APIRequestsStartup)
	}
	if !slices.Contains(r.AgentArgs, "--kube-api-qps") || !strings.Contains(stderr, "20/20 pods Ready") {
		t.Errorf("args %v; stderr:\n%s", r.AgentArgs, stderr)
	}
	// Cleaned up: no Node, no pods, no counting FlowSchemas.
	kubectl := func(args ...string) string {
		out, _ := exec.Command(env.Kubectl, append([]string{"--kubeconfig", env.AdminKubeconfig}, args...)...).CombinedOutput()
		return string(out)
	}
	if out := kubectl("get", "node", node); !strings.Contains(out, "NotFound") {
		t.Errorf("node left behind: %s", out)
	}
	if out := kubectl("get", "flowschemas", "-o", "name"); strings.Contains(out, "actorlet-bench-"+node) || !strings.Contains(out, "system-nodes") {
		t.Errorf("FlowSchemas left behind: %s", out)
	}
	out, _ := exec.Command(env.Kubectl, "--kubeconfig", env.AdminKubeconfig, "get", "pods", "-A",
		"--field-selector", "spec.nodeName="+node, "-o", "name").CombinedOutput()
	if strings.TrimSpace(string(out)) != "" && !strings.Contains(string(out), "No resources") {
		t.Errorf("pods left behind: %s", out)
	}
}

func TestBenchUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no scenario", nil, 2, "--scenario is required"},
		{"unknown scenario", []string{"--scenario", "nope"}, 2, `unknown scenario "nope"`},
		{"bad flag", []string{"--pods", "x"}, 2, "invalid argument"},
		{"file source for churn", []string{"--scenario", "churn", "--source", "file"}, 2, "--source file"},
		{"negative churn rate", []string{"--scenario", "soak", "--churn-rate", "-1"}, 2, "--churn-rate must not be negative"},
		{"against something else", []string{"--against", "kubelet"}, 2, `--against "kubelet": want upstream`},
		{"negative rounds", []string{"--against", "upstream", "--rounds", "-1"}, 2, "--rounds must not be negative"},
		{"against with another scenario", []string{"--against", "upstream", "--scenario", "churn"}, 2, "not with --scenario churn"},
		{"cluster-sim with a missing kubeconfig", []string{"--scenario", "cluster-sim", "--kubeconfig", "/nonexistent/admin.kubeconfig"}, 1, "--kubeconfig"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, code, stderr := runBench(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) {
				t.Fatalf("exit %d, want %d with %q:\n%s", code, tc.code, tc.msg, stderr)
			}
		})
	}
}

// TestBenchGOMAXPROCSAndLockProfiles runs the scaling curve's one point on
// one core and fetches the agent's mutex and block profiles.
func TestBenchGOMAXPROCSAndLockProfiles(t *testing.T) {
	dir := t.TempDir()
	mutex, block := filepath.Join(dir, "mutex.pprof"), filepath.Join(dir, "block.pprof")
	r, code, stderr := runBench(t, "--scenario", "standalone-sim", "--pods", "10", "--gomaxprocs", "1",
		"--mutex-profile", mutex, "--block-profile", block)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	checkSane(t, r, bench.ScenarioStandaloneSim, 10)
	for _, p := range []string{mutex, block} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("profile %s: %v (size %d)", p, err, sizeOf(st))
		}
	}
	_, code, stderr = runBench(t, "--scenario", "standalone-sim", "--pods", "1", "--gomaxprocs", "-1")
	if code != 2 || !strings.Contains(stderr, "--gomaxprocs must not be negative") {
		t.Errorf("--gomaxprocs -1: exit %d, want 2 and the reason\n%s", code, stderr)
	}
	_, code, stderr = runBench(t, "--scenario", "standalone-sim", "--pods", "1", "--cpu-profile-after-ready", "1s")
	if code != 2 || !strings.Contains(stderr, "--cpu-profile-after-ready needs --against upstream") {
		t.Errorf("--cpu-profile-after-ready without --against: exit %d, want 2 and the reason\n%s", code, stderr)
	}
	_, code, stderr = runBench(t, "--scenario", "standalone-sim", "--pods", "1", "--api-server-profile")
	if code != 2 || !strings.Contains(stderr, "--api-server-profile needs --against upstream") {
		t.Errorf("--api-server-profile without --against: exit %d, want 2 and the reason\n%s", code, stderr)
	}
}

func sizeOf(st os.FileInfo) int64 {
	if st == nil {
		return 0
	}
	return st.Size()
}
