package bench_test

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/actorlet/actorlet/internal/bench"
	"github.com/actorlet/actorlet/internal/testenv"
)

// upstreamKubelet builds (once per machine: cached) the upstream kubelet
// with deploy/local/kubelet.sh; a machine that cannot build it skips, or
// fails with CI=true.
func upstreamKubelet(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(t), "deploy/local/kubelet.sh"), "build")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == testenv.ExitCannotRun {
		testenv.CannotRun(t, "deploy/local/kubelet.sh cannot build the upstream kubelet: "+stderr.String())
	}
	if err != nil {
		t.Fatalf("deploy/local/kubelet.sh build: %v\n%s", err, stderr.String())
	}
	path, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "KUBELET=")
	if !ok {
		t.Fatalf("deploy/local/kubelet.sh build printed %q", out)
	}
	return path
}

// TestBenchAgainstUpstream runs the comparison at tiny scale: 10 pods on
// actorlet, then on the upstream kubelet, through the local control plane,
// each agent on its own fake CRI runtime, and a kill -9 of each with 10
// pods. Both must bring every pod Ready, delete them, recover without
// restarting a container, duplicating a sandbox or flapping a pod; the
// host's sysctls the kubelet rewrites are put back; nothing is left, and
// nothing of the working directory is removed.
func TestBenchAgainstUpstream(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.CannotRun(t, "the upstream kubelet needs root")
	}
	env := testenv.ControlPlane(t)
	kubelet := upstreamKubelet(t)
	sysctls := func() string {
		var b strings.Builder
		for _, k := range []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"} {
			v, _ := os.ReadFile("/proc/sys/" + k)
			b.WriteString(k + "=" + strings.TrimSpace(string(v)) + " ")
		}
		return b.String()
	}
	before := sysctls()
	const prefix = "bench-test-against"
	heap := filepath.Join(t.TempDir(), "heap.pprof")
	cpu := filepath.Join(t.TempDir(), "cpu.pprof")
	r, code, stderr := runBench(t, "--against", "upstream", "--pods", "10", "--recovery-pods", "10",
		"--node-name", prefix, "--kubeconfig", env.AdminKubeconfig, "--kubelet", kubelet, "--timeout", "3m",
		"--heap-profile", heap, "--cpu-profile", cpu, "--cpu-profile-after-ready", "2s", "--api-server-profile")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	// actorlet's heap at rest, at its peak and after the deletion.
	for _, name := range []string{"actorlet-idle", "actorlet", "actorlet-after-delete"} {
		checkProfile(t, strings.TrimSuffix(heap, ".pprof")+"-"+name+".pprof")
	}
	// Each agent's CPU once its last pod was Ready (both serve
	// /debug/pprof on their authenticated port).
	for _, name := range []string{"actorlet", "upstream-kubelet"} {
		checkProfile(t, strings.TrimSuffix(cpu, ".pprof")+"-"+name+"-after-ready.pprof")
		// kube-apiserver's CPU through each agent's fill, in 2 s profiles
		// (10 pods: one or two).
		checkProfile(t, strings.TrimSuffix(cpu, ".pprof")+"-apiserver-"+name+"-001.pprof")
	}
	checkAPIServerSplit(t, strings.TrimSuffix(cpu, ".pprof")+"-apiserver-actorlet-*.pprof")
	a := r.Against
	if r.Scenario != bench.ScenarioAgainstUpstream || a == nil || a.Actorlet == nil || a.Upstream == nil {
		t.Fatalf("scenario %q, against %+v", r.Scenario, a)
	}
	if !strings.HasPrefix(a.KubeletVersion, "v1.37.") || a.NodeIP == "" || strings.HasPrefix(a.NodeIP, "127.") {
		t.Errorf("kubelet version %q, node IP %q", a.KubeletVersion, a.NodeIP)
	}
	for _, f := range []*bench.AgentFigures{a.Actorlet, a.Upstream} {
		t.Run(f.Agent, func(t *testing.T) {
			if f.Ready != 10 || f.Deleted != 10 || f.Error != "" {
				t.Fatalf("ready %d, deleted %d, error %q", f.Ready, f.Deleted, f.Error)
			}
			l := f.StartLatencyMS
			if !(l.P50 > 0 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.Max) {
				t.Errorf("start latencies not ordered: %+v", l)
			}
			if f.CreatePodsPerSecond <= 0 || f.DeletePodsPerSecond <= 0 || f.DeleteLatencyMS.P50 <= 0 {
				t.Errorf("create %v pods/s, delete %v pods/s, delete latency %+v", f.CreatePodsPerSecond, f.DeletePodsPerSecond, f.DeleteLatencyMS)
			}
			if f.RSSPeakBytes < f.RSSIdleBytes || f.RSSIdleBytes == 0 || f.CPUPerPodMS <= 0 {
				t.Errorf("rss idle %d peak %d, cpu per pod %v", f.RSSIdleBytes, f.RSSPeakBytes, f.CPUPerPodMS)
			}
			if fs := f.FileSystem; fs == nil || fs.Type == "" || fs.InodeCPUMicros <= 0 {
				t.Errorf("file system of the agent's directories %+v, want its type and CPU per inode", fs)
			}
			// Until the last Ready is a part of the whole window.
			if f.CPUToReadyPerPodMS <= 0 || f.CPUToReadyPerPodMS > f.CPUPerPodMS {
				t.Errorf("cpu per pod until the last Ready %v, in all %v", f.CPUToReadyPerPodMS, f.CPUPerPodMS)
			}
			// Each pod's status reached the API server through the agent's
			// own identity, with its own token.
			if f.APIRequestsPerPod["patch pods/status"] < 1 || f.APIRequestsPerPod["create serviceaccounts/token"] < 1 || f.APIWritesPerPod < 2 {
				t.Errorf("API requests per pod %v (writes %v)", f.APIRequestsPerPod, f.APIWritesPerPod)
			}
			// Every pod start went through the shared fake runtime: one
			// sandbox and one container each, whatever else each agent asks.
			if c := f.CRICallsPerPod; c["RunPodSandbox"] != 1 || c["CreateContainer"] != 1 || c["StartContainer"] != 1 {
				t.Errorf("CRI calls per pod %v, want one RunPodSandbox, CreateContainer and StartContainer", c)
			}
			rec := f.Recovery
			if rec == nil || !rec.Recovered || rec.Pods != 10 || rec.Seconds < rec.HealthySeconds || rec.HealthySeconds <= 0 {
				t.Fatalf("recovery %+v", rec)
			}
			if rec.ContainerRestarts != 0 || rec.DuplicateSandboxes != 0 || rec.RestartCount != 0 || rec.ReadyFlaps != 0 {
				t.Errorf("recovery broke pods: %+v", rec)
			}
		})
	}
	if !slices.Contains(a.Actorlet.Args, "--kube-api-qps") || !slices.Contains(a.Upstream.Args, "--config") {
		t.Errorf("args: actorlet %v, upstream %v", a.Actorlet.Args, a.Upstream.Args)
	}
	for _, k := range []string{"create_pods_per_second", "delete_pods_per_second", "start_p50", "start_p90", "start_p99",
		"rss_peak", "cpu_per_pod", "api_writes_per_pod", "recovery_seconds"} {
		if a.Ratios[k] <= 0 {
			t.Errorf("ratio %s missing: %v", k, a.Ratios)
		}
	}
	if !strings.Contains(stderr, "actorlet vs upstream: create") {
		t.Errorf("no summary on stderr:\n%s", stderr)
	}
	// The fake runtime reports no log path, and the kubelet removes every
	// file "<log path>*" matches when it removes a container: nothing of
	// the bench's working directory (this package's) may go.
	if _, err := os.Stat("upstream_test.go"); err != nil {
		t.Errorf("the bench's working directory lost its files: %v", err)
	}
	if after := sysctls(); after != before {
		t.Errorf("sysctls changed by the kubelet and not put back: %s, was %s", after, before)
	}
	// Cleaned up: no Node, no pods, no counting FlowSchemas.
	kubectl := func(args ...string) string {
		out, _ := exec.Command(env.Kubectl, append([]string{"--kubeconfig", env.AdminKubeconfig}, args...)...).CombinedOutput()
		return string(out)
	}
	for _, node := range []string{prefix + "-actorlet", prefix + "-upstream"} {
		if out := kubectl("get", "node", node); !strings.Contains(out, "NotFound") {
			t.Errorf("node left behind: %s", out)
		}
		if out := kubectl("get", "pods", "-A", "--field-selector", "spec.nodeName="+node, "-o", "name"); strings.Contains(out, "pod/") {
			t.Errorf("pods left behind: %s", out)
		}
	}
	if out := kubectl("get", "flowschemas", "-o", "name"); strings.Contains(out, "actorlet-bench-"+prefix) {
		t.Errorf("FlowSchemas left behind: %s", out)
	}
}

