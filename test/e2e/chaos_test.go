package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// TestE2ESimChaosInvariants crashes random pod, PLEG, image, status, node and
// source actors 20 times a second for 20 s while 200 pods start and 20 are
// replaced, then checks through the CRI (not actorlet's view) that every
// pod converged, that no container was created twice for the same (pod,
// container, attempt), and that no restart count grew because an actor
// restarted.
func TestE2ESimChaosInvariants(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos runs 20 s; skipped with -short")
	}
	dir := t.TempDir()
	writePods(t, dir, "chaos", 200)
	a := startAgent(t, agentOpts{manifestDir: dir, extra: []string{
		"--max-pods", "250",
		"--chaos-kill-rate", "20", "--chaos-duration", "20s", "--chaos-seed", "42",
		"--chaos-kinds", "pod,pleg,image,status,node,source",
		"--crashloop-backoff-initial", "1s",
	}})
	// Replace 20 pods (two manifest files) while chaos runs.
	testenv.WaitFor(t, time.Minute, "some pods running under chaos", func() (bool, error) {
		pods, err := a.pods()
		return err == nil && len(pods) > 50, err
	})
	for _, f := range []string{"chaos-18.yaml", "chaos-19.yaml"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	newDir := t.TempDir()
	writePods(t, newDir, "late", 20)
	for _, f := range []string{"late-00.yaml", "late-01.yaml"} {
		b, err := os.ReadFile(filepath.Join(newDir, f))
		if err != nil {
			t.Fatal(err)
		}
		writeManifest(t, dir, f, string(b))
	}

	testenv.WaitFor(t, 2*time.Minute, "chaos injector finished", func() (bool, error) {
		return a.logContains("chaos injector stopped"), nil
	})
	crashes := chaosCrashes(t, a)
	if crashes < 100 {
		t.Fatalf("only %d crashes injected; want about 400", crashes)
	}
	restarts := actorRestarts(t, a)
	t.Logf("chaos: %d crashes injected, %d actor restarts", crashes, restarts)
	if restarts == 0 {
		t.Fatalf("no actor restart counted")
	}

	pods := waitAllRunning(t, a, 200, 3*time.Minute)
	for _, p := range pods {
		if regexp.MustCompile(`^chaos-(18|19)`).MatchString(p.Name) {
			t.Fatalf("removed pod %s still listed", p.Name)
		}
	}

	// The runtime's view, after things settled: one ready sandbox and one
	// running container per pod, all attempt 0, nothing of the removed pods.
	rt := a.runtime()
	testenv.WaitFor(t, time.Minute, "runtime holds exactly the 200 desired pods", func() (bool, error) {
		sbs := allSandboxes(t, rt)
		ctrs := allContainers(t, rt)
		return len(sbs) == 200 && len(ctrs) == 200, fmt.Errorf("%d sandboxes, %d containers", len(sbs), len(ctrs))
	})
	desired := map[string]bool{}
	for _, p := range pods {
		desired[string(p.UID)] = true
	}
	seen := map[string]bool{}
	for _, c := range allContainers(t, rt) {
		uid := c.Labels["io.kubernetes.pod.uid"]
		key := fmt.Sprintf("%s/%s/%d", uid, c.Metadata.Name, c.Metadata.Attempt)
		if seen[key] {
			t.Errorf("container created twice for %s", key)
		}
		seen[key] = true
		if !desired[uid] {
			t.Errorf("container %s belongs to undesired pod %s", c.Id, uid)
		}
		if c.Metadata.Attempt != 0 {
			t.Errorf("pod %s container %s is at attempt %d: an actor restart restarted a container", uid, c.Metadata.Name, c.Metadata.Attempt)
		}
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("container %s is %s", c.Id, c.State)
		}
	}
	for _, s := range allSandboxes(t, rt) {
		if s.Metadata.Attempt != 0 || s.State != runtimeapi.PodSandboxState_SANDBOX_READY {
			t.Errorf("sandbox %s of %s: attempt %d, %s", s.Id, s.Metadata.Name, s.Metadata.Attempt, s.State)
		}
	}
	for _, p := range pods {
		if rc := p.Status.ContainerStatuses[0].RestartCount; rc != 0 {
			t.Errorf("%s reports restartCount %d", p.Name, rc)
		}
	}
}

func chaosCrashes(t *testing.T, a *agent) int {
	t.Helper()
	b, err := os.ReadFile(a.logPath)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`chaos injector stopped.*crashes=(\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no crash count in the log")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func actorRestarts(t *testing.T, a *agent) int {
	t.Helper()
	byKind, err := readRestartsByKind(a)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range byKind {
		total += n
	}
	return total
}
