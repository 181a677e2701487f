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
// else is Burstable. It runs for every status a PodActor computes and every
// sandbox and container config: it sums in place, with no copy of the
// containers and no maps.
//
// With pod-level resources (spec.resources with cpu, memory or hugepages:
// PodLevelResources, beta and on since v1.34) the class is that of the
// pod-level requests and limits alone, as upstream's ComputePodQOS (the
// API server computes status.qosClass the same way, and refuses a status
// that differs).
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if HasPodLevelResources(pod) {
		return requirementsQOS(pod.Spec.Resources)
	}
	// Per resource (cpu, memory): the sum of the positive requests and
	// limits, and whether there was any.
	var req, lim [2]resource.Quantity
	var hasReq, hasLim [2]bool
	isGuaranteed := true
	names := [2]v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}
	add := func(c *v1.Container) {
		complete := 0
		for i, name := range names {
			if q, ok := c.Resources.Requests[name]; ok && q.Sign() > 0 {
				req[i].Add(q)
				hasReq[i] = true
			}
			if q, ok := c.Resources.Limits[name]; ok && q.Sign() > 0 {
				complete++
				lim[i].Add(q)
				hasLim[i] = true
			}
		}
		if complete < 2 {
			isGuaranteed = false
		}
	}
	for i := range pod.Spec.InitContainers {
		add(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	nReq, nLim := 0, 0
	for i := range names {
		if hasReq[i] {
			nReq++
			if !hasLim[i] || lim[i].Cmp(req[i]) != 0 {
				isGuaranteed = false
			}
		}
		if hasLim[i] {
			nLim++
		}
	}
	if nReq == 0 && nLim == 0 {
		return v1.PodQOSBestEffort
	}
	if isGuaranteed && nReq == nLim {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// requirementsQOS is the class of one set of requests and limits, as
// upstream's: none at all is BestEffort; cpu and memory each with a
// request equal to its non-zero limit is Guaranteed; both unset is
// BestEffort; anything else (a request without its limit, a limit above
// its request, one of cpu and memory set and not the other) Burstable.
func requirementsQOS(r *v1.ResourceRequirements) v1.PodQOSClass {
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		return v1.PodQOSBestEffort
	}
	var class v1.PodQOSClass
	for _, name := range [2]v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		req, lim := r.Requests[name], r.Limits[name]
		var c v1.PodQOSClass
		switch {
		case !req.Equal(lim):
			return v1.PodQOSBurstable
		case req.IsZero():
			c = v1.PodQOSBestEffort
		default:
			c = v1.PodQOSGuaranteed
		}
		if class != "" && class != c {
			return v1.PodQOSBurstable
		}
		class = c
	}
	return class
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
//
// A pod-level request (spec.resources.requests: cpu, memory, hugepages-*)
// replaces the containers' sum, as upstream's PodRequests with
// PodLevelResources on; the overhead is added to it as well.
func PodRequest(p *v1.Pod, name v1.ResourceName) resource.Quantity {
	if q, ok := podLevel(p, name, false); ok {
		if o, ok := p.Spec.Overhead[name]; ok {
			q.Add(o)
		}
		return q
	}
	sum, _, _ := PodResource(p, name, false)
	return sum
}

// PodLevelResource is the pod-level request (limits false) or limit
// (true) of a resource pod-level resources may set (cpu, memory,
// hugepages-*); ok false when the pod sets none.
func PodLevelResource(p *v1.Pod, name v1.ResourceName, limits bool) (resource.Quantity, bool) {
	return podLevel(p, name, limits)
}

func podLevel(p *v1.Pod, name v1.ResourceName, limits bool) (resource.Quantity, bool) {
	if p.Spec.Resources == nil || !IsPodLevelResource(name) {
		return resource.Quantity{}, false
	}
	list := p.Spec.Resources.Requests
	if limits {
		list = p.Spec.Resources.Limits
	}
	q, ok := list[name]
	if !ok {
		return resource.Quantity{}, false
	}
	return q.DeepCopy(), true
}

// IsPodLevelResource: pod-level resources may set it (cpu, memory,
// hugepages-*), as upstream's IsSupportedPodLevelResource.
func IsPodLevelResource(name v1.ResourceName) bool {
	return name == v1.ResourceCPU || name == v1.ResourceMemory || strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// HasPodLevelResources: the pod sets a request or limit at pod level
// (spec.resources) of a resource pod-level resources may set, as
// upstream's IsPodLevelResourcesSet.
func HasPodLevelResources(p *v1.Pod) bool {
	if p.Spec.Resources == nil {
		return false
	}
	for _, l := range []v1.ResourceList{p.Spec.Resources.Requests, p.Spec.Resources.Limits} {
		for name := range l {
			if IsPodLevelResource(name) {
				return true
			}
		}
	}
	return false
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
