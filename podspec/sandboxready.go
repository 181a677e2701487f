package podspec

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Reason and messages of a PodReadyToStartContainers condition that is
// False, as upstream v1.37 sets them (pkg/kubelet/types constants, chosen
// by kuberuntime util PodSandboxChanged).
const (
	ReasonPodSandboxNotReady = "PodSandboxNotReady"
	MsgNoPodSandbox          = "no pod sandbox exists"
	MsgSandboxNotReady       = "pod sandbox is not ready"
)

// SandboxNotReadyMessage says why the pod's sandbox is not ready to start
// containers, in upstream's words, or "" when the newest sandbox is ready.
// sandboxes are the pod's sandboxes, newest first.
//
// It covers the cases in which actorlet makes a new sandbox (none yet; the
// newest one not ready). Upstream's other three reasons ("multiple pod
// sandboxes are ready and need to be reconciled", "network namespace mode
// changed and sandbox needs to be recreated", "pod sandbox has no IP
// address") mark a ready sandbox that upstream replaces; actorlet does not
// replace a ready sandbox for those, so it does not report them and the
// condition stays True, which is what the node does.
func SandboxNotReadyMessage(sandboxes []*runtimeapi.PodSandboxStatus) string {
	if len(sandboxes) == 0 {
		return MsgNoPodSandbox
	}
	if sandboxes[0].GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		return MsgSandboxNotReady
	}
	return ""
}
