package podspec

import (
	"fmt"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// QOSClass computes the pod's QoS class as the upstream kubelet does: every
// container (init ones included) with equal cpu and memory requests and
// limits is Guaranteed; no requests or limits at all is BestEffort; anything
// else is Burstable.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	requests := v1.ResourceList{}
	limits := v1.ResourceList{}
	zero := resource.MustParse("0")
	isGuaranteed := true
	all := append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for name, q := range c.Resources.Requests {
			if name != v1.ResourceCPU && name != v1.ResourceMemory {
				continue
			}
			if q.Cmp(zero) == 1 {
				acc := requests[name]
				acc.Add(q)
				requests[name] = acc
			}
		}
		complete := 0
		for name, q := range c.Resources.Limits {
			if name != v1.ResourceCPU && name != v1.ResourceMemory {
				continue
			}
			if q.Cmp(zero) == 1 {
				complete++
				acc := limits[name]
				acc.Add(q)
				limits[name] = acc
			}
		}
		if complete < 2 {
			isGuaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if isGuaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				isGuaranteed = false
				break
			}
		}
	}
	if isGuaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// CgroupParent is the kubelet-style cgroupfs parent of a pod:
// /kubepods/pod<uid>, /kubepods/burstable/pod<uid> or /kubepods/besteffort/pod<uid>.
func CgroupParent(pod *v1.Pod) string {
	switch QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		return "/kubepods/pod" + string(pod.UID)
	case v1.PodQOSBestEffort:
		return "/kubepods/besteffort/pod" + string(pod.UID)
	default:
		return "/kubepods/burstable/pod" + string(pod.UID)
	}
}

// PodLogDir is where the runtime writes a pod's container logs, as upstream:
// <root>/<namespace>_<name>_<uid>.
func PodLogDir(root string, pod *v1.Pod) string {
	return filepath.Join(root, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
}
