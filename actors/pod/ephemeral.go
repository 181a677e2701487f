package pod

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Ephemeral containers (kubectl debug, the pods/ephemeralcontainers
// subresource) are planned by plan.go (started once, before init
// containers, never restarted), shown by status.go in
// ephemeralContainerStatuses (never ready, no probes) and created here as
// upstream's generateLinuxContainerConfig does.

// ephemeralConfig makes the CRI config of an ephemeral container with a
// target join the target container's process namespace (unless the pod
// shares one namespace for all its processes).
func ephemeralConfig(cfg *runtimeapi.ContainerConfig, act action) {
	if !act.ephemeral || act.targetID == "" || cfg.GetLinux().GetSecurityContext().GetNamespaceOptions() == nil {
		return
	}
	ns := cfg.Linux.SecurityContext.NamespaceOptions
	if ns.Pid == runtimeapi.NamespaceMode_CONTAINER {
		ns.Pid = runtimeapi.NamespaceMode_TARGET
		ns.TargetId = act.targetID
	}
}
