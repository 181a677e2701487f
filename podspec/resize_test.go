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

// What a status reports, as upstream's convertContainerStatusResources:
// the allocation (every resource it names) where the container does not
// run, the runtime's CPU and memory turned back into quantities where it
// does, an empty (not nil) value for a container without resources.
func TestStatusResources(t *testing.T) {
	c := resizeCtr("500m", "1", "256Mi")
	c.Resources.Requests[v1.ResourceMemory] = resource.MustParse("128Mi")
	c.Resources.Requests["example.com/gpu"] = resource.MustParse("1")
	c.Resources.Requests[v1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
	c.Resources.Limits[v1.ResourceEphemeralStorage] = resource.MustParse("2Gi")
	for _, actual := range []*runtimeapi.LinuxContainerResources{nil, ContainerLinuxResources(c)} {
		got := StatusResources(c, actual)
		if !SameResourceLists(got.Requests, c.Resources.Requests) || !SameResourceLists(got.Limits, c.Resources.Limits) {
			t.Fatalf("actual %v: got %+v, want the allocation %+v", actual, got, c.Resources)
		}
	}
	old := &runtimeapi.LinuxContainerResources{CpuShares: 256, CpuQuota: 50000, CpuPeriod: 100000, MemoryLimitInBytes: 128 << 20}
	got := StatusResources(c, old)
	for _, tc := range []struct {
		list v1.ResourceList
		name v1.ResourceName
		want string
	}{
		{got.Requests, v1.ResourceCPU, "250m"},             // 256 shares
		{got.Limits, v1.ResourceCPU, "500m"},               // 50000/100000
		{got.Limits, v1.ResourceMemory, "128Mi"},           // as is
		{got.Requests, v1.ResourceMemory, "128Mi"},         // the allocated one
		{got.Requests, v1.ResourceEphemeralStorage, "1Gi"}, // allocated, not resizable
		{got.Limits, v1.ResourceEphemeralStorage, "2Gi"},
		{got.Requests, "example.com/gpu", "1"},
	} {
		if q := tc.list[tc.name]; q.Cmp(resource.MustParse(tc.want)) != 0 {
			t.Errorf("%s = %s, want %s", tc.name, q.String(), tc.want)
		}
	}
	// A quota that is not a whole milli-CPU rounds down, shares round up,
	// as upstream's QuotaToMilliCPU and SharesToMilliCPU.
	got = StatusResources(c, &runtimeapi.LinuxContainerResources{CpuShares: 103, CpuQuota: 33399, CpuPeriod: 100000})
	if q := got.Limits[v1.ResourceCPU]; q.MilliValue() != 333 {
		t.Errorf("cpu limit %s, want 333m (33399/100000 rounded down)", q.String())
	}
	if q := got.Requests[v1.ResourceCPU]; q.MilliValue() != 101 {
		t.Errorf("cpu request %s, want 101m (103*1000/1024 rounded up)", q.String())
	}

	// BestEffort: an empty value, not nil; nothing the runtime holds is
	// added (no requests or limits named).
	for _, actual := range []*runtimeapi.LinuxContainerResources{nil, {CpuShares: 2, CpuQuota: 20000, CpuPeriod: 100000}} {
		be := StatusResources(&v1.Container{Name: "be"}, actual)
		if be == nil || be.Requests != nil || be.Limits != nil {
			t.Errorf("best-effort container with %v: got %+v, want an empty ResourceRequirements", actual, be)
		}
	}

	// Below the minimum shares and quota the allocation stands: a 1m
	// request runs with 2 shares (2m back), a 5m limit with the kernel's
	// minimum quota (10m back).
	tiny := resizeCtr("1m", "5m", "")
	got = StatusResources(tiny, ContainerLinuxResources(tiny))
	if q := got.Requests[v1.ResourceCPU]; q.MilliValue() != 1 {
		t.Errorf("tiny cpu request %s, want the allocated 1m", q.String())
	}
	if q := got.Limits[v1.ResourceCPU]; q.MilliValue() != 5 {
		t.Errorf("tiny cpu limit %s, want the allocated 5m", q.String())
	}
	if _, ok := got.Limits[v1.ResourceMemory]; ok {
		t.Error("memory limit reported for a container without one")
	}
}

func TestResizePolicyDefault(t *testing.T) {
	c := resizeCtr("1", "", "")
	c.ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}
	if ContainerResizePolicy(c, v1.ResourceCPU) != v1.NotRequired || ContainerResizePolicy(c, v1.ResourceMemory) != v1.RestartContainer {
		t.Fatal("resize policy")
	}
}
