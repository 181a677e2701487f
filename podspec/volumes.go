package podspec

import (
	"os"

	v1 "k8s.io/api/core/v1"
)

// VolumeFile is one file of a configMap, secret, downwardAPI or projected
// volume, as upstream's FileProjection: its content, its mode and, for a
// projected service-account token, the user that owns it.
type VolumeFile struct {
	Data   []byte
	Mode   os.FileMode
	FsUser *int64
}

// DefaultVolumeFileMode is the mode of a volume file when neither the item
// nor the volume sets one (the API server defaults DefaultMode to it).
const DefaultVolumeFileMode os.FileMode = 0o644

// FileMode is an item's mode, else the volume's defaultMode, else 0644.
func FileMode(item, volume *int32) os.FileMode {
	switch {
	case item != nil:
		return os.FileMode(*item) & os.ModePerm
	case volume != nil:
		return os.FileMode(*volume) & os.ModePerm
	}
	return DefaultVolumeFileMode
}

// FSGroup is the pod's fsGroup, nil when it sets none.
func FSGroup(pod *v1.Pod) *int64 {
	if pod.Spec.SecurityContext == nil {
		return nil
	}
	return pod.Spec.SecurityContext.FSGroup
}

// FsUser is the user every container of the pod (init and regular) runs
// as, nil when one sets no user or two differ (upstream's FsUserFrom): the
// owner of projected service-account tokens.
func FsUser(pod *v1.Pod) *int64 {
	var user *int64
	all := make([]v1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	all = append(append(all, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for i := range all {
		u := runAsUser(pod, &all[i])
		if u == nil || (user != nil && *user != *u) {
			return nil
		}
		user = u
	}
	if user == nil {
		return nil
	}
	v := *user
	return &v
}

func runAsUser(pod *v1.Pod, c *v1.Container) *int64 {
	if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
		return c.SecurityContext.RunAsUser
	}
	if pod.Spec.SecurityContext != nil {
		return pod.Spec.SecurityContext.RunAsUser
	}
	return nil
}

// FindContainer is the container (regular or init) of that name, nil if
// the pod has none.
func FindContainer(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

// PodMemoryLimit is the memory limit of the pod's cgroup, as upstream's
// ResourceConfigForPod: the pod-level limit if set, else, when every
// container (init ones too) declares one, the larger of the sum over the
// containers (with the sidecars) and the largest init container (with the
// sidecars started before it), plus the overhead. ok is false when the pod
// has no memory limit.
func PodMemoryLimit(pod *v1.Pod) (bytes int64, ok bool) {
	if pod.Spec.Resources != nil {
		if q, set := pod.Spec.Resources.Limits[v1.ResourceMemory]; set && !q.IsZero() {
			return q.Value(), true
		}
	}
	sum, _, all := PodResource(pod, v1.ResourceMemory, true)
	if !all {
		return 0, false
	}
	return sum.Value(), sum.Value() > 0
}

// EmptyDirMemorySize is the size of a memory-backed emptyDir's tmpfs, as
// upstream's calculateEmptyDirMemorySize: the node's allocatable memory,
// lowered to the pod's memory limit, lowered to the volume's sizeLimit
// (each only when positive and not larger). 0: no size known (the kernel's
// default, half of the RAM).
func EmptyDirMemorySize(pod *v1.Pod, ed *v1.EmptyDirVolumeSource, allocatable v1.ResourceList) int64 {
	var size int64
	if q, ok := allocatable[v1.ResourceMemory]; ok {
		size = q.Value()
	}
	lower := func(v int64) {
		if v > 0 && (size == 0 || v <= size) {
			size = v
		}
	}
	if l, ok := PodMemoryLimit(pod); ok {
		lower(l)
	}
	if ed != nil && ed.SizeLimit != nil {
		lower(ed.SizeLimit.Value())
	}
	return size
}
