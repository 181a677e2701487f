package pod

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/actors/probe"
	"github.com/actorlet/actorlet/messages"

	"github.com/actorlet/actorlet/adapters/podfiles"
)

func execProbe(period, failure int32) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
		PeriodSeconds: period, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: failure}
}

// stepUntil steps the fake clock a second at a time until cond holds.
func (h *harness) stepUntil(what string, cond func(*v1.PodStatus) bool) *v1.PodStatus {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if s := h.latest(); s != nil && cond(s) {
			return s
		}
		h.clk.Step(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	h.t.Fatalf("timed out waiting for %s; last status: %+v", what, h.latest())
	return nil
}

func condition(s *v1.PodStatus, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func readyPod(s *v1.PodStatus) bool {
	return running(s) && s.ContainerStatuses[0].Ready && condition(s, v1.PodReady) == v1.ConditionTrue &&
		condition(s, v1.ContainersReady) == v1.ConditionTrue
}

func notReadyPod(s *v1.PodStatus) bool {
	return running(s) && !s.ContainerStatuses[0].Ready && condition(s, v1.PodReady) == v1.ConditionFalse &&
		condition(s, v1.ContainersReady) == v1.ConditionFalse
}

func TestReadinessDrivesConditions(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].ReadinessProbe = execProbe(1, 2)
	h := newHarnessWith(t, p, func(d *Deps) { d.Runtime.(*fakeRuntime).execCodes["app"] = 1 })
	st := h.waitStatus("running, not ready", notReadyPod)
	if st.ContainerStatuses[0].Started == nil || !*st.ContainerStatuses[0].Started {
		t.Errorf("started %v: a container without startup probe has started", st.ContainerStatuses[0].Started)
	}
	h.rt.setExec("app", 0)
	h.stepUntil("ready", readyPod)
	h.rt.setExec("app", 1)
	n := h.rt.execCount("app")
	h.stepUntil("not ready after failureThreshold", notReadyPod)
	if got := h.rt.execCount("app") - n; got < 2 {
		t.Errorf("not ready after %d failed probes, want failureThreshold 2", got)
	}
	if h.rt.count("StopContainer") != 0 {
		t.Errorf("a readiness failure must not kill the container")
	}
}

func TestLivenessFailureRestartsContainer(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	grace := int64(7)
	p.Spec.Containers[0].LivenessProbe = execProbe(1, 1)
	p.Spec.Containers[0].LivenessProbe.TerminationGracePeriodSeconds = &grace
	p.Spec.Containers[0].LivenessProbe.InitialDelaySeconds = 3 // the restarted one is not killed at once
	h := newHarness(t, p)
	h.waitStatus("Running", running)
	h.rt.setExec("app", 1)
	st := h.stepUntil("restarted after liveness failure", func(s *v1.PodStatus) bool {
		return s.ContainerStatuses[0].RestartCount == 1
	})
	h.rt.setExec("app", 0)
	cs := st.ContainerStatuses[0]
	if term := cs.LastTerminationState.Terminated; term == nil || term.ExitCode != 137 {
		t.Fatalf("lastState %+v, want terminated with 137", cs.LastTerminationState)
	}
	h.rt.mu.Lock()
	g := h.rt.stopGrace
	h.rt.mu.Unlock()
	if len(g) == 0 || g[0] != grace {
		t.Errorf("StopContainer timeouts %v, want the probe's terminationGracePeriodSeconds %d first", g, grace)
	}
	h.waitStatus("running again", func(s *v1.PodStatus) bool { return running(s) && s.ContainerStatuses[0].RestartCount == 1 })
}

func TestLivenessFailureWithNeverFailsPod(t *testing.T) {
	p := testPod(v1.RestartPolicyNever, "app")
	p.Spec.Containers[0].LivenessProbe = execProbe(1, 1)
	h := newHarness(t, p)
	h.waitStatus("Running", running)
	h.rt.setExec("app", 1)
	h.stepUntil("Failed", func(s *v1.PodStatus) bool { return s.Phase == v1.PodFailed })
	if n := h.rt.count("CreateContainer"); n != 1 {
		t.Fatalf("CreateContainer %d: restartPolicy Never must not restart", n)
	}
}

func TestStartupProbeGatesLivenessAndReadiness(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"startup"}}},
		PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 30}
	p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"readiness"}}},
		PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
	p.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"liveness"}}},
		PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
	// The startup probe fails (below its threshold): not started.
	h := newHarnessWith(t, p, func(d *Deps) { d.Runtime.(*fakeRuntime).execCodes["app"] = 1 })
	h.waitStatus("running, not started", func(s *v1.PodStatus) bool {
		cs := s.ContainerStatuses[0]
		return running(s) && cs.Started != nil && !*cs.Started && !cs.Ready
	})
	h.waitFor("a startup probe", func() bool { return h.rt.execCount("app") > 0 })
	h.clk.Step(time.Second)
	h.clk.Step(time.Second)
	h.rt.mu.Lock()
	for _, e := range h.rt.execLog {
		if e != "app startup" {
			t.Errorf("exec %q before the startup probe succeeded", e)
		}
	}
	h.rt.mu.Unlock()
	h.rt.setExec("app", 0)
	st := h.stepUntil("started and ready", readyPod)
	if !*st.ContainerStatuses[0].Started {
		t.Fatalf("not started")
	}
	h.waitFor("liveness probing", func() bool {
		h.rt.mu.Lock()
		defer h.rt.mu.Unlock()
		for _, e := range h.rt.execLog {
			if e == "app liveness" {
				return true
			}
		}
		return false
	})
}

