package podspec

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func cgRL(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func cgCtr(name string, req, lim v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
}

func cgPod(cs ...v1.Container) *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{Containers: cs}}
}

func TestMilliCPUToSharesAndQuota(t *testing.T) {
	for _, c := range []struct {
		milli  int64
		shares uint64
		quota  int64 // period 100000
	}{
		{0, 2, 0},
		{1, 2, 1000},          // 1*1024/1000 = 1 -> MinShares; 100 us -> MinQuotaPeriod
		{5, 5, 1000},          // 5*1024/1000 = 5; 500 us -> 1000
		{100, 102, 10000},     // 102.4 -> 102
		{250, 256, 25000},     // 256
		{1000, 1024, 100000},  // one CPU
		{1500, 1536, 150000},  // 1.5 CPUs
		{300000, 262144, 3e7}, // 307200 -> MaxShares
	} {
		if got := MilliCPUToShares(c.milli); got != c.shares {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", c.milli, got, c.shares)
		}
		if got := MilliCPUToQuota(c.milli, 100000); got != c.quota {
			t.Errorf("MilliCPUToQuota(%d) = %d, want %d", c.milli, got, c.quota)
		}
	}
	// 1 CPU over a 50 ms period: 50 ms of quota.
	if got := MilliCPUToQuota(1000, 50000); got != 50000 {
		t.Errorf("quota over 50ms = %d", got)
	}
}

func TestPodCgroupValues(t *testing.T) {
	def := PodCgroupConfig{CPUCFSQuota: true, CPUCFSQuotaPeriod: 100 * time.Millisecond}
	u := func(v uint64) *uint64 { return &v }
	i := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		name string
		pod  *v1.Pod
		cfg  PodCgroupConfig
		want *CgroupResources
	}{{
		name: "besteffort: MinShares only",
		pod:  cgPod(cgCtr("a", nil, nil)),
		cfg:  def,
		want: &CgroupResources{CPUShares: u(2)},
	}, {
		name: "guaranteed: shares, quota, period, memory",
		pod:  cgPod(cgCtr("a", cgRL("cpu", "500m", "memory", "128Mi"), cgRL("cpu", "500m", "memory", "128Mi"))),
		cfg:  def,
		// 500*1024/1000 = 512; 500*100000/1000 = 50000
		want: &CgroupResources{CPUShares: u(512), CPUQuota: i(50000), CPUPeriod: u(100000), Memory: i(128 << 20)},
	}, {
		name: "burstable, requests only: shares",
		pod:  cgPod(cgCtr("a", cgRL("cpu", "100m"), nil), cgCtr("b", cgRL("cpu", "200m", "memory", "10Mi"), nil)),
		cfg:  def,
		want: &CgroupResources{CPUShares: u(307)}, // 300*1024/1000 = 307.2
	}, {
		name: "burstable, every container with a CPU limit, one without memory limit",
		pod: cgPod(cgCtr("a", cgRL("cpu", "100m"), cgRL("cpu", "1", "memory", "64Mi")),
			cgCtr("b", cgRL("cpu", "100m"), cgRL("cpu", "500m"))),
		cfg:  def,
		want: &CgroupResources{CPUShares: u(204), CPUQuota: i(150000), CPUPeriod: u(100000)},
	}, {
		name: "burstable, one container without a CPU limit: no quota; memory limits everywhere",
		pod: cgPod(cgCtr("a", cgRL("cpu", "100m"), cgRL("cpu", "1", "memory", "64Mi")),
			cgCtr("b", cgRL("memory", "1Mi"), cgRL("memory", "32Mi"))),
		cfg:  def,
		want: &CgroupResources{CPUShares: u(102), Memory: i(96 << 20)},
	}, {
		name: "cpuCFSQuota off: quota -1",
		pod:  cgPod(cgCtr("a", cgRL("cpu", "1", "memory", "1Gi"), cgRL("cpu", "1", "memory", "1Gi"))),
		cfg:  PodCgroupConfig{CPUCFSQuota: false, CPUCFSQuotaPeriod: 100 * time.Millisecond},
		want: &CgroupResources{CPUShares: u(1024), CPUQuota: i(-1), CPUPeriod: u(100000), Memory: i(1 << 30)},
	}, {
		name: "custom period 50ms and pids limit",
		pod:  cgPod(cgCtr("a", cgRL("cpu", "2", "memory", "1Gi"), cgRL("cpu", "2", "memory", "1Gi"))),
		cfg:  PodCgroupConfig{CPUCFSQuota: true, CPUCFSQuotaPeriod: 50 * time.Millisecond, PodPidsLimit: 100},
		want: &CgroupResources{CPUShares: u(2048), CPUQuota: i(100000), CPUPeriod: u(50000), Memory: i(1 << 30), PidsLimit: i(100)},
	}, {
		name: "init container's larger request counts (max of init and sum)",
		pod: &v1.Pod{Spec: v1.PodSpec{
			InitContainers: []v1.Container{cgCtr("init", cgRL("cpu", "1"), nil)},
			Containers:     []v1.Container{cgCtr("a", cgRL("cpu", "200m"), nil)},
		}},
		cfg:  def,
		want: &CgroupResources{CPUShares: u(1024)},
	}, {
		name: "pod-level resources: their limits decide",
		pod: &v1.Pod{Spec: v1.PodSpec{
			Resources:  &v1.ResourceRequirements{Requests: cgRL("cpu", "1", "memory", "100Mi"), Limits: cgRL("cpu", "2", "memory", "200Mi")},
			Containers: []v1.Container{cgCtr("a", nil, nil), cgCtr("b", cgRL("cpu", "100m"), nil)},
		}},
		cfg:  def,
		want: &CgroupResources{CPUShares: u(1024), CPUQuota: i(200000), CPUPeriod: u(100000), Memory: i(200 << 20)},
	}, {
		name: "huge pages from requests",
		pod: cgPod(cgCtr("a", cgRL("cpu", "1", "memory", "1Gi", "hugepages-2Mi", "4Mi"),
			cgRL("cpu", "1", "memory", "1Gi", "hugepages-2Mi", "4Mi"))),
		cfg: def,
		want: &CgroupResources{CPUShares: u(1024), CPUQuota: i(100000), CPUPeriod: u(100000), Memory: i(1 << 30),
			HugePageLimit: map[int64]int64{2 << 20: 4 << 20}},
	}} {
		t.Run(c.name, func(t *testing.T) {
			got := PodCgroupValues(c.pod, c.cfg)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %s\nwant %s", fmtRes(got), fmtRes(c.want))
			}
		})
	}
}

