package podspec

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The message of a False PodReadyToStartContainers (Kubernetes v1.37).
func TestSandboxNotReadyMessage(t *testing.T) {
	sb := func(s runtimeapi.PodSandboxState) *runtimeapi.PodSandboxStatus {
		return &runtimeapi.PodSandboxStatus{State: s}
	}
	ready, notReady := runtimeapi.PodSandboxState_SANDBOX_READY, runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	tests := []struct {
		name      string
		sandboxes []*runtimeapi.PodSandboxStatus
		want      string
	}{
		{"none", nil, "no pod sandbox exists"},
		{"newest not ready", []*runtimeapi.PodSandboxStatus{sb(notReady), sb(ready)}, "pod sandbox is not ready"},
		{"newest ready", []*runtimeapi.PodSandboxStatus{sb(ready), sb(notReady)}, ""},
	}
	for _, tt := range tests {
		if got := SandboxNotReadyMessage(tt.sandboxes); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
