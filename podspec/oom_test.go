package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// oomCtr is a container requesting mem (and 100m CPU, so that the pod is
// Burstable); "" requests no memory.
func oomCtr(name, mem string) v1.Container {
	c := v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}
	if mem != "" {
		c.Resources.Requests[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return c
}

// The OOM score adjustment of upstream's GetContainerOOMScoreAdjust, on
// values computed by hand: 1000 - 1000*request/capacity for Burstable,
// within [3, 999].
func TestContainerOOMScoreAdjust(t *testing.T) {
	const gi = int64(1) << 30
	always := v1.ContainerRestartPolicyAlways
	sidecar := func(mem string) v1.Container {
		c := oomCtr("side", mem)
		c.RestartPolicy = &always
		return c
	}
	guaranteed := v1.Container{Name: "g", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")},
	}}
	prio := SystemCriticalPriority
	for _, tc := range []struct {
		name     string
		pod      v1.Pod
		ctr      string // the container's name (default the first)
		capacity int64
		want     int64
	}{
		{name: "best effort", pod: v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}},
			capacity: 10 * gi, want: 1000},
		{name: "guaranteed", pod: v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{guaranteed}}},
			capacity: 10 * gi, want: -997},
		// 1000 - 1000*1Gi/10Gi = 900
		{name: "burstable 1Gi of 10Gi", pod: v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{oomCtr("a", "1Gi")}}},
			capacity: 10 * gi, want: 900},
		// 1000 - 1000*3Gi/10Gi = 700
		{name: "burstable 3Gi of 10Gi", pod: v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{oomCtr("a", "3Gi")}}},
			capacity: 10 * gi, want: 700},
		// 1000*1Gi/3Gi = 333 (integer division): 667
		{name: "burstable 1Gi of 3Gi", pod: v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{oomCtr("a", "1Gi")}}},
			capacity: 3 * gi, want: 667},
		// 1000 - 0 = 1000: one below BestEffort
		{name: "burstable without memory request", pod: v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{oomCtr("a", "")}}},
			capacity: 10 * gi, want: 999},
		// 1000 - 1000*10Gi/10Gi = 0: raised to 1000-997
		{name: "burstable requesting the whole machine", pod: v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{oomCtr("a", "10Gi")}}},
			capacity: 10 * gi, want: 3},
		{name: "burstable, capacity unknown", pod: v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{oomCtr("a", "1Gi")}}},
			capacity: 0, want: 999},
		// A static pod of system-node-critical: -997 whatever its class.
		{name: "node critical", pod: v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{ConfigSourceAnnotation: "file"}},
			Spec:       v1.PodSpec{PriorityClassName: SystemNodeCritical, Containers: []v1.Container{oomCtr("a", "1Gi")}}},
			capacity: 10 * gi, want: -997},
		// Critical by priority but of another class: the formula.
		{name: "cluster critical", pod: v1.Pod{Spec: v1.PodSpec{PriorityClassName: "system-cluster-critical", Priority: &prio,
			Containers: []v1.Container{oomCtr("a", "1Gi")}}},
			capacity: 10 * gi, want: 900},
		// The sidecar's own 900 is above the smallest regular container's
		// 1000 - 1000*2Gi/10Gi = 800: 800.
		{name: "sidecar below its regular containers", pod: v1.Pod{Spec: v1.PodSpec{
			InitContainers: []v1.Container{sidecar("1Gi")},
			Containers:     []v1.Container{oomCtr("a", "4Gi"), oomCtr("b", "2Gi")}}},
			ctr: "side", capacity: 10 * gi, want: 800},
		// The sidecar's own 500 is already below 800.
		{name: "sidecar requesting more", pod: v1.Pod{Spec: v1.PodSpec{
			InitContainers: []v1.Container{sidecar("5Gi")},
			Containers:     []v1.Container{oomCtr("a", "4Gi"), oomCtr("b", "2Gi")}}},
			ctr: "side", capacity: 10 * gi, want: 500},
		// A regular container of that pod: its own 600.
		{name: "regular container beside a sidecar", pod: v1.Pod{Spec: v1.PodSpec{
			InitContainers: []v1.Container{sidecar("1Gi")},
			Containers:     []v1.Container{oomCtr("a", "4Gi"), oomCtr("b", "2Gi")}}},
			ctr: "a", capacity: 10 * gi, want: 600},
		// Pod-level request 4Gi, containers 1Gi and none: (4-1)/2 = 1.5Gi
		// each on top: a 1000 - 1000*2.5/10 = 750, b 1000 - 150 = 850.
		{name: "pod-level share, container with a request", pod: podLevelMem("4Gi", oomCtr("a", "1Gi"), oomCtr("b", "")),
			ctr: "a", capacity: 10 * gi, want: 750},
		{name: "pod-level share, container without", pod: podLevelMem("4Gi", oomCtr("a", "1Gi"), oomCtr("b", "")),
			ctr: "b", capacity: 10 * gi, want: 850},
		// Containers requesting more than the pod: no share.
		{name: "pod-level below its containers", pod: podLevelMem("1Gi", oomCtr("a", "2Gi")),
			capacity: 10 * gi, want: 800},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := findCtr(&tc.pod, tc.ctr)
			if got := ContainerOOMScoreAdjust(&tc.pod, c, tc.capacity); got != tc.want {
				t.Errorf("oom_score_adj %d, want %d", got, tc.want)
			}
		})
	}
}

// The container config carries the adjustment (the capacity from
// WithMemoryCapacity), as the resources a resize sends do.
func TestContainerConfigOOMScoreAdj(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{oomCtr("a", "1Gi")}}}
	cfg := ContainerConfig(pod, &pod.Spec.Containers[0], 0, "img", false, WithMemoryCapacity(4<<30))
	if got := cfg.GetLinux().GetResources().GetOomScoreAdj(); got != 750 { // 1000 - 1000*1/4
		t.Fatalf("config oom_score_adj %d, want 750", got)
	}
	if got := ContainerResources(pod, &pod.Spec.Containers[0], 4<<30).GetOomScoreAdj(); got != 750 {
		t.Fatalf("resources oom_score_adj %d, want 750", got)
	}
	be := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "be"}}}}
	if got := ContainerConfig(be, &be.Spec.Containers[0], 0, "img", false).GetLinux().GetResources().GetOomScoreAdj(); got != 1000 {
		t.Fatalf("best-effort oom_score_adj %d, want 1000", got)
	}
}

func podLevelMem(mem string, ctrs ...v1.Container) v1.Pod {
	return v1.Pod{Spec: v1.PodSpec{Containers: ctrs,
		Resources: &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse(mem)}}}}
}

func findCtr(pod *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if name == "" || list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}