func TestReadinessSurvivesPodActorRestart(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].ReadinessProbe = execProbe(10, 3)
	dir := t.TempDir()
	h := newHarnessWith(t, p, func(d *Deps) { d.Files = podfiles.New("", dir, quiet) })
	h.waitStatus("ready", readyPod)
	// The checkpoint is written off the mailbox, soon after the result.
	h.waitFor("the checkpoint on disk", func() bool {
		_, err := os.Stat(filepath.Join(dir, "uid-1.json"))
		return err == nil
	})
	// From now on the probe fails, but below its failureThreshold: after
	// the restart the container must stay ready, never flap to not ready.
	h.rt.setExec("app", 1)
	h.mu.Lock()
	h.statuses = nil
	h.mu.Unlock()
	h.send(&messages.ChaosPanic{Reason: "test"})
	h.waitFor("a status after the restart", func() bool { return h.latest() != nil })
	h.poke()
	h.waitFor("a probe after the restart", func() bool { return h.rt.execCount("app") >= 2 })
	h.poke()
	h.waitStatus("running", running)
	h.mu.Lock()
	for i, s := range h.statuses {
		if !readyPod(&s) {
			t.Errorf("status %d after the restart is not ready: %+v", i, s.ContainerStatuses)
		}
	}
	h.mu.Unlock()
	// Three failures (the threshold) make it not ready.
	h.stepUntil("not ready", notReadyPod)
}

func TestNotReadyIsNotReportedReadyAfterRestart(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].ReadinessProbe = execProbe(10, 1)
	dir := t.TempDir()
	h := newHarnessWith(t, p, func(d *Deps) {
		d.Files = podfiles.New("", dir, quiet)
		d.Runtime.(*fakeRuntime).execCodes["app"] = 1
	})
	h.waitStatus("not ready", notReadyPod)
	h.mu.Lock()
	h.statuses = nil
	h.mu.Unlock()
	h.send(&messages.ChaosPanic{Reason: "test"})
	h.waitFor("a status after the restart", func() bool { return h.latest() != nil })
	h.waitFor("a probe after the restart", func() bool { return h.rt.execCount("app") >= 2 })
	h.poke()
	h.waitStatus("not ready", notReadyPod)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, s := range h.statuses {
		if len(s.ContainerStatuses) > 0 && s.ContainerStatuses[0].Ready {
			t.Errorf("status %d after the restart reports ready", i)
		}
	}
}

func TestProbesStopWithTheContainer(t *testing.T) {
	p := testPod(v1.RestartPolicyNever, "app")
	p.Spec.Containers[0].ReadinessProbe = execProbe(1, 1)
	h := newHarness(t, p)
	h.waitStatus("ready", readyPod)
	h.rt.exitContainer("app", 0)
	h.poke()
	h.waitStatus("Succeeded", func(s *v1.PodStatus) bool { return s.Phase == v1.PodSucceeded })
	// The ProbeActor is stopped with its container; once it is gone no tick
	// can probe again.
	probeID := h.childPID().Id + "/" + probe.Name("app", messages.ProbeReadiness)
	h.waitFor("the probe actor stopped", func() bool {
		_, alive := h.sys.ProcessRegistry.GetLocal(probeID)
		return !alive
	})
	n := h.rt.execCount("app")
	for range 5 {
		h.clk.Step(time.Second)
	}
	for _, c := range h.rt.list() {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("container still running")
		}
	}
	if got := h.rt.execCount("app"); got != n {
		t.Fatalf("%d probes after the container stopped", got-n)
	}
}
