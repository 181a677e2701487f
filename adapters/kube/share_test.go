package kube

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func sharePod(gen int64, image string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", Generation: gen,
			Labels: map[string]string{"app": "a"}, Annotations: map[string]string{"k": "v"}},
		Spec:   v1.PodSpec{NodeName: "node-a", Containers: []v1.Container{{Name: "c", Image: image}}},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
}

// TestSharePodParts: a new version of a stored pod takes the parts that did
// not change from the stored one (the same memory), and keeps its own where
// they changed.
func TestSharePodParts(t *testing.T) {
	tests := []struct {
		name       string
		stored     *v1.Pod
		next       *v1.Pod
		spec, meta bool // shared
	}{
		{name: "status update, same generation: spec and metadata shared",
			stored: sharePod(3, "img:1"), next: func() *v1.Pod { p := sharePod(3, "img:1"); p.Status.Phase = v1.PodRunning; return p }(),
			spec: true, meta: true},
		{name: "spec changed, generation bumped: own spec",
			stored: sharePod(3, "img:1"), next: sharePod(4, "img:2"), spec: false, meta: true},
		{name: "no generation (older API server), same spec: shared",
			stored: sharePod(0, "img:1"), next: sharePod(0, "img:1"), spec: true, meta: true},
		{name: "no generation, spec changed: own spec",
			stored: sharePod(0, "img:1"), next: sharePod(0, "img:2"), spec: false, meta: true},
		{name: "labels changed: own labels",
			stored: sharePod(3, "img:1"), next: func() *v1.Pod { p := sharePod(3, "img:1"); p.Labels["app"] = "b"; return p }(),
			spec: true, meta: false},
		{name: "another pod of the same name: nothing shared",
			stored: sharePod(3, "img:1"), next: func() *v1.Pod { p := sharePod(3, "img:1"); p.UID = "u2"; return p }(),
			spec: false, meta: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := cache.NewStore(cache.MetaNamespaceKeyFunc)
			if err := store.Add(tc.stored); err != nil {
				t.Fatal(err)
			}
			want := tc.next.DeepCopy()
			out, err := sharePodParts(store)(tc.next)
			if err != nil {
				t.Fatal(err)
			}
			got := out.(*v1.Pod)
			if got.Spec.Containers[0].Image != want.Spec.Containers[0].Image || got.Labels["app"] != want.Labels["app"] ||
				got.UID != want.UID || got.Status.Phase != want.Status.Phase {
				t.Fatalf("the new version changed: got %+v, want %+v", got, want)
			}
			if shared := &got.Spec.Containers[0] == &tc.stored.Spec.Containers[0]; shared != tc.spec {
				t.Errorf("spec shared %v, want %v", shared, tc.spec)
			}
			if shared := sameMap(got.Labels, tc.stored.Labels); shared != tc.meta {
				t.Errorf("labels shared %v, want %v", shared, tc.meta)
			}
		})
	}
}

// sameMap: a and b are the same map (a write to one shows in the other).
func sameMap(a, b map[string]string) bool {
	const probe = "\x00probe"
	a[probe] = "x"
	_, same := b[probe]
	delete(a, probe)
	return same
}

// TestWatchPodsSharesTheSpecOfStatusUpdates: through the informer, a pod
// whose status changed comes with the spec of the version before it.
func TestWatchPodsSharesTheSpecOfStatusUpdates(t *testing.T) {
	cs := fake.NewClientset(sharePod(0, "img:1"))
	c := NewForClientset(cs, "node-a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan *v1.Pod, 4)
	go c.WatchPods(ctx, func(p *v1.Pod) { got <- p }, func(*v1.Pod) {}, func() {})
	next := func() *v1.Pod {
		t.Helper()
		select {
		case p := <-got:
			return p
		case <-time.After(30 * time.Second):
			t.Fatal("no pod from the informer")
			return nil
		}
	}
	first := next()
	upd := sharePod(0, "img:1")
	upd.Status.Phase = v1.PodRunning
	if _, err := cs.CoreV1().Pods("ns").UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	second := next()
	if second.Status.Phase != v1.PodRunning {
		t.Fatalf("second version %s, want the status update", second.Status.Phase)
	}
	if &second.Spec.Containers[0] != &first.Spec.Containers[0] {
		t.Errorf("the status update brought its own copy of the unchanged spec")
	}
}
