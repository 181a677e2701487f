package bench_test

import (
	"os"
	"strings"
	"testing"

	"github.com/actorlet/actorlet/internal/bench"
	"github.com/actorlet/actorlet/internal/testenv"
)

// checkResize asserts what every resize run reports, done or not.
func checkResize(t *testing.T, r bench.Result, agent string, pods, rounds int) *bench.Resize {
	t.Helper()
	z := r.Resize
	if r.Scenario != bench.ScenarioResize || z == nil {
		t.Fatalf("scenario %q, resize %+v", r.Scenario, z)
	}
	if z.Agent != agent || z.Runtime != bench.ResizeRuntimeSim || z.Rounds != rounds || r.Running != pods {
		t.Errorf("agent %q runtime %q rounds %d, %d pods Ready", z.Agent, z.Runtime, z.Rounds, r.Running)
	}
	if z.Done+z.Failed != z.Resizes || z.Resizes < pods {
		t.Errorf("%d resizes: %d done, %d failed", z.Resizes, z.Done, z.Failed)
	}
	if len(z.Samples) != z.Done {
		t.Errorf("%d samples for %d resizes done", len(z.Samples), z.Done)
	}
	return z
}

// TestBenchResizeUpstream runs the resize scenario on the upstream
// kubelet (the reference) on the sim served apart: it must do every
// resize without a restart, which checks the scenario's notion of done
// against upstream's behaviour. Its pod cgroups (under a cgroup root of
// the bench's own) are gone afterwards.
func TestBenchResizeUpstream(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.CannotRun(t, "the upstream kubelet needs root")
	}
	env := testenv.ControlPlane(t)
	kubelet := upstreamKubelet(t)
	r, code, stderr := runBench(t, "--scenario", "resize", "--resize-agent", "upstream", "--pods", "5",
		"--node-name", "bench-test-resize-up", "--kubeconfig", env.AdminKubeconfig, "--kubelet", kubelet,
		"--resize-timeout", "30s", "--timeout", "2m")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	z := checkResize(t, r, bench.AgentUpstream, 5, 2)
	l := z.LatencyMS
	if z.Done != 10 || z.Failed != 0 || z.Restarts != 0 || z.ResizesPerSecond <= 0 || !(l.P50 > 0 && l.P50 <= l.P99 && l.P99 <= l.Max) {
		t.Errorf("resize figures: %+v", z)
	}
	// The kubelet writes each resize's status itself.
	if z.APIRequestsPerResize["patch pods/status"] < 1 || z.CPUMSPerResize <= 0 {
		t.Errorf("API requests %v, CPU %v ms per resize", z.APIRequestsPerResize, z.CPUMSPerResize)
	}
	for _, m := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpu"} {
		ents, _ := os.ReadDir(m)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "actorlet-bench-resize-") {
				t.Errorf("cgroup left behind: %s/%s", m, e.Name())
			}
		}
	}
}

// TestBenchResizeActorlet runs the resize scenario on actorlet on the
// sim: every resize done in place, none restarting a container.
func TestBenchResizeActorlet(t *testing.T) {
	env := testenv.ControlPlane(t)
	r, code, stderr := runBench(t, "--scenario", "resize", "--pods", "5", "--node-name", "bench-test-resize",
		"--kubeconfig", env.AdminKubeconfig, "--resize-timeout", "20s", "--timeout", "2m")
	if code != 0 {
		t.Fatalf("exit %d (error %q)\n%s", code, r.Error, stderr)
	}
	z := checkResize(t, r, bench.AgentActorlet, 5, 2)
	if z.Done != 10 || z.Restarts != 0 || z.Failed != 0 || z.LatencyMS.P99 <= 0 {
		t.Errorf("resizes %+v, want 10 done in place", z)
	}
}
