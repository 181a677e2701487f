package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// TestE2ESimPoisonPodsStayInsideTheirPods (issue 9, failures 1 and 2):
// chaos crashes only PodActors, fast enough that each one passes its
// restart budget within a second, again and again for 8 s. Each such
// PodActor is stopped and its pod reported; the NodeActor is never
// restarted, /healthz and /pods keep answering all along, and once chaos
// stops every pod is Running with the containers it had, none restarted.
// On the old code every PodActor over budget escalated and restarted the
// NodeActor (and soon the whole tree was gone).
func TestE2ESimPoisonPodsStayInsideTheirPods(t *testing.T) {
	const n = 3
	dir := t.TempDir()
	writePods(t, dir, "poison", n)
	a := startAgent(t, agentOpts{manifestDir: dir, extra: []string{
		"--chaos-kinds", "pod", "--chaos-kill-rate", "40", "--chaos-duration", "8s", "--chaos-seed", "9",
		"--actor-max-restarts", "2",
		"--actor-respawn-backoff-initial", "1s", "--actor-respawn-backoff-max", "2s",
		"--v", "4", // standalone events are logged at Debug
	}})

	// While chaos runs: the node API answers, every pod is listed, and
	// the pods whose worker was stopped say so.
	reported := map[string]bool{}
	healthz := fmt.Sprintf("http://127.0.0.1:%d/healthz", a.hzPort)
	polls, seenAll := 0, false
	testenv.WaitFor(t, 2*time.Minute, "chaos injector finished, the node API answering all along", func() (bool, error) {
		polls++
		done := a.logContains("chaos injector stopped") // before the checks: they cover the whole run
		resp, err := http.Get(healthz)
		if err != nil {
			t.Fatalf("/healthz under pod chaos: %v", err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/healthz under pod chaos: %d", resp.StatusCode)
		}
		pods, err := a.pods()
		if err != nil {
			t.Fatalf("/pods under pod chaos: %v", err)
		}
		// Until each pod was first published, fewer are listed; after
		// that, never.
		if len(pods) == n {
			seenAll = true
		} else if seenAll {
			t.Fatalf("/pods under pod chaos lists %d pods, want %d: %s", len(pods), n, summary(pods))
		}
		for i := range pods {
			if pods[i].Status.Reason == "PodWorkerFailed" && readyFalseWith(&pods[i], "PodWorkerFailed") {
				reported[pods[i].Name] = true
			}
		}
		return done, nil
	})
	if !seenAll {
		t.Fatalf("never saw the %d pods listed under chaos", n)
	}
	t.Logf("%d polls under chaos; pods seen reported: %v", polls, reported)
	if len(reported) == 0 {
		t.Fatal("no pod was reported with reason PodWorkerFailed while its worker was stopped")
	}
	if !a.logContains("type=Warning reason=PodWorkerFailed") {
		t.Fatalf("no PodWorkerFailed event in the log:\n%s", a.logTail(40))
	}
	if !a.logContains("pod actor spawned again after its back-off") {
		t.Fatalf("no PodActor was spawned again:\n%s", a.logTail(40))
	}
	for kind, want := range map[string]string{"node": "0", "root": "0"} {
		if v, err := a.metricSum("actorlet_actor_restarts_total", `kind="`+kind+`"`); err != nil || fmt.Sprint(v) != want {
			t.Fatalf("actorlet_actor_restarts_total{kind=%q} = %v (%v), want %s", kind, v, err, want)
		}
	}
	if v, err := a.metricSum("actorlet_actor_restarts_total", `kind="pod"`); err != nil || v == 0 {
		t.Fatalf("no pod actor restart counted (%v, %v): chaos did not bite", v, err)
	}

	// After chaos: every pod Running and no longer reported, nothing
	// restarted, the runtime holds exactly one sandbox and one container
	// per pod, all first attempts.
	testenv.WaitFor(t, time.Minute, "every pod Running and managed again", func() (bool, error) {
		pods, err := a.pods()
		if err != nil {
			return false, err
		}
		ok := len(pods) == n
		for i := range pods {
			p := &pods[i]
			ok = ok && isRunning(p) && p.Status.Reason == "" && !readyFalseWith(p, "PodWorkerFailed")
		}
		return ok, fmt.Errorf("%d pods: %s", len(pods), summary(pods))
	})
	pods, err := a.pods()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if rc := p.Status.ContainerStatuses[0].RestartCount; rc != 0 {
			t.Errorf("%s reports restartCount %d", p.Name, rc)
		}
	}
	rt := a.runtime()
	if sbs, ctrs := allSandboxes(t, rt), allContainers(t, rt); len(sbs) != n || len(ctrs) != n {
		t.Fatalf("runtime holds %d sandboxes and %d containers, want %d each", len(sbs), len(ctrs), n)
	}
	for _, c := range allContainers(t, rt) {
		if c.Metadata.Attempt != 0 || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("container %s of %s: attempt %d, %s", c.Id, c.Labels["io.kubernetes.pod.name"], c.Metadata.Attempt, c.State)
		}
	}
}

