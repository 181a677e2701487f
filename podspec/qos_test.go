package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func res(cpu, mem string) v1.ResourceList {
	l := v1.ResourceList{}
	if cpu != "" {
		l[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return l
}

func podWith(init []v1.ResourceRequirements, ctrs ...v1.ResourceRequirements) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"}}
	for _, r := range init {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: "init", Resources: r})
	}
	for _, r := range ctrs {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "app", Resources: r})
	}
	return p
}

func TestQOSClassAndCgroupParent(t *testing.T) {
	tests := []struct {
		name       string
		pod        *v1.Pod
		want       v1.PodQOSClass
		wantCgroup string
	}{
		{name: "nothing set", pod: podWith(nil, v1.ResourceRequirements{}),
			want: v1.PodQOSBestEffort, wantCgroup: "/kubepods/besteffort/podu1"},
		{name: "limits only, requests not defaulted yet", pod: podWith(nil, v1.ResourceRequirements{Limits: res("1", "1Gi")}),
			want: v1.PodQOSBurstable, wantCgroup: "/kubepods/burstable/podu1"},
		{name: "equal requests and limits", pod: podWith(nil, v1.ResourceRequirements{Requests: res("500m", "64Mi"), Limits: res("500m", "64Mi")}),
			want: v1.PodQOSGuaranteed, wantCgroup: "/kubepods/podu1"},
		{name: "requests below limits", pod: podWith(nil, v1.ResourceRequirements{Requests: res("250m", "64Mi"), Limits: res("500m", "64Mi")}),
			want: v1.PodQOSBurstable, wantCgroup: "/kubepods/burstable/podu1"},
		{name: "cpu limit only", pod: podWith(nil, v1.ResourceRequirements{Limits: res("1", "")}),
			want: v1.PodQOSBurstable, wantCgroup: "/kubepods/burstable/podu1"},
		{name: "one container best effort", pod: podWith(nil, v1.ResourceRequirements{Requests: res("1", "1Gi"), Limits: res("1", "1Gi")}, v1.ResourceRequirements{}),
			want: v1.PodQOSBurstable, wantCgroup: "/kubepods/burstable/podu1"},
		{name: "an init container counts", pod: podWith([]v1.ResourceRequirements{{Requests: res("100m", "")}}, v1.ResourceRequirements{Requests: res("1", "1Gi"), Limits: res("1", "1Gi")}),
			want: v1.PodQOSBurstable, wantCgroup: "/kubepods/burstable/podu1"},
		{name: "zero quantities are ignored", pod: podWith(nil, v1.ResourceRequirements{Requests: res("0", "0")}),
			want: v1.PodQOSBestEffort, wantCgroup: "/kubepods/besteffort/podu1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := QOSClass(tt.pod); got != tt.want {
				t.Errorf("QOSClass = %s, want %s", got, tt.want)
			}
			if got := CgroupParent(tt.pod, CgroupDriverCgroupfs); got != tt.wantCgroup {
				t.Errorf("CgroupParent = %s, want %s", got, tt.wantCgroup)
			}
		})
	}
}

