package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestWithoutDRAExtended(t *testing.T) {
	rl := func() v1.ResourceList {
		return v1.ResourceList{"example.com/gpu": resource.MustParse("1"), v1.ResourceCPU: resource.MustParse("1")}
	}
	p := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Requests: rl(), Limits: rl()}}},
		Containers:     []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{Requests: rl(), Limits: rl()}}, {Name: "side", Resources: v1.ResourceRequirements{Requests: rl()}}},
	}}
	if got := WithoutDRAExtended(p); got != p {
		t.Fatal("a pod without DRA-backed extended resources was copied")
	}
	p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{
		ResourceClaimName: "p-extended",
		RequestMappings: []v1.ContainerExtendedResourceRequest{
			{ContainerName: "init", ResourceName: "example.com/gpu", RequestName: "r0"},
			{ContainerName: "main", ResourceName: "example.com/gpu", RequestName: "r1"},
		},
	}
	got := WithoutDRAExtended(p)
	if got == p {
		t.Fatal("not copied")
	}
	for _, c := range []v1.Container{got.Spec.InitContainers[0], got.Spec.Containers[0]} {
		if _, ok := c.Resources.Requests["example.com/gpu"]; ok {
			t.Errorf("%s still requests the DRA-backed resource", c.Name)
		}
		if _, ok := c.Resources.Limits["example.com/gpu"]; ok {
			t.Errorf("%s still limits the DRA-backed resource", c.Name)
		}
		if _, ok := c.Resources.Requests[v1.ResourceCPU]; !ok {
			t.Errorf("%s lost its cpu", c.Name)
		}
	}
	if _, ok := got.Spec.Containers[1].Resources.Requests["example.com/gpu"]; !ok {
		t.Error("a container without a mapping lost its extended resource")
	}
	if _, ok := p.Spec.Containers[0].Resources.Requests["example.com/gpu"]; !ok {
		t.Error("the pod given was changed")
	}
}
