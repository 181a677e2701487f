package pod

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actorlet/actorlet/messages"
)

// TestDeletedPodPublishesItsTerminalStatus: a pod deleted from the API is
// killed, and its last status (published before PodTerminated, so the
// StatusActor writes it before the final delete) is terminal with its
// containers terminated as the runtime saw them stop, as upstream: a pod
// held by a finalizer shows it. On the old code the last status stayed
// Running.
func TestDeletedPodPublishesItsTerminalStatus(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	h := newHarness(t, p)
	h.waitStatus("Running", running)
	grace := int64(30)
	h.send(&messages.KillPod{UID: p.UID, GracePeriod: &grace, Reason: "deleted from the API server"})
	h.waitFor("pod terminated", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.terminated
	})
	st := h.latest()
	if st.Phase != v1.PodFailed {
		t.Fatalf("final phase %s, want Failed (killed with 137): %+v", st.Phase, st)
	}
	if st.PodIP == "" {
		t.Errorf("final status lost the pod IP")
	}
	term := st.ContainerStatuses[0].State.Terminated
	if term == nil || term.ExitCode != 137 || term.FinishedAt.IsZero() || term.ContainerID == "" {
		t.Fatalf("container state %+v, want terminated with 137 and its finish time", st.ContainerStatuses[0].State)
	}
	for _, c := range st.Conditions {
		if (c.Type == v1.PodReady || c.Type == v1.ContainersReady) && (c.Status != v1.ConditionFalse || c.Reason != ReasonPodCompleted) {
			t.Errorf("condition %s=%s %s, want False PodCompleted", c.Type, c.Status, c.Reason)
		}
	}
}

func TestTerminalStatus(t *testing.T) {
	now := time.Unix(1000, 0)
	term := func(code int32) v1.ContainerStatus {
		return v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}
	}
	waiting := v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: ReasonContainerCreating}}}
	tests := []struct {
		name  string
		phase v1.PodPhase
		cs    []v1.ContainerStatus
		want  v1.PodPhase
	}{
		{name: "all succeeded", phase: v1.PodRunning, cs: []v1.ContainerStatus{term(0), term(0)}, want: v1.PodSucceeded},
		{name: "one failed", phase: v1.PodRunning, cs: []v1.ContainerStatus{term(0), term(137)}, want: v1.PodFailed},
		{name: "one never ran", phase: v1.PodPending, cs: []v1.ContainerStatus{term(0), waiting}, want: v1.PodPending},
		{name: "already terminal", phase: v1.PodSucceeded, cs: []v1.ContainerStatus{term(0)}, want: v1.PodSucceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := v1.PodStatus{Phase: tc.phase, ContainerStatuses: tc.cs,
				Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}
			prev := &v1.PodStatus{PodIP: "10.0.0.1", PodIPs: []v1.PodIP{{IP: "10.0.0.1"}},
				Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}}
			got := terminalStatus(st, prev, now)
			if got.Phase != tc.want || got.PodIP != "10.0.0.1" {
				t.Fatalf("phase %s ip %q, want %s 10.0.0.1", got.Phase, got.PodIP, tc.want)
			}
			if terminal := tc.want == v1.PodSucceeded || tc.want == v1.PodFailed; terminal && tc.phase != tc.want &&
				(got.Conditions[0].Status != v1.ConditionFalse || got.Conditions[0].Reason != ReasonPodCompleted || !got.Conditions[0].LastTransitionTime.Time.Equal(now)) {
				t.Fatalf("Ready %+v, want False PodCompleted since now", got.Conditions[0])
			}
		})
	}
}
