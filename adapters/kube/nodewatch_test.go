package kube

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// WatchNode passes on the Node when it appears and when its labels,
// taints or allocatable change, not on a heartbeat, and says when it is
// deleted.
func TestWatchNodePassesOnAdmissionChanges(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "1"}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}}
	cs := fake.NewClientset(node)
	var mu sync.Mutex
	var seen []string
	deleted := false
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go NewForClientset(cs, "n1").WatchNode(ctx, func(n *v1.Node) {
		mu.Lock()
		defer mu.Unlock()
		effect := ""
		if len(n.Spec.Taints) > 0 {
			effect = string(n.Spec.Taints[0].Effect)
		}
		seen = append(seen, n.Labels["a"]+"/"+effect)
	}, func() {
		mu.Lock()
		defer mu.Unlock()
		deleted = true
	})
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			ok := cond()
			mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: seen %v", what, seen)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("the Node listed", func() bool { return len(seen) == 1 && seen[0] == "1/" })
	nodes := cs.CoreV1().Nodes()
	update := func(change func(n *v1.Node)) {
		n, err := nodes.Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(n)
		if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update(func(n *v1.Node) {
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	})
	update(func(n *v1.Node) { n.Labels["a"] = "2" })
	wait("the label change", func() bool { return len(seen) == 2 && seen[1] == "2/" })
	update(func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoExecute}} })
	wait("the taint", func() bool { return len(seen) == 3 && seen[2] == "2/NoExecute" })
	if err := nodes.Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("the delete", func() bool { return deleted })
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 {
		t.Fatalf("the heartbeat was passed on: %v", seen)
	}
}
