package node

import (
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/actorlet/actorlet/messages"
)

// The live Node's labels join the configured and the devices' ones, which
// win (the NodeStatusActor writes them onto the Node); a delete goes back
// to the configured ones.
func TestNodeStatusLiveLabels(t *testing.T) {
	configured := map[string]string{"disk": "ssd", v1.LabelOSStable: "linux"}
	n := newNodeStatus("n1", configured)
	n.setDevices(&messages.DeviceCapacity{Labels: map[string]string{"gpu.product": "H100"}})
	n.setNode(&messages.NodeObject{Labels: map[string]string{"team": "a", "disk": "hdd", "gpu.product": "old"}})
	want := map[string]string{"team": "a", "disk": "ssd", "gpu.product": "H100", v1.LabelOSStable: "linux"}
	if !maps.Equal(n.labels(), want) {
		t.Fatalf("labels %v, want %v", n.labels(), want)
	}
	p := mkPod("a", "img")
	p.Spec.NodeSelector = map[string]string{"team": "a"}
	if reason, msg := n.selects(p); reason != "" {
		t.Fatalf("a pod selecting the live label refused: %s %s", reason, msg)
	}
	n.setNode(&messages.NodeObject{Labels: map[string]string{"team": "b"}})
	if reason, _ := n.selects(p); reason != ReasonNodeAffinity {
		t.Fatalf("reason %q after the label changed, want %s", reason, ReasonNodeAffinity)
	}
	n.setNode(&messages.NodeObject{Deleted: true})
	if _, ok := n.labels()["team"]; ok || !n.known() {
		t.Fatalf("after the delete: labels %v, known %v", n.labels(), n.known())
	}
	if len(configured) != 2 {
		t.Fatal("the configured labels were written")
	}
}

// NoExecute taints refuse API pods that do not tolerate them; NoSchedule
// taints and static pods are not checked, as upstream.
func TestNodeStatusTaints(t *testing.T) {
	n := newNodeStatus("n1", nil)
	p := mkPod("a", "img")
	if reason, _ := n.admitTaints(p, messages.SourceAPI); reason != "" {
		t.Fatalf("refused before any Node: %s", reason)
	}
	n.setNode(&messages.NodeObject{Taints: []v1.Taint{
		{Key: "dedicated", Value: "db", Effect: v1.TaintEffectNoSchedule},
		{Key: "maintenance", Value: "yes", Effect: v1.TaintEffectNoExecute},
	}})
	reason, msg := n.admitTaints(p, messages.SourceAPI)
	if reason != ReasonTaintToleration || msg != "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate" {
		t.Fatalf("untolerated NoExecute: %q %q", reason, msg)
	}
	if reason, _ := n.admitTaints(p, messages.SourceFile); reason != "" {
		t.Fatalf("a static pod refused: %s", reason)
	}
	p.Spec.Tolerations = []v1.Toleration{{Key: "maintenance", Operator: v1.TolerationOpEqual, Value: "yes", Effect: v1.TaintEffectNoExecute}}
	if reason, _ := n.admitTaints(p, messages.SourceAPI); reason != "" {
		t.Fatalf("a tolerating pod refused: %s", reason)
	}
	p.Spec.Tolerations = []v1.Toleration{{Key: "maintenance", Operator: v1.TolerationOpEqual, Value: "no"}}
	if reason, _ := n.admitTaints(p, messages.SourceAPI); reason != ReasonTaintToleration {
		t.Fatalf("a toleration of another value admitted it: %q", reason)
	}
}

// Allocatable and the pod count come from the live Node where it has
// them; the configured list is not written.
func TestNodeStatusLiveAllocatable(t *testing.T) {
	configured := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}
	n := newNodeStatus("n1", nil)
	if got := n.admitAllocatable(configured); !got.Cpu().Equal(resource.MustParse("4")) || n.maxPods(110) != 110 {
		t.Fatalf("before the Node: %v, %d pods", got, n.maxPods(110))
	}
	n.setNode(&messages.NodeObject{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourcePods: resource.MustParse("7")}})
	got := n.admitAllocatable(configured)
	if !got.Cpu().Equal(resource.MustParse("1500m")) || !got.Memory().Equal(resource.MustParse("8Gi")) || n.maxPods(110) != 7 {
		t.Fatalf("live: %v, %d pods", got, n.maxPods(110))
	}
	if !configured.Cpu().Equal(resource.MustParse("4")) {
		t.Fatal("the configured allocatable was written")
	}
}

// In cluster mode API pods wait for the first Node; a label added to the
// Node admits the next pod that selects it; static pods never wait.
func TestLiveNodeAdmission(t *testing.T) {
	var latest *messages.NodeObject
	ev := &fakeEvents{}
	h := newHarness(t, Config{NodeName: "n1", Events: ev, LiveNode: func() *messages.NodeObject { return latest }})
	selecting := func(uid string) *v1.Pod {
		p := mkPod(uid, "img:1")
		p.Spec.NodeSelector = map[string]string{"team": "a"}
		return p
	}
	h.run([]step{
		{
			name: "an API pod waits for the Node, a static pod does not",
			do:   sendAll(set(messages.SourceAPI, mkPod("a", "img:1")), set(messages.SourceFile, mkPod("s", "img:1"))),
			pods: map[string]string{"a": "", "s": "SyncPod img:1"},
		},
		{
			name: "the first Node admits it",
			do:   sendAll(&messages.NodeObject{Labels: map[string]string{"team": "b"}}),
			pods: map[string]string{"a": "SyncPod img:1"},
		},
		{
			name:   "a pod selecting a label the Node lacks is refused",
			do:     sendAll(add(messages.SourceAPI, selecting("b"))),
			pods:   map[string]string{"b": ""},
			status: []string{"update b Failed NodeAffinity"},
		},
		{
			name:   "once the Node is labelled the next one runs",
			do:     sendAll(&messages.NodeObject{Labels: map[string]string{"team": "a"}}, add(messages.SourceAPI, selecting("c"))),
			pods:   map[string]string{"b": "", "c": "SyncPod img:1"},
			status: []string{"update b Failed NodeAffinity"},
		},
	})
	ev.mu.Lock()
	defer ev.mu.Unlock()
	want := "Warning NodeAffinity pod-b: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
	if len(ev.events) != 1 || ev.events[0] != want {
		t.Fatalf("events %q, want the rejection's %q", ev.events, want)
	}
}

// A NodeActor that (re)starts reads the Node already known: API pods are
// admitted at once against its labels.
func TestLiveNodeReadAtStart(t *testing.T) {
	latest := &messages.NodeObject{Labels: map[string]string{"team": "a"}}
	h := newHarness(t, Config{NodeName: "n1", LiveNode: func() *messages.NodeObject { return latest }})
	p := mkPod("a", "img:1")
	p.Spec.NodeSelector = map[string]string{"team": "a"}
	h.run([]step{{
		name: "admitted without waiting, on the Node's label",
		do:   sendAll(set(messages.SourceAPI, p)),
		pods: map[string]string{"a": "SyncPod img:1"},
	}})
}
