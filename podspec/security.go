package podspec

import (
	"fmt"
	"math"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// EffectiveSecurityContext is the container's security context over the
// pod's (runAsUser, runAsGroup, runAsNonRoot, seLinuxOptions), as
// upstream's DetermineEffectiveSecurityContext: what the container sets
// wins. Never nil; the pod and the container are not changed.
func EffectiveSecurityContext(pod *v1.Pod, c *v1.Container) *v1.SecurityContext {
	out := &v1.SecurityContext{}
	if psc := pod.Spec.SecurityContext; psc != nil {
		out.RunAsUser, out.RunAsGroup, out.RunAsNonRoot = psc.RunAsUser, psc.RunAsGroup, psc.RunAsNonRoot
		out.SELinuxOptions = psc.SELinuxOptions
	}
	csc := c.SecurityContext
	if csc == nil {
		return out.DeepCopy()
	}
	if csc.SELinuxOptions != nil {
		out.SELinuxOptions = csc.SELinuxOptions
	}
	if csc.Capabilities != nil {
		out.Capabilities = csc.Capabilities
	}
	if csc.Privileged != nil {
		out.Privileged = csc.Privileged
	}
	if csc.RunAsUser != nil {
		out.RunAsUser = csc.RunAsUser
	}
	if csc.RunAsGroup != nil {
		out.RunAsGroup = csc.RunAsGroup
	}
	if csc.RunAsNonRoot != nil {
		out.RunAsNonRoot = csc.RunAsNonRoot
	}
	if csc.ReadOnlyRootFilesystem != nil {
		out.ReadOnlyRootFilesystem = csc.ReadOnlyRootFilesystem
	}
	if csc.AllowPrivilegeEscalation != nil {
		out.AllowPrivilegeEscalation = csc.AllowPrivilegeEscalation
	}
	if csc.ProcMount != nil {
		out.ProcMount = csc.ProcMount
	}
	return out.DeepCopy()
}

// noNewPrivs: allowPrivilegeEscalation set to false, as upstream's
// AddNoNewPrivileges (unset allows escalation).
func noNewPrivs(sc *v1.SecurityContext) bool {
	return sc != nil && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
}

// HasPrivilegedContainer reports whether any container of the pod (init,
// regular or ephemeral) is privileged: its sandbox must be privileged too,
// as upstream (containerd refuses a privileged container in an
// unprivileged sandbox).
func HasPrivilegedContainer(pod *v1.Pod) bool {
	priv := func(sc *v1.SecurityContext) bool {
		return sc != nil && sc.Privileged != nil && *sc.Privileged
	}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if priv(list[i].SecurityContext) {
				return true
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if priv(pod.Spec.EphemeralContainers[i].SecurityContext) {
			return true
		}
	}
	return false
}

// ImageUser is the user an image runs as, as upstream's getImageUser: its
// numeric uid, else its user name; neither (or no image status): root.
func ImageUser(img *runtimeapi.Image) (uid *int64, username string) {
	if img != nil {
		if img.Uid != nil {
			u := img.Uid.Value
			return &u, ""
		}
		if img.Username != "" {
			return nil, img.Username
		}
	}
	return new(int64), ""
}

// PodDesc names a pod in messages as upstream's format.Pod:
// name_namespace(uid).
func PodDesc(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// VerifyRunAsNonRoot refuses a container that must not run as root
// (runAsNonRoot) and would: its runAsUser is 0, or without one the image's
// user (ImageUser) is root, not numeric, or not a valid uid. The messages
// are upstream's (verifyRunAsNonRoot); the container is then not created
// (CreateContainerConfigError).
func VerifyRunAsNonRoot(pod *v1.Pod, c *v1.Container, uid *int64, username string) error {
	sc := EffectiveSecurityContext(pod, c)
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		return nil
	}
	if sc.RunAsUser != nil {
		if *sc.RunAsUser == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", PodDesc(pod), c.Name)
		}
		return nil
	}
	switch {
	case uid == nil && username != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", username, PodDesc(pod), c.Name)
	case uid == nil:
		return nil
	case *uid == 0:
		return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", PodDesc(pod), c.Name)
	}
	if errs := validation.IsValidUserID(*uid); len(errs) > 0 {
		return fmt.Errorf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)): %s (pod: %q, container: %s)",
			*uid, math.MaxInt32, strings.Join(errs, "; "), PodDesc(pod), c.Name)
	}
	return nil
}