func TestPodLogDir(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"}}
	tests := []struct{ name, root, want string }{
		{name: "upstream layout", root: "/var/log/pods", want: "/var/log/pods/ns_web_u1"},
		{name: "relative root", root: "logs", want: "logs/ns_web_u1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodLogDir(tt.root, p); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestIsExtendedResource(t *testing.T) {
	for _, tt := range []struct {
		name v1.ResourceName
		want bool
	}{
		{"nvidia.com/gpu", true}, {"example.com/foo", true},
		{"cpu", false}, {"memory", false}, {"hugepages-2Mi", false}, {"ephemeral-storage", false},
		{"kubernetes.io/something", false}, {"node.kubernetes.io/x", false}, {"requests.nvidia.com/gpu", false},
	} {
		t.Run(string(tt.name), func(t *testing.T) {
			if got := IsExtendedResource(tt.name); got != tt.want {
				t.Fatalf("IsExtendedResource(%s) = %v", tt.name, got)
			}
		})
	}
}

// TestPodResource checks the flags of the one aggregation behind
// PodRequest, PodMemoryLimit and the eviction's pod ephemeral-storage limit.
func TestPodResource(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	ctr := func(limit string) v1.Container {
		c := v1.Container{Name: "c"}
		if limit != "" {
			c.Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(limit)}
		}
		return c
	}
	sidecar := ctr("1Gi")
	sidecar.RestartPolicy = &always
	overhead := v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("1Mi")}
	tests := []struct {
		name            string
		init, main      []v1.Container
		overhead        v1.ResourceList
		want            string
		wantAny, wantAl bool
	}{
		{name: "none set: no overhead added to a limit", main: []v1.Container{ctr("")}, overhead: overhead, want: "0"},
		{name: "one of two set", main: []v1.Container{ctr("2Gi"), ctr("")}, want: "2Gi", wantAny: true},
		{name: "a zero limit is set, not declared", main: []v1.Container{ctr("0")}, want: "0", wantAny: true},
		{name: "all set, with overhead", main: []v1.Container{ctr("2Gi"), ctr("1Gi")}, overhead: overhead, want: "3073Mi", wantAny: true, wantAl: true},
		{name: "largest init container wins", init: []v1.Container{ctr("5Gi")}, main: []v1.Container{ctr("1Gi")}, want: "5Gi", wantAny: true, wantAl: true},
		{name: "sidecars add to the containers and to later init containers", init: []v1.Container{sidecar, ctr("3Gi")}, main: []v1.Container{ctr("1Gi")},
			want: "4Gi", wantAny: true, wantAl: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &v1.Pod{Spec: v1.PodSpec{InitContainers: tt.init, Containers: tt.main, Overhead: tt.overhead}}
			got, anySet, all := PodResource(p, v1.ResourceEphemeralStorage, true)
			if got.Cmp(resource.MustParse(tt.want)) != 0 || anySet != tt.wantAny || all != tt.wantAl {
				t.Fatalf("PodResource = %s, any %v, all %v; want %s, %v, %v", got.String(), anySet, all, tt.want, tt.wantAny, tt.wantAl)
			}
		})
	}
}

// TestQOSClassAgreesWithTheMapForm: QOSClass sums in place; every mix of
// requests and limits (absent, zero, small, large) over two containers and
// an init container classifies as upstream's map-based form does.
func TestQOSClassAgreesWithTheMapForm(t *testing.T) {
	values := []string{"", "0", "100m", "1"}
	var lists []v1.ResourceList
	for _, cpu := range values {
		for _, mem := range values {
			if mem == "100m" {
				mem = "64Mi"
			}
			lists = append(lists, res(cpu, mem))
		}
	}
	n := 0
	for i, a := range lists {
		for j, b := range lists {
			for k, c := range lists {
				if (i+j+k)%3 != 0 { // a third of the mixes keeps the test fast
					continue
				}
				pod := podWith([]v1.ResourceRequirements{{Requests: c, Limits: c}},
					v1.ResourceRequirements{Requests: a, Limits: b}, v1.ResourceRequirements{Requests: b, Limits: b})
				if got, want := QOSClass(pod), qosMapForm(pod); got != want {
					t.Fatalf("requests %v limits %v init %v: QOSClass %s, want %s", a, b, c, got, want)
				}
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("no case ran")
	}
}

// qosMapForm is upstream's ComputePodQOS (pod-level resources aside), as
// QOSClass was written before it summed in place.
func qosMapForm(pod *v1.Pod) v1.PodQOSClass {
	requests, limits := v1.ResourceList{}, v1.ResourceList{}
	zero := resource.MustParse("0")
	isGuaranteed := true
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for name, q := range c.Resources.Requests {
			if (name == v1.ResourceCPU || name == v1.ResourceMemory) && q.Cmp(zero) == 1 {
				acc := requests[name]
				acc.Add(q)
				requests[name] = acc
			}
		}
		complete := 0
		for name, q := range c.Resources.Limits {
			if (name == v1.ResourceCPU || name == v1.ResourceMemory) && q.Cmp(zero) == 1 {
				complete++
				acc := limits[name]
				acc.Add(q)
				limits[name] = acc
			}
		}
		if complete < 2 {
			isGuaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if isGuaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				isGuaranteed = false
				break
			}
		}
	}
	if isGuaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}
