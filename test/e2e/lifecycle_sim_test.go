package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// Container lifecycle on the simulated runtime, through the real binary:
// probes, hooks, termination. Each test runs several pods in one agent.

func isReady(p *v1.Pod) bool {
	if !isRunning(p) {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func podCondition(p *v1.Pod, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

var lifecycleProbePods = manifests(
	busyboxPod("exec-ready", grace2, touchReady, readyFile),
	busyboxPod("exec-unready", grace2, sleepForever, readyFile),
	busyboxPod("exec-live", grace2, sleepForever, `livenessProbe: {exec: {command: ["cat", "/tmp/healthy"]}, periodSeconds: 1, failureThreshold: 2}`),
	busyboxPod("startup-gated", grace2, `command: ["sh", "-c", "sleep 2; touch /tmp/started; sleep infinity"]`,
		`startupProbe: {exec: {command: ["test", "-f", "/tmp/started"]}, periodSeconds: 1, failureThreshold: 30}`,
		`readinessProbe: {exec: {command: ["true"]}, periodSeconds: 1}`),
	busyboxPod("http-ready", grace2, `command: ["httpd", "-f", "-p", "8080"]`, `ports: [{name: http, containerPort: 8080}]`,
		`readinessProbe: {httpGet: {path: /healthz, port: http}, periodSeconds: 1}`, `livenessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}`),
	busyboxPod("tcp-dead", grace2, sleepForever, `livenessProbe: {tcpSocket: {port: 9999}, periodSeconds: 1, failureThreshold: 1}`),
)

func TestE2ESimLifecycleProbes(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "probes.yaml", lifecycleProbePods)
	a := startAgent(t, agentOpts{manifestDir: dir})

	a.waitPod(30*time.Second, "exec-ready-e2e-node", "Ready", isReady)
	p := a.waitPod(30*time.Second, "exec-unready-e2e-node", "Running, not Ready", func(p *v1.Pod) bool {
		return isRunning(p) && podCondition(p, v1.PodReady) == v1.ConditionFalse &&
			podCondition(p, v1.ContainersReady) == v1.ConditionFalse && !p.Status.ContainerStatuses[0].Ready
	})
	if p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("a failing readiness probe restarted the container")
	}

	// Liveness failure: killed and restarted, lastState shows the kill.
	p = a.waitPod(30*time.Second, "exec-live-e2e-node", "restarted by its liveness probe", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount >= 1 && cs[0].LastTerminationState.Terminated != nil
	})
	if code := p.Status.ContainerStatuses[0].LastTerminationState.Terminated.ExitCode; code != 137 {
		t.Errorf("lastState exit code %d, want 137", code)
	}
	if !a.logContains("Liveness probe failed") {
		t.Errorf("no Unhealthy log line for the liveness failure")
	}

	// Startup gates readiness: not started (nor ready) for the first
	// seconds, then started and ready.
	p = a.waitPod(30*time.Second, "startup-gated-e2e-node", "started and Ready", isReady)
	if s := p.Status.ContainerStatuses[0].Started; s == nil || !*s {
		t.Errorf("started %v", s)
	}

	a.waitPod(30*time.Second, "http-ready-e2e-node", "Ready through httpGet on a named port", isReady)
	a.waitPod(30*time.Second, "tcp-dead-e2e-node", "restarted by a failing tcpSocket probe", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	p, _ = a.pod("http-ready-e2e-node")
	if n := p.Status.ContainerStatuses[0].RestartCount; n != 0 {
		t.Errorf("http-ready restarted %d times: its tcp liveness probe should pass", n)
	}
}

// After actorlet restarts, a ready pod is listed ready at once (from the
// probe checkpoint), never not-ready first, and containers are adopted.
func TestE2ESimReadinessSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "ready.yaml", busyboxPod("steady", grace2, touchReady,
		`readinessProbe: {exec: {command: ["test", "-f", "/tmp/ready"]}, initialDelaySeconds: 5, periodSeconds: 30}`))
	// The runtime runs as its own process, so it outlives actorlet.
	root, sock, _ := simProcess(t)
	a := startAgent(t, agentOpts{endpoint: sock, manifestDir: dir, rootDir: filepath.Join(root, "agent")})
	a.waitPod(30*time.Second, "steady-e2e-node", "Ready", isReady)
	a.kill9()
	a.start()
	// The first listing that shows the pod must show it ready: the next
	// probe is 30 s away, so only the checkpoint can say so.
	var p *v1.Pod
	testenv.WaitFor(t, 30*time.Second, "pod listed after the restart", func() (bool, error) {
		var err error
		p, err = a.pod("steady-e2e-node")
		return err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil, err
	})
	if !isReady(p) {
		b, _ := os.ReadFile(filepath.Join(a.rootDir, "probes", string(p.UID)+".json"))
		t.Fatalf("after the restart the pod is listed not ready: %s %+v; checkpoint %s", describe(p), p.Status.ContainerStatuses[0], b)
	}
	if n := p.Status.ContainerStatuses[0].RestartCount; n != 0 {
		t.Fatalf("restart count %d after an actorlet restart", n)
	}
}

