package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func resizeCtr(cpuReq, cpuLim, memLim string) *v1.Container {
	c := &v1.Container{Name: "app", Image: "busybox", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}}
	if cpuReq != "" {
		c.Resources.Requests[v1.ResourceCPU] = resource.MustParse(cpuReq)
	}
	if cpuLim != "" {
		c.Resources.Limits[v1.ResourceCPU] = resource.MustParse(cpuLim)
	}
	if memLim != "" {
		c.Resources.Limits[v1.ResourceMemory] = resource.MustParse(memLim)
	}
	return c
}

// The hash leaves resources and the resize policy out (a resize restarts
// nothing), keeps everything else, and the hash of agents before resize
// is still recognised.
func TestContainerHashWithoutResources(t *testing.T) {
	a := resizeCtr("100m", "200m", "128Mi")
	b := resizeCtr("300m", "", "1Gi")
	b.ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}
	if ContainerHash(a) != ContainerHash(b) {
		t.Fatal("hash changes with resources")
	}
	c := resizeCtr("100m", "200m", "128Mi")
	c.Image = "busybox:2"
	if ContainerHash(a) == ContainerHash(c) {
		t.Fatal("hash does not change with the image")
	}
	if !ContainerHashMatches(a, LegacyContainerHash(a)) || !ContainerHashMatches(a, ContainerHash(b)) {
		t.Fatal("hash not recognised")
	}
	if ContainerHashMatches(a, LegacyContainerHash(c)) || ContainerHashMatches(a, "") {
		t.Fatal("another container's hash recognised")
	}
	// A container without resources hashes as before resize.
	plain := &v1.Container{Name: "app", Image: "busybox"}
	if ContainerHash(plain) != LegacyContainerHash(plain) {
		t.Fatal("hash of a container without resources changed")
	}
}

func TestLinuxResourcesAnnotation(t *testing.T) {
	r := ContainerLinuxResources(resizeCtr("250m", "500m", "64Mi"))
	s := FormatLinuxResources(r)
	if s != "shares=256,quota=50000,period=100000,memory=67108864" {
		t.Fatalf("formatted %q", s)
	}
	got := ParseLinuxResources(s)
	if !SameCPU(got, r) || !SameMemory(got, r) || got.CpuPeriod != r.CpuPeriod {
		t.Fatalf("parsed %+v, want %+v", got, r)
	}
	for _, bad := range []string{"", "shares=x", "cpu=1", "shares"} {
		if ParseLinuxResources(bad) != nil {
			t.Errorf("%q parsed", bad)
		}
	}
	cfg := ContainerConfig(&v1.Pod{}, resizeCtr("250m", "500m", "64Mi"), 0, "img", false)
	if cfg.Annotations[AnnotationContainerResources] != s {
		t.Fatalf("config annotation %q, want %q", cfg.Annotations[AnnotationContainerResources], s)
	}
}

// What a status reports: the allocation where the runtime holds it, else
// the runtime's values turned back into quantities, as upstream.
func TestStatusResources(t *testing.T) {
	c := resizeCtr("500m", "1", "256Mi")
	c.Resources.Requests[v1.ResourceMemory] = resource.MustParse("128Mi")
	c.Resources.Requests["example.com/gpu"] = resource.MustParse("1")
	got := StatusResources(c, ContainerLinuxResources(c))
	want := v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("128Mi")}
	if !SameResourceLists(got.Requests, want) || !SameResourceLists(got.Limits, c.Resources.Limits) {
		t.Fatalf("applied: %+v", got)
	}
	old := &runtimeapi.LinuxContainerResources{CpuShares: 256, CpuQuota: 50000, CpuPeriod: 100000, MemoryLimitInBytes: 128 << 20}
	got = StatusResources(c, old)
	if q := got.Requests[v1.ResourceCPU]; q.MilliValue() != 250 {
		t.Errorf("cpu request %s, want 250m from the shares", q.String())
	}
	if q := got.Limits[v1.ResourceCPU]; q.MilliValue() != 500 {
		t.Errorf("cpu limit %s, want 500m from the quota", q.String())
	}
	if q := got.Limits[v1.ResourceMemory]; q.Value() != 128<<20 {
		t.Errorf("memory limit %s, want 128Mi", q.String())
	}
	if q := got.Requests[v1.ResourceMemory]; q.Value() != 128<<20 {
		t.Errorf("memory request %s, want the allocated 128Mi", q.String())
	}
	if StatusResources(&v1.Container{}, nil) != nil {
		t.Error("a container without resources reports some")
	}
}

func TestResizePolicyDefault(t *testing.T) {
	c := resizeCtr("1", "", "")
	c.ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}
	if ContainerResizePolicy(c, v1.ResourceCPU) != v1.NotRequired || ContainerResizePolicy(c, v1.ResourceMemory) != v1.RestartContainer {
		t.Fatal("resize policy")
	}
}
