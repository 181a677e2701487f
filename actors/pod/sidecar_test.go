package pod

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/internal/fakecri"
	"github.com/actorlet/actorlet/messages"
)

func TestSidecarsStartFirstKeepRunningAndStopLast(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.InitContainers = []v1.Container{
		{Name: "proxy", Image: "busybox:1", RestartPolicy: &always},
		{Name: "migrate", Image: "busybox:1"},
	}
	h := newHarness(t, p)
	// The sidecar runs and the next init container starts beside it.
	h.waitStatus("proxy running, migrate running", func(s *v1.PodStatus) bool {
		return s.InitContainerStatuses[0].State.Running != nil && s.InitContainerStatuses[1].State.Running != nil &&
			s.Phase == v1.PodPending
	})
	h.rt.ExitNamed("migrate", 0)
	h.poke()
	st := h.waitStatus("Running with the sidecar", running)
	if st.InitContainerStatuses[0].State.Running == nil {
		t.Fatalf("the sidecar stopped: %+v", st.InitContainerStatuses[0].State)
	}
	for _, c := range st.Conditions {
		if c.Type == v1.PodInitialized && c.Status != v1.ConditionTrue {
			t.Fatalf("Initialized %s with a running sidecar", c.Status)
		}
	}
	// The sidecar crashes: it comes back (restartPolicy Always), the app
	// keeps running.
	h.rt.ExitNamed("proxy", 1)
	h.poke()
	h.waitStatus("sidecar restarted", func(s *v1.PodStatus) bool {
		return s.InitContainerStatuses[0].State.Running != nil && s.InitContainerStatuses[0].RestartCount == 1 && running(s)
	})
	// Killing the pod stops the app before the sidecar.
	h.send(&messages.KillPod{UID: "uid-1", Reason: "test"})
	h.waitFor("terminated", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.terminated
	})
	var order []string
	for _, s := range h.rt.Stops() {
		if s.Stopped {
			order = append(order, s.Name)
		}
	}
	last := map[string]int{}
	for i, n := range order {
		last[n] = i
	}
	if last["app"] > last["proxy"] {
		t.Fatalf("stop order %v: the sidecar must stop after the app", order)
	}
}

// TestSidecarStartupProbeGatesTheNextContainers: the containers after a
// sidecar with a startup probe start only once it succeeded, and its
// readiness probe (period 30 s) runs at once then, as upstream (spec
// "should be ready immediately after startupProbe succeeds").
func TestSidecarStartupProbeGatesTheNextContainers(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	p := testPod(v1.RestartPolicyAlways, "app")
	startup := execProbe(5, 120)
	readiness := execProbe(30, 3)
	p.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: "busybox:1", RestartPolicy: &always,
		StartupProbe: startup, ReadinessProbe: readiness}}
	h := newHarnessWith(t, p, func(d *Deps) { d.Runtime.(*fakecri.Runtime).SetExec("proxy", 1) })
	h.waitStatus("sidecar running, not started", func(s *v1.PodStatus) bool {
		return len(s.InitContainerStatuses) == 1 && s.InitContainerStatuses[0].State.Running != nil
	})
	for range 12 { // two failed startup probes
		h.clk.Step(time.Second)
		h.sync()
	}
	h.settle()
	if n := h.rt.Count("CreateContainer"); n != 1 {
		t.Fatalf("CreateContainer %d before the sidecar's startup probe succeeded, want 1 (the sidecar)", n)
	}
	if st := h.latest(); st.ContainerStatuses[0].State.Waiting == nil || st.ContainerStatuses[0].State.Waiting.Reason != "PodInitializing" {
		t.Errorf("app %+v, want waiting in PodInitializing", st.ContainerStatuses[0].State)
	}
	h.rt.SetExec("proxy", 0)
	start := h.clk.Now()
	h.stepUntil("ready", func(s *v1.PodStatus) bool {
		return running(s) && s.InitContainerStatuses[0].Ready && condition(s, v1.PodReady) == v1.ConditionTrue
	})
	if took := h.clk.Since(start); took > 10*time.Second {
		t.Errorf("ready %s after the startup probe could succeed, want within its 5 s period (the readiness probe runs at once)", took)
	}
}