func fmtRes(r *CgroupResources) string {
	s := ""
	if r.CPUShares != nil {
		s += " shares=" + itoa(int64(*r.CPUShares))
	}
	if r.CPUQuota != nil {
		s += " quota=" + itoa(*r.CPUQuota)
	}
	if r.CPUPeriod != nil {
		s += " period=" + itoa(int64(*r.CPUPeriod))
	}
	if r.Memory != nil {
		s += " memory=" + itoa(*r.Memory)
	}
	if r.PidsLimit != nil {
		s += " pids=" + itoa(*r.PidsLimit)
	}
	for k, v := range r.HugePageLimit {
		s += " hp" + itoa(k) + "=" + itoa(v)
	}
	return s
}

func itoa(v int64) string { return resource.NewQuantity(v, resource.DecimalSI).String() }

func TestQOSCgroupValues(t *testing.T) {
	pods := []*v1.Pod{
		cgPod(cgCtr("be", nil, nil)),
		cgPod(cgCtr("g", cgRL("cpu", "1", "memory", "1Gi"), cgRL("cpu", "1", "memory", "1Gi"))), // guaranteed: not summed
		cgPod(cgCtr("b1", cgRL("cpu", "250m"), nil)),
		cgPod(cgCtr("b2", cgRL("cpu", "500m"), cgRL("cpu", "1"))),
		cgPod(cgCtr("b3", cgRL("memory", "10Mi"), nil)), // no CPU request
	}
	b, be := QOSCgroupValues(pods)
	if *b.CPUShares != 768 { // 750*1024/1000
		t.Errorf("burstable shares = %d, want 768", *b.CPUShares)
	}
	if *be.CPUShares != 2 {
		t.Errorf("besteffort shares = %d, want 2", *be.CPUShares)
	}
	if b, _ := QOSCgroupValues(nil); *b.CPUShares != 2 {
		t.Errorf("no burstable pods: shares %d, want MinShares", *b.CPUShares)
	}
}

func TestKubepodsCgroupValues(t *testing.T) {
	capacity := cgRL("cpu", "4", "memory", "8Gi", "pid", "4194304", "hugepages-2Mi", "0", "ephemeral-storage", "100Gi")
	sys := cgRL("cpu", "500m", "memory", "1Gi", "pid", "1000")
	kube := cgRL("cpu", "250m", "memory", "512Mi")
	enforced := KubepodsCgroupValues(capacity, sys, kube, true)
	// cpu 4000-750 = 3250m -> 3328 shares; memory 8Gi-1.5Gi; pids 4193304.
	want := &CgroupResources{CPUShares: ptr.To[uint64](3328), Memory: ptr.To[int64](8<<30 - 1536<<20),
		PidsLimit: ptr.To[int64](4193304), HugePageLimit: map[int64]int64{2 << 20: 0}}
	if !reflect.DeepEqual(enforced, want) {
		t.Errorf("enforced: got %s want %s", fmtRes(enforced), fmtRes(want))
	}
	whole := KubepodsCgroupValues(capacity, sys, kube, false)
	want = &CgroupResources{CPUShares: ptr.To[uint64](4096), Memory: ptr.To[int64](8 << 30),
		PidsLimit: ptr.To[int64](4194304), HugePageLimit: map[int64]int64{2 << 20: 0}}
	if !reflect.DeepEqual(whole, want) {
		t.Errorf("not enforced: got %s want %s", fmtRes(whole), fmtRes(want))
	}
	// More reserved than there is: zero, never negative.
	if got := NodeAllocatableAbsolute(cgRL("memory", "1Gi"), cgRL("memory", "2Gi"), nil); got.Memory().Value() != 0 {
		t.Errorf("over-reserved memory = %v", got.Memory())
	}
}

func TestReservedCgroupValues(t *testing.T) {
	if ReservedCgroupValues(nil, false) != nil {
		t.Error("nil reservation: want nil")
	}
	r := ReservedCgroupValues(cgRL("cpu", "200m", "memory", "256Mi", "pid", "500"), false)
	want := &CgroupResources{CPUShares: ptr.To[uint64](204), Memory: ptr.To[int64](256 << 20), PidsLimit: ptr.To[int64](500)}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got %s want %s", fmtRes(r), fmtRes(want))
	}
	r = ReservedCgroupValues(cgRL("cpu", "200m", "memory", "256Mi"), true)
	if !reflect.DeepEqual(r, &CgroupResources{CPUShares: ptr.To[uint64](204)}) {
		t.Errorf("compressible only: got %s", fmtRes(r))
	}
}
