package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// With pod-level resources the class is theirs alone, as upstream's
// ComputePodQOS (what the API server writes in status.qosClass).
func TestQOSClassPodLevel(t *testing.T) {
	tests := []struct {
		name       string
		req, lim   v1.ResourceList
		containers []v1.ResourceRequirements
		want       v1.PodQOSClass
	}{
		{name: "requests = limits, container without resources", req: res("100m", "64Mi"), lim: res("100m", "64Mi"),
			containers: []v1.ResourceRequirements{{}}, want: v1.PodQOSGuaranteed},
		{name: "requests only", req: res("100m", "64Mi"), containers: []v1.ResourceRequirements{{}}, want: v1.PodQOSBurstable},
		{name: "cpu only, equal", req: res("100m", ""), lim: res("100m", ""), containers: []v1.ResourceRequirements{{}}, want: v1.PodQOSBurstable},
		{name: "limits above requests", req: res("100m", "64Mi"), lim: res("200m", "64Mi"), containers: []v1.ResourceRequirements{{}}, want: v1.PodQOSBurstable},
		{name: "pod-level guaranteed wins over burstable containers", req: res("1", "1Gi"), lim: res("1", "1Gi"),
			containers: []v1.ResourceRequirements{{Requests: res("100m", "")}}, want: v1.PodQOSGuaranteed},
		{name: "pod-level burstable wins over guaranteed containers", req: res("1", "1Gi"),
			containers: []v1.ResourceRequirements{{Requests: res("1", "1Gi"), Limits: res("1", "1Gi")}}, want: v1.PodQOSBurstable},
		{name: "only an unsupported resource at pod level: the containers decide", req: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
			containers: []v1.ResourceRequirements{{Requests: res("1", "1Gi"), Limits: res("1", "1Gi")}}, want: v1.PodQOSGuaranteed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := podWith(nil, tt.containers...)
			p.Spec.Resources = &v1.ResourceRequirements{Requests: tt.req, Limits: tt.lim}
			if got := QOSClass(p); got != tt.want {
				t.Fatalf("QOSClass %s, want %s", got, tt.want)
			}
		})
	}
}

// A pod-level request replaces the containers' sum (per resource), plus
// the overhead, as upstream's PodRequests.
func TestPodRequestPodLevel(t *testing.T) {
	p := podWith(nil, v1.ResourceRequirements{Requests: res("300m", "32Mi")}, v1.ResourceRequirements{Requests: res("200m", "")})
	if got := PodRequest(p, v1.ResourceCPU); got.MilliValue() != 500 {
		t.Fatalf("without pod-level: cpu %s, want 500m", got.String())
	}
	p.Spec.Resources = &v1.ResourceRequirements{Requests: res("800m", ""), Limits: res("1", "1Gi")}
	p.Spec.Overhead = res("50m", "")
	if got := PodRequest(p, v1.ResourceCPU); got.MilliValue() != 850 {
		t.Fatalf("pod-level cpu with overhead %s, want 850m", got.String())
	}
	if got := PodRequest(p, v1.ResourceMemory); got.Value() != 32<<20 {
		t.Fatalf("memory without a pod-level request %s, want the containers' 32Mi", got.String())
	}
	if !HasPodLevelResources(p) {
		t.Fatal("HasPodLevelResources false")
	}
	if q, ok := PodLevelResource(p, v1.ResourceMemory, true); !ok || q.Value() != 1<<30 {
		t.Fatalf("pod-level memory limit %s %v", q.String(), ok)
	}
}

// The downward API's limits of a container without its own fall back to
// the pod-level limits, then to the node's allocatable.
func TestDownwardAllocatablePodLevel(t *testing.T) {
	alloc := res("4", "8Gi")
	p := podWith(nil, v1.ResourceRequirements{})
	if got := DownwardAllocatable(p, alloc); got.Cpu().MilliValue() != 4000 {
		t.Fatalf("without pod-level: %v", got)
	}
	p.Spec.Resources = &v1.ResourceRequirements{Limits: res("", "64Mi")}
	got := DownwardAllocatable(p, alloc)
	c := &p.Spec.Containers[0]
	mem, err := ResourceFieldRef(c, &v1.ResourceFieldSelector{Resource: "limits.memory"}, got)
	if err != nil || mem != "67108864" {
		t.Fatalf("limits.memory %q %v, want the pod-level 67108864", mem, err)
	}
	cpu, err := ResourceFieldRef(c, &v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1m")}, got)
	if err != nil || cpu != "4000" {
		t.Fatalf("limits.cpu %q %v, want the allocatable 4000", cpu, err)
	}
	if alloc.Memory().Value() != 8<<30 {
		t.Fatal("allocatable written")
	}
	c.Resources.Limits = res("", "32Mi")
	if mem, _ := ResourceFieldRef(c, &v1.ResourceFieldSelector{Resource: "limits.memory"}, got); mem != "33554432" {
		t.Fatalf("the container's own limit %q, want 33554432", mem)
	}
}

// A container without limits of its own in a pod with pod-level limits
// gets them in its CRI resources (quota, memory limit, shares from the cpu
// limit), as upstream; its own limits win.
func TestContainerConfigPodLevelLimits(t *testing.T) {
	p := podWith(nil, v1.ResourceRequirements{}, v1.ResourceRequirements{Limits: res("50m", "32Mi"), Requests: res("50m", "32Mi")})
	p.Spec.Resources = &v1.ResourceRequirements{Requests: res("100m", "64Mi"), Limits: res("100m", "64Mi")}
	r := ContainerConfig(p, &p.Spec.Containers[0], 0, "img", false).Linux.Resources
	if r.CpuQuota != 10000 || r.CpuPeriod != 100000 || r.MemoryLimitInBytes != 64<<20 || r.CpuShares != 102 {
		t.Fatalf("container without limits: quota %d period %d memory %d shares %d", r.CpuQuota, r.CpuPeriod, r.MemoryLimitInBytes, r.CpuShares)
	}
	if len(p.Spec.Containers[0].Resources.Limits) != 0 {
		t.Fatal("the pod's container was written")
	}
	r = ContainerConfig(p, &p.Spec.Containers[1], 0, "img", false).Linux.Resources
	if r.CpuQuota != 5000 || r.MemoryLimitInBytes != 32<<20 {
		t.Fatalf("container with its own limits: quota %d memory %d", r.CpuQuota, r.MemoryLimitInBytes)
	}
	p.Spec.Resources = nil
	if r = ContainerConfig(p, &p.Spec.Containers[0], 0, "img", false).Linux.Resources; r.CpuQuota != 0 || r.MemoryLimitInBytes != 0 || r.CpuShares != 2 {
		t.Fatalf("without pod-level resources: %+v", r)
	}
}