func readyFalseWith(p *v1.Pod, reason string) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionFalse && c.Reason == reason
		}
	}
	return false
}

func summary(pods []v1.Pod) string {
	var parts []string
	for i := range pods {
		parts = append(parts, fmt.Sprintf("%s=%s/%s[%s]", pods[i].Name, pods[i].Status.Phase, pods[i].Status.Reason, describe(&pods[i])))
	}
	return strings.Join(parts, " ")
}

// TestE2ESimRootGivingUpExits (issue 9, failure 1): when the root of the
// actor tree fails too often (here: chaos on the NodeActor with a budget of
// one restart, so its failures escalate to the root until the root's
// guardian gives up), actorlet logs why at Error and exits with status 1,
// so that systemd restarts it; the restarted actorlet adopts the running
// containers. On the old code the process stayed up without a tree,
// answering 503 forever.
func TestE2ESimRootGivingUpExits(t *testing.T) {
	// The runtime runs as its own process, so the pods outlive actorlet.
	root, sock, rt := simProcess(t)

	dir := t.TempDir()
	writePods(t, dir, "survivor", 3)
	a := startAgent(t, agentOpts{endpoint: sock, manifestDir: dir, rootDir: filepath.Join(root, "agent")})
	waitAllRunning(t, a, 3, 2*time.Minute)
	ids := func() []string { return containerStates(t, rt) }
	before := ids()
	a.stop()

	// The same agent, with its NodeActor crashed 50 times a second.
	args := append(slices.Clone(a.args), "--chaos-kinds", "node", "--chaos-kill-rate", "50", "--chaos-seed", "3", "--actor-max-restarts", "1")
	logPath := filepath.Join(t.TempDir(), "giving-up.log")
	code, err := runToExit(t, args, logPath, time.Minute)
	logText, _ := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("%v\n%s", err, tail(string(logText), 30))
	}
	if code != 1 {
		t.Fatalf("exit status %d, want 1\n%s", code, tail(string(logText), 30))
	}
	for _, want := range []string{
		"level=ERROR msg=\"actor failed too often, stopping it: the actor tree under it is gone\" kind=root",
		"level=ERROR msg=\"actorlet stopped\" err=\"the actor tree is gone: root (root) failed 2 times",
	} {
		if !strings.Contains(string(logText), want) {
			t.Errorf("log lacks %q:\n%s", want, tail(string(logText), 30))
		}
	}

	// Restarted (as systemd would), actorlet adopts what runs.
	a.start()
	waitAllRunning(t, a, 3, 2*time.Minute)
	if after := ids(); strings.Join(before, ",") != strings.Join(after, ",") {
		t.Fatalf("containers changed across the exit and restart:\nbefore %v\nafter  %v", before, after)
	}
}

// runToExit runs actorlet with args until it exits by itself and returns
// its exit status; an error when it is still running after timeout.
func runToExit(t *testing.T, args []string, logPath string, timeout time.Duration) (int, error) {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, actorletBin(t), args...)
	cmd.Stdout, cmd.Stderr = f, f
	err = cmd.Run()
	if ctx.Err() != nil {
		return -1, fmt.Errorf("actorlet still running after %s", timeout)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
