package manifest

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/actorlet/actorlet/podspec"
)

func rlist(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// Pod-level resources of a static pod are refused with the API server's
// messages (defaulted first, as the API server defaults an API pod).
func TestValidatePodLevelResources(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(p *v1.Pod)
		wantErr []string
	}{
		{name: "requests = limits, container without resources", mutate: func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Requests: rlist("cpu", "100m", "memory", "64Mi"), Limits: rlist("cpu", "100m", "memory", "64Mi")}
		}},
		{name: "a pod-level limit below the containers' requests", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = rlist("cpu", "200m")
			p.Spec.Resources = &v1.ResourceRequirements{Limits: rlist("cpu", "100m")}
		}, wantErr: []string{`spec.resources.requests[cpu]: Invalid value: "200m": must be less than or equal to cpu limit of 100m`}},
		{name: "a pod-level request below the containers' requests", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = rlist("memory", "128Mi")
			p.Spec.Resources = &v1.ResourceRequirements{Requests: rlist("memory", "64Mi")}
		}, wantErr: []string{`spec.resources.requests[memory]: Invalid value: "64Mi": must be greater than or equal to aggregate container requests of 128Mi`}},
		{name: "a container limit above the pod's", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits = rlist("cpu", "2")
			p.Spec.Containers[0].Resources.Requests = rlist("cpu", "100m")
			p.Spec.Resources = &v1.ResourceRequirements{Limits: rlist("cpu", "1")}
		}, wantErr: []string{`spec.resources.containers[0][cpu].limits: Invalid value: "2": must be less than or equal to pod limits of 1`}},
		{name: "an unsupported resource", mutate: func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Requests: rlist("ephemeral-storage", "1Gi")}
		}, wantErr: []string{`spec.resources.requests[ephemeral-storage]: Unsupported value: "ephemeral-storage": supported values: "cpu", "hugepages-", "memory"`}},
		{name: "claims", mutate: func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}
		}, wantErr: []string{"spec.resources.claims: Forbidden: claims may not be set for Resources at pod-level"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkValidate(t, func(p *v1.Pod) {
				tt.mutate(p)
				defaultPodLevelResources(p)
			}, tt.wantErr)
		})
	}
}

// Defaulting as the API server's: a pod-level limit alone makes the
// request; requests with every container limited make the limit; so a
// static pod's QoS class is its mirror pod's.
func TestDefaultPodLevelResources(t *testing.T) {
	p := validPod()
	p.Spec.Resources = &v1.ResourceRequirements{Limits: rlist("cpu", "100m", "memory", "64Mi")}
	defaultPodLevelResources(p)
	if got := p.Spec.Resources.Requests; !got.Cpu().Equal(resource.MustParse("100m")) || !got.Memory().Equal(resource.MustParse("64Mi")) {
		t.Fatalf("requests %v, want the limits", got)
	}
	if q := podspec.QOSClass(p); q != v1.PodQOSGuaranteed {
		t.Fatalf("class %s, want Guaranteed", q)
	}

	p = validPod()
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: rlist("cpu", "50m"), Limits: rlist("cpu", "300m")}
	p.Spec.Resources = &v1.ResourceRequirements{Requests: rlist("cpu", "200m")}
	defaultPodLevelResources(p)
	if got := p.Spec.Resources.Limits; !got.Cpu().Equal(resource.MustParse("300m")) {
		t.Fatalf("limits %v, want the containers' 300m", got)
	}
	if _, ok := p.Spec.Resources.Limits[v1.ResourceMemory]; ok {
		t.Fatal("a memory limit made up")
	}
}
