package pod

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestGatedReady(t *testing.T) {
	gates := []v1.PodReadinessGate{{ConditionType: "example.com/a"}, {ConditionType: "example.com/b"}}
	ready := cond(v1.PodReady, true, "", "")
	notReady := cond(v1.PodReady, false, ReasonContainersNotReady, "containers with unready status: [c]")
	tests := []struct {
		name        string
		gates       []v1.PodReadinessGate
		conds       []v1.PodCondition
		ready       v1.PodCondition
		wantStatus  v1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		{name: "no gates", ready: ready, wantStatus: v1.ConditionTrue},
		{name: "containers not ready wins", gates: gates, ready: notReady, wantStatus: v1.ConditionFalse,
			wantReason: ReasonContainersNotReady, wantMessage: "containers with unready status: [c]"},
		{name: "gate condition missing", gates: gates[:1], ready: ready, wantStatus: v1.ConditionFalse,
			wantReason: ReasonReadinessGatesNotReady, wantMessage: `corresponding condition of pod readiness gate "example.com/a" does not exist.`},
		{name: "one gate false, one missing", gates: gates, ready: ready,
			conds:      []v1.PodCondition{{Type: "example.com/a", Status: v1.ConditionFalse}},
			wantStatus: v1.ConditionFalse, wantReason: ReasonReadinessGatesNotReady,
			wantMessage: `the status of pod readiness gate "example.com/a" is not "True", but False, corresponding condition of pod readiness gate "example.com/b" does not exist.`},
		{name: "all gates true", gates: gates, ready: ready, wantStatus: v1.ConditionTrue,
			conds: []v1.PodCondition{{Type: "example.com/b", Status: v1.ConditionTrue}, {Type: "example.com/a", Status: v1.ConditionTrue}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{ReadinessGates: tc.gates}, Status: v1.PodStatus{Conditions: tc.conds}}
			got := gatedReady(pod, tc.ready)
			if got.Status != tc.wantStatus || got.Reason != tc.wantReason || got.Message != tc.wantMessage {
				t.Fatalf("Ready %s %q %q, want %s %q %q", got.Status, got.Reason, got.Message, tc.wantStatus, tc.wantReason, tc.wantMessage)
			}
		})
	}
}
