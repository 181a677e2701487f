package podspec

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
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

// PodLogDir is where the runtime writes a pod's container logs, as upstream:
// <root>/<namespace>_<name>_<uid>.
func PodLogDir(root string, pod *v1.Pod) string {
	return filepath.Join(root, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
}

// IsExtendedResource reports whether name is an extended resource (a
// device plugin's or the built-in GPUs', e.g. nvidia.com/gpu): neither
// native (cpu, memory, ephemeral-storage, hugepages-*, pods, the
// kubernetes.io domains) nor a quota name (requests.*), as upstream's
// IsExtendedResourceName.
func IsExtendedResource(name v1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, v1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(content.IsLabelKey(v1.DefaultResourceRequestsPrefix+s)) == 0
}

// ExtendedResources are the extended resources any container of the pod
// asks for (requests or limits), sorted.
func ExtendedResources(p *v1.Pod) []v1.ResourceName {
	var out []v1.ResourceName
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, l := range []v1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
				for name := range l {
					if IsExtendedResource(name) && !slices.Contains(out, name) {
						out = append(out, name)
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// PodRequest is the pod's effective request of a resource, as upstream's
// resource helpers (and the scheduler's NodeResourcesFit): the larger of
// the sum over its containers (with the restartable init containers, the
// sidecars) and its largest init container (with the sidecars started
// before it), plus the pod overhead.
func PodRequest(p *v1.Pod, name v1.ResourceName) resource.Quantity {
	sum, _, _ := PodResource(p, name, false)
	return sum
}

// PodResource aggregates the containers' requests (limits: true) of a
// resource as upstream's PodRequests/PodLimits do: the sum over the
// containers and the restartable init containers (sidecars), or the
// largest init container with the sidecars started before it when larger;
// plus the pod overhead (for limits only when some container sets one).
// anySet: at least one container sets it; allNonZero: every container,
// init ones too, sets a non-zero value (upstream's "limits declared").
func PodResource(p *v1.Pod, name v1.ResourceName, limits bool) (sum resource.Quantity, anySet, allNonZero bool) {
	get := func(c *v1.Container) (resource.Quantity, bool) {
		list := c.Resources.Requests
		if limits {
			list = c.Resources.Limits
		}
		q, ok := list[name]
		if ok {
			anySet = true
		}
		if !ok || q.IsZero() {
			allNonZero = false
		}
		return q.DeepCopy(), ok
	}
	allNonZero = true
	for i := range p.Spec.Containers {
		if q, ok := get(&p.Spec.Containers[i]); ok {
			sum.Add(q)
		}
	}
	sidecars, initMax := resource.Quantity{}, resource.Quantity{}
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		q, _ := get(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sum.Add(q)
			sidecars.Add(q)
			q = sidecars.DeepCopy()
		} else {
			q.Add(sidecars)
		}
		if q.Cmp(initMax) > 0 {
			initMax = q
		}
	}
	if initMax.Cmp(sum) > 0 {
		sum = initMax
	}
	if q, ok := p.Spec.Overhead[name]; ok && (!limits || anySet) {
		sum.Add(q)
	}
	return sum, anySet, allNonZero
}
