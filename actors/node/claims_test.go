package node

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestDRABackedExtendedResourcesAreNotCountedAtAdmission(t *testing.T) {
	p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{"example.com/gpu": resource.MustParse("2")},
		Limits:   v1.ResourceList{"example.com/gpu": resource.MustParse("2")},
	}}}}}
	var ad admission
	if reason, _ := ad.fitsExtended(p, nil); reason != "OutOfexample.com/gpu" {
		t.Fatalf("a device plugin resource the node lacks: reason %q, want OutOfexample.com/gpu", reason)
	}
	p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "x",
		RequestMappings: []v1.ContainerExtendedResourceRequest{{ContainerName: "app", ResourceName: "example.com/gpu", RequestName: "r"}}}
	if reason, msg := ad.fitsExtended(p, nil); reason != "" {
		t.Fatalf("a DRA-backed extended resource refused: %s %s", reason, msg)
	}
	ad.trackExtended(p, 1)
	if len(ad.extUsed) != 0 {
		t.Fatalf("a DRA-backed extended resource counted as used: %v", ad.extUsed)
	}
	if _, ok := p.Spec.Containers[0].Resources.Limits["example.com/gpu"]; !ok {
		t.Fatal("the pod itself was changed")
	}
}
