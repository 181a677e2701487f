package node

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/messages"
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
	allocatable := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")}
	var ad admission
	ad.track(pod("1", "1500m", "512Mi"), messages.SourceFile, 1)
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
			reason, msg := ad.fits(tt.pod, 0, allocatable)
			if reason != tt.reason {
				t.Fatalf("reason %q (%s), want %q", reason, msg, tt.reason)
			}
		})
	}
}

func TestPredicates(t *testing.T) {
	withPorts := func(uid string, ports ...v1.ContainerPort) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Ports: ports}}}}
	}
	withSpec := func(edit func(*v1.PodSpec)) *v1.Pod {
		p := withPorts("u-x")
		edit(&p.Spec)
		return p
	}
	affinity := func(terms ...v1.NodeSelectorTerm) func(*v1.PodSpec) {
		return func(s *v1.PodSpec) {
			s.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms}}}
		}
	}
	expr := func(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorTerm {
		return v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	a := &Actor{node: newNodeStatus("n1", map[string]string{
		"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux", "disk": "ssd", "cores": "8"})}
	web := withPorts("u-web", v1.ContainerPort{ContainerPort: 80, HostPort: 8080})
	dns := withPorts("u-dns", v1.ContainerPort{ContainerPort: 53, HostPort: 53, HostIP: "127.0.0.1", Protocol: v1.ProtocolUDP})
	a.admitted.track(web, messages.SourceFile, 1)
	a.admitted.track(dns, messages.SourceFile, 1)
	tests := []struct {
		name   string
		pod    *v1.Pod
		reason string
	}{
		{name: "no constraints", pod: withPorts("u-1")},
		{name: "node selector matches", pod: withSpec(func(s *v1.PodSpec) { s.NodeSelector = map[string]string{"disk": "ssd"} })},
		{name: "node selector does not match", pod: withSpec(func(s *v1.PodSpec) { s.NodeSelector = map[string]string{"disk": "hdd"} }), reason: ReasonNodeAffinity},
		{name: "node selector on a missing label", pod: withSpec(func(s *v1.PodSpec) { s.NodeSelector = map[string]string{"gpu": ""} }), reason: ReasonNodeAffinity},
		{name: "os selector does not match", pod: withSpec(func(s *v1.PodSpec) { s.NodeSelector = map[string]string{"kubernetes.io/os": "windows"} }), reason: ReasonOSSelector},
		{name: "os field does not match", pod: withSpec(func(s *v1.PodSpec) { s.OS = &v1.PodOS{Name: "windows"} }), reason: ReasonOSNotSupported},
		{name: "affinity In", pod: withSpec(affinity(expr("disk", v1.NodeSelectorOpIn, "ssd", "nvme")))},
		{name: "affinity NotIn", pod: withSpec(affinity(expr("disk", v1.NodeSelectorOpNotIn, "ssd"))), reason: ReasonNodeAffinity},
		{name: "affinity Gt", pod: withSpec(affinity(expr("cores", v1.NodeSelectorOpGt, "4")))},
		{name: "affinity Lt fails", pod: withSpec(affinity(expr("cores", v1.NodeSelectorOpLt, "4"))), reason: ReasonNodeAffinity},
		{name: "affinity DoesNotExist", pod: withSpec(affinity(expr("gpu", v1.NodeSelectorOpDoesNotExist)))},
		{name: "terms are ORed", pod: withSpec(affinity(expr("disk", v1.NodeSelectorOpIn, "hdd"), expr("cores", v1.NodeSelectorOpExists)))},
		{name: "an empty term matches nothing", pod: withSpec(affinity(v1.NodeSelectorTerm{})), reason: ReasonNodeAffinity},
		{name: "matchFields on the node name", pod: withSpec(affinity(v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n1"}}}}))},
		{name: "matchFields on another node", pod: withSpec(affinity(v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n2"}}}})), reason: ReasonNodeAffinity},
		{name: "unknown operator matches nothing", pod: withSpec(affinity(expr("disk", "Like", "ssd"))), reason: ReasonNodeAffinity},
		{name: "host port taken", pod: withPorts("u-2", v1.ContainerPort{ContainerPort: 8000, HostPort: 8080}), reason: ReasonNodePorts},
		{name: "same port, other protocol", pod: withPorts("u-3", v1.ContainerPort{ContainerPort: 8000, HostPort: 8080, Protocol: v1.ProtocolUDP})},
		{name: "other host IP of a specific binding", pod: withPorts("u-4", v1.ContainerPort{ContainerPort: 53, HostPort: 53, HostIP: "127.0.0.2", Protocol: v1.ProtocolUDP})},
		{name: "wildcard against a specific binding", pod: withPorts("u-5", v1.ContainerPort{ContainerPort: 53, HostPort: 53, Protocol: v1.ProtocolUDP}), reason: ReasonNodePorts},
		{name: "container port without host port", pod: withPorts("u-6", v1.ContainerPort{ContainerPort: 8080})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, msg := a.predicates(tt.pod, messages.SourceAPI)
			if reason != tt.reason {
				t.Fatalf("reason %q (%s), want %q", reason, msg, tt.reason)
			}
			if reason != "" && msg == "" {
				t.Fatal("a rejection without a message")
			}
		})
	}
	// A pod that goes frees its ports.
	a.admitted.track(web, messages.SourceFile, -1)
	if reason, _ := a.predicates(withPorts("u-7", v1.ContainerPort{ContainerPort: 80, HostPort: 8080}), messages.SourceAPI); reason != "" {
		t.Fatalf("port still taken after its pod went: %s", reason)
	}
}

// The admission part's tally: every share tracked is taken back by its
// untrack, to nothing.
func TestAdmissionTrackBalances(t *testing.T) {
	ad := admission{extended: true}
	web := withRequests("web", "cpu", "500m", "memory", "1Gi")
	web.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	api := gpuPod("api", 2)
	ad.track(web, messages.SourceFile, 1)
	ad.track(api, messages.SourceAPI, 1)
	if ad.active() != 2 || ad.nStatic != 1 || ad.nAPI != 1 {
		t.Fatalf("counts: active %d static %d api %d", ad.active(), ad.nStatic, ad.nAPI)
	}
	if cpu := ad.requested[v1.ResourceCPU]; cpu.MilliValue() != 500 {
		t.Fatalf("cpu requested %s", cpu.String())
	}
	if ad.extUsed[gpu] != 2 || len(ad.hostPorts) != 1 || len(ad.names) != 2 {
		t.Fatalf("gpus %v, host ports %v, names %v", ad.extUsed, ad.hostPorts, ad.names)
	}
	ad.track(web, messages.SourceFile, -1)
	ad.track(api, messages.SourceAPI, -1)
	if ad.active() != 0 || ad.nStatic != 0 || ad.nAPI != 0 || len(ad.extUsed) != 0 || len(ad.hostPorts) != 0 || len(ad.names) != 0 {
		t.Fatalf("left after untracking everything: %+v", ad)
	}
	for name, q := range ad.requested {
		if !q.IsZero() {
			t.Fatalf("%s still requested: %s", name, q.String())
		}
	}
}

func TestAdmissionFitsMaxPods(t *testing.T) {
	var ad admission
	ad.track(mkPod("a", "img"), messages.SourceAPI, 1)
	if reason, msg := ad.fits(mkPod("b", "img"), 1, nil); reason != ReasonOutOfPods || msg == "" {
		t.Fatalf("reason %q %q, want %s", reason, msg, ReasonOutOfPods)
	}
	if reason, _ := ad.fits(mkPod("b", "img"), 2, nil); reason != "" {
		t.Fatalf("refused under the bound: %s", reason)
	}
	if reason, _ := ad.fits(mkPod("b", "img"), 0, nil); reason != "" {
		t.Fatalf("refused without a bound: %s", reason)
	}
}

// Extended resources are counted only when a DevicesActor is wired, and
// checked against its allocatable (a resource it does not know has none).
func TestAdmissionExtended(t *testing.T) {
	off := admission{}
	off.track(gpuPod("a", 1), messages.SourceAPI, 1)
	if len(off.extUsed) != 0 {
		t.Fatalf("counted without devices: %v", off.extUsed)
	}
	ad := admission{extended: true}
	ad.track(gpuPod("a", 1), messages.SourceAPI, 1)
	alloc := map[v1.ResourceName]int64{gpu: 2}
	if reason, msg := ad.fitsExtended(gpuPod("b", 1), alloc); reason != "" {
		t.Fatalf("one free GPU refused: %s %s", reason, msg)
	}
	if reason, _ := ad.fitsExtended(gpuPod("b", 2), alloc); reason != "OutOf"+string(gpu) {
		t.Fatalf("reason %q, want OutOf%s", reason, gpu)
	}
	if reason, _ := ad.fitsExtended(gpuPod("b", 1), nil); reason != "OutOf"+string(gpu) {
		t.Fatalf("an unknown resource: reason %q, want OutOf%s", reason, gpu)
	}
	if reason, _ := ad.fitsExtended(mkPod("c", "img"), nil); reason != "" {
		t.Fatalf("a pod without extended resources refused: %s", reason)
	}
}

func TestAdmissionCompactKeepsNames(t *testing.T) {
	var ad admission
	pods := make([]*v1.Pod, 1000)
	for i := range pods {
		pods[i] = named(fmt.Sprint(i), "default", fmt.Sprint("p", i))
		ad.track(pods[i], messages.SourceAPI, 1)
	}
	ad.compact()
	for _, p := range pods[:990] {
		ad.track(p, messages.SourceAPI, -1)
	}
	ad.compact()
	if len(ad.names) != 10 {
		t.Fatalf("%d names left, want 10", len(ad.names))
	}
	if holder, ok := ad.nameHolder(named("other", "default", "p995")); !ok || holder != "995" {
		t.Fatalf("holder of p995 %q %v", holder, ok)
	}
}

// withRequests is mkPod with container requests ("cpu", "2", "memory", ...).
func withRequests(uid string, kv ...string) *v1.Pod {
	p := mkPod(uid, "img:1")
	req := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		req[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	p.Spec.Containers[0].Resources.Requests = req
	return p
}

// Pods of every source are admitted against the node's allocatable, with
// upstream's reasons and messages; a pod that fits runs. Before issue 9
// only API pods were checked, and only for cpu and memory: every rejection
// below ran.
func TestStandaloneResourceAdmission(t *testing.T) {
	h := newHarness(t, Config{NodeName: "n1", MaxPods: 4, Allocatable: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"),
		v1.ResourceEphemeralStorage: resource.MustParse("10Gi")}})
	h.run([]step{
		{
			name: "what does not fit is rejected, whatever its source; what fits runs",
			do: sendAll(
				set(messages.SourceFile, withRequests("huge-cpu", "cpu", "100000000"), withRequests("fits", "cpu", "3", "memory", "1Gi", "ephemeral-storage", "1Gi")),
				add(messages.SourcePush, withRequests("huge-mem", "memory", "999Pi")),
				set(messages.SourceURL, withRequests("huge-disk", "ephemeral-storage", "20Gi")),
				add(messages.SourcePush, withRequests("too-much-with-fits", "cpu", "1500m")),
			),
			pods: map[string]string{"fits": "SyncPod img:1", "huge-cpu": "", "huge-mem": "", "huge-disk": "", "too-much-with-fits": ""},
			status: []string{"update huge-cpu Failed OutOfcpu", "update huge-mem Failed OutOfmemory",
				"update huge-disk Failed OutOfephemeral-storage", "update too-much-with-fits Failed OutOfcpu"},
		},
	})
	wantMsg := map[string]string{
		"huge-cpu":           "Node didn't have enough resource: cpu, requested: 100000000000, used: 0, capacity: 4000",
		"huge-mem":           "Node didn't have enough resource: memory, requested: 1124774006935781376, used: 1073741824, capacity: 8589934592",
		"huge-disk":          "Node didn't have enough resource: ephemeral-storage, requested: 21474836480, used: 1073741824, capacity: 10737418240",
		"too-much-with-fits": "Node didn't have enough resource: cpu, requested: 1500, used: 3000, capacity: 4000",
	}
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	for uid, want := range wantMsg {
		p := h.rec.last[types.UID(uid)]
		if p == nil {
			t.Errorf("pod %s: no status", uid)
		} else if p.Status.Message != want {
			t.Errorf("pod %s: status %v, want message %q", uid, p.Status, want)
		}
	}
}

// The pod count is checked for every source too, before the resources.
func TestOutOfPodsBeforeResources(t *testing.T) {
	h := newHarness(t, Config{NodeName: "n1", MaxPods: 1, Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}})
	h.run([]step{{
		name:   "the second pod is OutOfpods even though it does not fit either",
		do:     sendAll(add(messages.SourcePush, withRequests("a", "cpu", "1")), add(messages.SourcePush, withRequests("b", "cpu", "2"))),
		pods:   map[string]string{"a": "SyncPod img:1", "b": ""},
		status: []string{"update b Failed OutOfpods"},
	}})
}

func TestPodRequest(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	ctr := func(cpu string, sidecar bool) v1.Container {
		c := v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}
		if sidecar {
			c.RestartPolicy = &always
		}
		return c
	}
	tests := []struct {
		name string
		spec v1.PodSpec
		want string
	}{
		{name: "sum of containers", spec: v1.PodSpec{Containers: []v1.Container{ctr("1", false), ctr("500m", false)}}, want: "1500m"},
		{name: "a bigger init container", spec: v1.PodSpec{InitContainers: []v1.Container{ctr("2", false)}, Containers: []v1.Container{ctr("1", false)}}, want: "2"},
		{name: "sidecars run with the containers", spec: v1.PodSpec{InitContainers: []v1.Container{ctr("1", true)}, Containers: []v1.Container{ctr("1", false)}}, want: "2"},
		{name: "an init container after a sidecar", spec: v1.PodSpec{InitContainers: []v1.Container{ctr("1", true), ctr("2", false)}, Containers: []v1.Container{ctr("500m", false)}}, want: "3"},
		{name: "overhead", spec: v1.PodSpec{Containers: []v1.Container{ctr("1", false)}, Overhead: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")}}, want: "1250m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := podRequest(&v1.Pod{Spec: tt.spec}, v1.ResourceCPU)
			if got.Cmp(resource.MustParse(tt.want)) != 0 {
				t.Fatalf("request %s, want %s", got.String(), tt.want)
			}
		})
	}
}

// A source's set is admitted oldest first (config.seen, or the creation
// time), whatever its order: after a NodeActor restart the pods that ran
// get the room again, not a pod rejected before that sorts first.
func TestAdmissionOldestFirst(t *testing.T) {
	seen := func(p *v1.Pod, at string) *v1.Pod {
		p.Annotations = map[string]string{seenAnnotation: at}
		return p
	}
	h := newHarness(t, Config{NodeName: "n1", Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}})
	h.run([]step{{
		name: "b, seen first, runs; a, seen later, is rejected",
		do: sendAll(set(messages.SourceFile,
			seen(withRequests("a", "cpu", "1"), "2026-01-01T10:00:00.5Z"),
			seen(withRequests("b", "cpu", "1"), "2026-01-01T10:00:00.1Z"))),
		pods:   map[string]string{"a": "", "b": "SyncPod img:1"},
		status: []string{"update a Failed OutOfcpu"},
	}})
	pods := []*v1.Pod{mkPod("x", "i"), seen(mkPod("y", "i"), "2026-01-01T10:00:00Z"), mkPod("z", "i")}
	pods[0].CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC))
	var got []types.UID
	for _, p := range admissionOrder(pods) {
		got = append(got, p.UID)
	}
	if fmt.Sprint(got) != "[y x z]" {
		t.Fatalf("order %v, want [y x z] (oldest first, no time last)", got)
	}
}
