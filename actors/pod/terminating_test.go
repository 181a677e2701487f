package pod

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/internal/fakecri"
	"github.com/actorlet/actorlet/messages"
)

// TestKilledPodTurnsNotReadyWhileStopping: a ready pod being killed (deleted
// with a grace period) is shown not ready while its containers still stop,
// as upstream (its readiness probe fails once the pod terminates).
func TestKilledPodTurnsNotReadyWhileStopping(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].ReadinessProbe = execProbe(1, 1)
	h := newHarnessWith(t, p, func(d *Deps) { d.Runtime.(*fakecri.Runtime).SetExec("app", 0) })
	h.stepUntil("ready", readyPod)

	release := h.rt.Block("StopContainer")
	defer release()
	grace := int64(30)
	h.send(&messages.KillPod{UID: p.UID, GracePeriod: &grace, Reason: "deleted from the API server"})
	st := h.waitStatus("not ready while the container stops", notReadyPod)
	if st.ContainerStatuses[0].State.Running == nil {
		t.Errorf("container state %+v, want still running", st.ContainerStatuses[0].State)
	}
	if h.rt.InFlight("StopContainer") != 1 {
		t.Errorf("StopContainer in flight %d, want the stop to be under way", h.rt.InFlight("StopContainer"))
	}
	release()
	h.waitFor("pod terminated", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.terminated
	})
}

// TestEphemeralContainerAddedToRunningPod: an update adding an ephemeral
// container starts it, without touching the running containers, and it is
// shown in ephemeralContainerStatuses; once it exits it is not run again.
func TestEphemeralContainerAddedToRunningPod(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	h := newHarness(t, p)
	h.waitStatus("Running", running)
	appID := h.rt.Containers()[0].Id

	updated := p.DeepCopy()
	updated.Spec.EphemeralContainers = []v1.EphemeralContainer{{
		EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: "busybox:1", Stdin: true, TTY: true},
		TargetContainerName:      "app",
	}}
	h.sys.Root.Send(h.childPID(), &messages.SyncPod{Pod: updated})
	st := h.waitStatus("ephemeral container running", func(s *v1.PodStatus) bool {
		return len(s.EphemeralContainerStatuses) == 1 && s.EphemeralContainerStatuses[0].State.Running != nil
	})
	if cs := st.EphemeralContainerStatuses[0]; cs.Name != "debugger" || cs.Ready || cs.Started != nil {
		t.Errorf("ephemeral status %+v: want debugger, not ready, no started", cs)
	}
	if !readyPod(st) || st.ContainerStatuses[0].ContainerID != "fake://"+appID {
		t.Errorf("app status %+v: want the same container, running and ready", st.ContainerStatuses[0])
	}
	if n := h.rt.Count("StopContainer"); n != 0 {
		t.Errorf("StopContainer called %d times: adding an ephemeral container must not restart anything", n)
	}
	var dbg *runtimeapi.ContainerStatus
	for _, c := range h.rt.Containers() {
		if c.GetMetadata().GetName() == "debugger" {
			dbg = c
		}
	}
	if dbg == nil {
		t.Fatal("no debugger container in the runtime")
	}
	cfg := h.rt.ContainerConfig(dbg.Id)
	if !cfg.Stdin || !cfg.Tty {
		t.Errorf("stdin %v tty %v, want both", cfg.Stdin, cfg.Tty)
	}
	if ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions(); ns.GetPid() != runtimeapi.NamespaceMode_TARGET || ns.GetTargetId() != appID {
		t.Errorf("pid namespace %v target %q, want TARGET %q", ns.GetPid(), ns.GetTargetId(), appID)
	}

	h.rt.ExitNamed("debugger", 1)
	h.poke()
	h.waitStatus("ephemeral container terminated", func(s *v1.PodStatus) bool {
		return len(s.EphemeralContainerStatuses) == 1 && s.EphemeralContainerStatuses[0].State.Terminated != nil
	})
	h.settle()
	if n := h.rt.Count("CreateContainer"); n != 2 {
		t.Errorf("CreateContainer %d, want 2: an ephemeral container is never restarted", n)
	}
}