var lifecycleHookPods = manifests(
	busyboxPod("poststart-ok", grace2, sleepForever, `lifecycle: {postStart: {exec: {command: ["touch", "/tmp/hooked"]}}}`,
		`readinessProbe: {exec: {command: ["test", "-f", "/tmp/hooked"]}, periodSeconds: 1}`),
	busyboxPod("poststart-fail", grace2, sleepForever, `lifecycle: {postStart: {exec: {command: ["sh", "-c", "exit 1"]}}}`),
	busyboxPod("deadline", grace2, "spec.activeDeadlineSeconds: 3", sleepForever),
	busyboxPod("fallback", neverRestart, `command: ["sh", "-c", "echo something broke; exit 3"]`, "terminationMessagePolicy: FallbackToLogsOnError"),
	busyboxPod("termfile", neverRestart, `command: ["sh", "-c", "echo bye from the app > /dev/termination-log; exit 0"]`),
)

func TestE2ESimLifecycleHooksAndTermination(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "hooks.yaml", lifecycleHookPods)
	a := startAgent(t, agentOpts{manifestDir: dir})

	a.waitPod(30*time.Second, "poststart-ok-e2e-node", "Ready (the postStart hook ran)", isReady)
	a.waitPod(30*time.Second, "poststart-fail-e2e-node", "killed for its failed postStart hook", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount >= 1 && cs[0].LastTerminationState.Terminated != nil &&
			cs[0].LastTerminationState.Terminated.ExitCode == 137
	})
	if !a.logContains(`FailedPostStartHook`) {
		t.Errorf("no FailedPostStartHook log line")
	}

	p := a.waitPod(30*time.Second, "deadline-e2e-node", "Failed by its active deadline", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Terminated != nil
	})
	if p.Status.Reason != "DeadlineExceeded" {
		t.Errorf("reason %q, want DeadlineExceeded", p.Status.Reason)
	}

	p = a.waitPod(30*time.Second, "fallback-e2e-node", "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if msg := p.Status.ContainerStatuses[0].State.Terminated.Message; msg != "something broke\n" {
		t.Errorf("termination message %q, want the log tail", msg)
	}

	p = a.waitPod(30*time.Second, "termfile-e2e-node", "Succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	if msg := p.Status.ContainerStatuses[0].State.Terminated.Message; msg != "bye from the app\n" {
		t.Errorf("termination message %q", msg)
	}
}

// preStop runs inside the grace period, before the stop: a 2 s sleep hook
// delays the container's stop by about 2 s.
func TestE2ESimPreStopRunsBeforeStop(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "prestop.yaml", busyboxPod("prestop", "spec.terminationGracePeriodSeconds: 10", sleepForever,
		`lifecycle: {preStop: {exec: {command: ["sleep", "2"]}}}`))
	a := startAgent(t, agentOpts{manifestDir: dir})
	p := a.waitPod(30*time.Second, "prestop-e2e-node", "Running", isRunning)
	rt := a.runtime()
	start := time.Now()
	writeManifest(t, dir, "prestop.yaml", "")
	var stoppedAfter time.Duration
	testenv.WaitFor(t, 30*time.Second, "container stopped", func() (bool, error) {
		for _, c := range containersOf(t, rt, string(p.UID)) {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return false, fmt.Errorf("still running")
			}
		}
		stoppedAfter = time.Since(start)
		return true, nil
	})
	if stoppedAfter < 2*time.Second {
		t.Fatalf("stopped %s after the removal: the 2 s preStop hook did not run first", stoppedAfter)
	}
	if strings.Contains(a.logTail(200), "FailedPreStopHook") {
		t.Errorf("preStop hook failed")
	}
}

func TestE2ESimContainerEnv(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "env.yaml", manifests(
		busyboxPod("envpod", "metadata.labels: {tier: web}", neverRestart, `command: ["sh", "-c"]`,
			`args: ["test \"$GREETING\" = \"hello envpod-e2e-node from web\" && test \"$(EXPANDED)\" = yes && exit $(CODE)"]`,
			`env: [{name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}, {name: TIER, valueFrom: {fieldRef: {fieldPath: "metadata.labels['tier']"}}},`+
				` {name: GREETING, value: "hello $(POD_NAME) from $(TIER)"}, {name: EXPANDED, value: "yes"}, {name: CODE, value: "0"}]`)))
	// A static pod may not reference a ConfigMap since v1.37: the
	// missing-reference case is the cluster's (TestE2EClusterConfigMapEnvAndVolume),
	// the refusal TestE2ESimV137StaticPodRefs.
	a := startAgent(t, agentOpts{manifestDir: dir})
	p := a.waitPod(30*time.Second, "envpod-e2e-node", "finished", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
	})
	if p.Status.Phase != v1.PodSucceeded {
		t.Errorf("env pod %s: the container saw the wrong environment", describe(p))
	}
}
