package node

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestFitsRejectsWhatDoesNotFit(t *testing.T) {
	pod := func(uid, cpu, mem string) *v1.Pod {
		req := v1.ResourceList{}
		if cpu != "" {
			req[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			req[v1.ResourceMemory] = resource.MustParse(mem)
		}
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID("u-" + uid)},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: req}}}}}
	}
	a := &Actor{cfg: Config{Allocatable: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")}},
		pods: map[types.UID]*entry{"u-1": {pod: pod("1", "1500m", "512Mi")}}}
	a.track(a.pods["u-1"], 1)
	tests := []struct {
		name   string
		pod    *v1.Pod
		reason string
	}{
		{name: "fits", pod: pod("2", "500m", "256Mi")},
		{name: "no requests", pod: pod("3", "", "")},
		{name: "too much cpu", pod: pod("4", "600m", ""), reason: "OutOfcpu"},
		{name: "too much memory", pod: pod("5", "", "600Mi"), reason: "OutOfmemory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, msg := a.fits(tt.pod)
			if reason != tt.reason {
				t.Fatalf("reason %q (%s), want %q", reason, msg, tt.reason)
			}
		})
	}
}
