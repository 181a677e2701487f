package manifest

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/actorlet/actorlet/podspec"
)

// Pod-level resources (spec.resources; PodLevelResources, beta and on
// since v1.34) of node-local pods, defaulted and validated as the API
// server does an API pod's, so that a static pod's QoS class is the one
// the API server computes for its mirror pod.

// defaultPodLevelResources fills what the API server fills in a pod with
// pod-level resources (upstream's DefaultPodLevelResources, with
// PodLevelResourcesFixDefaulting): a pod-level request missing is the
// containers' aggregate request (cpu, memory) or else the pod-level limit;
// a pod-level limit missing for a resource the pod requests at pod level
// and every container limits is the larger of the request and the
// containers' aggregate limit. Hugepages limits of the containers become
// the pod's when it sets neither.
func defaultPodLevelResources(pod *v1.Pod) {
	r := pod.Spec.Resources
	if r == nil || len(r.Requests)+len(r.Limits) == 0 {
		return
	}
	ctrs := &v1.Pod{Spec: v1.PodSpec{Containers: pod.Spec.Containers, InitContainers: pod.Spec.InitContainers}}
	aggrLimits := resourcehelper.AggregateContainerLimits(ctrs, resourcehelper.PodResourcesOptions{})
	for name, q := range aggrLimits {
		if !isHugePages(name) || !podspec.IsPodLevelResource(name) {
			continue
		}
		if _, req := r.Requests[name]; req {
			continue
		}
		if _, lim := r.Limits[name]; !lim {
			if r.Limits == nil {
				r.Limits = v1.ResourceList{}
			}
			r.Limits[name] = q.DeepCopy()
		}
	}
	reqs := r.Requests
	if reqs == nil {
		reqs = v1.ResourceList{}
	}
	for name, q := range resourcehelper.AggregateContainerRequests(ctrs, resourcehelper.PodResourcesOptions{}) {
		if _, ok := reqs[name]; !ok && podspec.IsPodLevelResource(name) && !isHugePages(name) {
			reqs[name] = q.DeepCopy()
		}
	}
	for name, q := range r.Limits {
		if _, ok := reqs[name]; !ok && podspec.IsPodLevelResource(name) {
			reqs[name] = q.DeepCopy()
		}
	}
	if len(reqs) > 0 {
		r.Requests = reqs
	}
	var candidates []v1.ResourceName
	for name := range r.Requests {
		if _, ok := r.Limits[name]; !ok && podspec.IsPodLevelResource(name) && everyContainerLimits(pod, name) {
			candidates = append(candidates, name)
		}
	}
	for _, name := range candidates {
		lim, ok := aggrLimits[name]
		if !ok {
			continue
		}
		if req := r.Requests[name]; req.Cmp(lim) > 0 {
			lim = req
		}
		if r.Limits == nil {
			r.Limits = v1.ResourceList{}
		}
		r.Limits[name] = lim.DeepCopy()
	}
}

func isHugePages(name v1.ResourceName) bool {
	return strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// everyContainerLimits: every container, init ones and sidecars too,
// sets a limit of name.
func everyContainerLimits(pod *v1.Pod, name v1.ResourceName) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if _, ok := cs[i].Resources.Limits[name]; !ok {
				return false
			}
		}
	}
	return true
}

// podLevelResourceNames are the names upstream's validation lists as
// supported at pod level.
var podLevelResourceNames = []string{string(v1.ResourceCPU), v1.ResourceHugePagesPrefix, string(v1.ResourceMemory)}

// validatePodLevelResources checks spec.resources as the API server does
// (upstream's validatePodResources): only cpu, memory and hugepages-*, no
// claims, requests not above limits, pod-level requests not below the
// containers' aggregate requests, pod-level hugepages limits not below the
// containers' aggregate, and no container limit above the pod's.
func validatePodLevelResources(spec *v1.PodSpec, path *field.Path) field.ErrorList {
	r := spec.Resources
	if r == nil {
		return nil
	}
	rp := path.Child("resources")
	if spec.OS != nil && spec.OS.Name == v1.Windows {
		return field.ErrorList{field.Forbidden(rp, "may not be set for a windows pod")}
	}
	var errs field.ErrorList
	if r.Claims != nil {
		errs = append(errs, field.Forbidden(rp.Child("claims"), "claims may not be set for Resources at pod-level"))
	}
	names := func(l v1.ResourceList) []v1.ResourceName {
		out := make([]v1.ResourceName, 0, len(l))
		for n := range l {
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}
	supported := func(name v1.ResourceName, p *field.Path) bool {
		if es := validateResourceName(name, p); len(es) > 0 {
			errs = append(errs, es...)
			return false
		}
		if !podspec.IsPodLevelResource(name) {
			errs = append(errs, field.NotSupported(p, name, podLevelResourceNames))
			return false
		}
		return true
	}
	for _, name := range names(r.Limits) {
		p := rp.Child("limits").Key(string(name))
		if supported(name, p) {
			errs = append(errs, validateQuantity(name, r.Limits[name], p)...)
		}
	}
	for _, name := range names(r.Requests) {
		p := rp.Child("requests").Key(string(name))
		if !supported(name, p) {
			continue
		}
		q := r.Requests[name]
		if qerrs := validateQuantity(name, q, p); len(qerrs) > 0 {
			errs = append(errs, qerrs...)
			continue
		}
		limit, ok := r.Limits[name]
		switch {
		case ok && isHugePages(name) && q.Cmp(limit) != 0:
			errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
		case ok && q.Cmp(limit) > 0:
			errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	ctrs := &v1.Pod{Spec: v1.PodSpec{Containers: spec.Containers, InitContainers: spec.InitContainers}}
	aggrReqs := resourcehelper.AggregateContainerRequests(ctrs, resourcehelper.PodResourcesOptions{})
	for _, name := range names(aggrReqs) {
		podReq, ok := r.Requests[name]
		if ctr := aggrReqs[name]; ok && ctr.Cmp(podReq) > 0 {
			errs = append(errs, field.Invalid(rp.Child("requests").Key(string(name)), podReq.String(),
				fmt.Sprintf("must be greater than or equal to aggregate container requests of %s", ctr.String())))
		}
	}
	aggrLims := resourcehelper.AggregateContainerLimits(ctrs, resourcehelper.PodResourcesOptions{})
	for _, name := range names(aggrLims) {
		podLim, ok := r.Limits[name]
		if ctr := aggrLims[name]; ok && isHugePages(name) && ctr.Cmp(podLim) > 0 {
			errs = append(errs, field.Invalid(rp.Child("limits").Key(string(name)), podLim.String(),
				fmt.Sprintf("must be greater than or equal to aggregate container limits of %s", ctr.String())))
		}
	}
	for i := range spec.Containers {
		for _, name := range names(spec.Containers[i].Resources.Limits) {
			podLim, ok := r.Limits[name]
			if ctr := spec.Containers[i].Resources.Limits[name]; ok && ctr.Cmp(podLim) > 0 {
				// The path is upstream's, containers under resources.
				errs = append(errs, field.Invalid(rp.Child("containers").Index(i).Key(string(name)).Child("limits"), ctr.String(),
					fmt.Sprintf("must be less than or equal to pod limits of %s", podLim.String())))
			}
		}
	}
	return errs
}