// checkAPIServerSplit runs hack/apiserver-split.sh over the API server's
// profiles of one agent's fill (a glob): a line per kind of work, whose
// CPU seconds add up to the line "all", which is more than nothing.
func checkAPIServerSplit(t *testing.T, glob string) {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Errorf("API server profiles %s: %v %v", glob, files, err)
		return
	}
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(t), "hack/apiserver-split.sh"), append([]string{"10"}, files...)...).CombinedOutput()
	if err != nil {
		t.Errorf("apiserver-split.sh: %v\n%s", err, out)
		return
	}
	secs := map[string]float64{}
	var sum float64
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, rest, ok := strings.Cut(l, "  ")
		f := strings.Fields(rest)
		if !ok || len(f) < 2 || f[1] != "s" {
			t.Errorf("apiserver-split.sh line %q", l)
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			t.Errorf("apiserver-split.sh line %q: %v", l, err)
			continue
		}
		name = strings.TrimSpace(name)
		secs[name] = v
		if name != "all" {
			sum += v
		}
	}
	for _, k := range []string{"gc", "status patches", "token requests", "creates", "watch fan-out", "request filters", "HTTP/2, TLS", "the rest", "all"} {
		if _, ok := secs[k]; !ok {
			t.Errorf("apiserver-split.sh: no line %q\n%s", k, out)
		}
	}
	// Each line is rounded to 10 ms.
	if secs["all"] <= 0 || math.Abs(sum-secs["all"]) > 0.01*float64(len(secs)) {
		t.Errorf("apiserver-split.sh: the kinds add up to %.2f s, all %.2f s\n%s", sum, secs["all"], out)
	}
}
