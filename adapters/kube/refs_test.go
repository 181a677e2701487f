package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/actorlet/actorlet/internal/actortest"
)

// openWatches counts the watches the fake API server holds open, by
// resource/namespace.
type openWatches struct {
	mu   sync.Mutex
	open map[string]int
}

func (o *openWatches) add(key string, d int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.open[key] += d
}

func (o *openWatches) count(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.open[key]
}

type countedWatch struct {
	watch.Interface
	once  sync.Once
	stopf func()
}

func (w *countedWatch) Stop() {
	w.once.Do(w.stopf)
	w.Interface.Stop()
}

// fakeAPI is a fake clientset holding objs whose watches are counted.
func fakeAPI(t *testing.T, objs ...runtime.Object) (*fake.Clientset, *openWatches) {
	t.Helper()
	cs := fake.NewClientset(objs...)
	ow := &openWatches{open: map[string]int{}}
	cs.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := cs.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		key := action.GetResource().Resource + "/" + action.GetNamespace() + "/" + opts.FieldSelector
		ow.add(key, 1)
		return true, &countedWatch{Interface: w, stopf: func() { ow.add(key, -1) }}, nil
	})
	return cs, ow
}

func projectedPod(uid, ns string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Namespace: ns, Name: uid},
		Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "kube-api-access", VolumeSource: v1.VolumeSource{
			Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
			}},
		}}}},
	}
}

func envPod(uid, ns string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Namespace: ns, Name: uid},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name:    "c",
			EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}}}},
			Env: []v1.EnvVar{{Name: "S", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "creds"}, Key: "k"}}}},
		}}},
	}
}

const rootCA = "configmaps/x/metadata.name=kube-root-ca.crt"

// TestObjectCacheStopsWatchWithLastPod: the watch on kube-root-ca.crt of
// namespace x lives while a pod of the node references it and is stopped
// as soon as the last one is gone (upstream's UnregisterPod), not after the
// idle timeout: the Node authorizer refuses it once the pods (or their
// namespace) are deleted. On the old code the watch stayed open for Idle.
func TestObjectCacheStopsWatchWithLastPod(t *testing.T) {
	tests := []struct {
		name  string
		pods  []*v1.Pod
		read  []string // objects read: configmaps/<name> or secrets/<name>
		steps []func(o *ObjectCache)
		// open is the watches open on kube-root-ca.crt after each step.
		open []int
	}{
		{
			name: "projected volume, two pods",
			pods: []*v1.Pod{projectedPod("a", "x"), projectedPod("b", "x")},
			read: []string{"configmaps/kube-root-ca.crt"},
			steps: []func(o *ObjectCache){
				func(o *ObjectCache) { o.UnregisterPod("a") },
				func(o *ObjectCache) { o.UnregisterPod("b") },
			},
			open: []int{1, 0},
		},
		{
			name: "env and envFrom",
			pods: []*v1.Pod{envPod("a", "x")},
			read: []string{"configmaps/kube-root-ca.crt", "secrets/creds"},
			steps: []func(o *ObjectCache){
				func(o *ObjectCache) { o.UnregisterPod("a") },
			},
			open: []int{0},
		},
		{
			name: "pod updated without the reference",
			pods: []*v1.Pod{projectedPod("a", "x")},
			read: []string{"configmaps/kube-root-ca.crt"},
			steps: []func(o *ObjectCache){
				func(o *ObjectCache) {
					p := projectedPod("a", "x")
					p.Spec.Volumes = nil
					o.RegisterPod(p)
				},
			},
			open: []int{0},
		},
		{
			name: "registered twice, unregistered once",
			pods: []*v1.Pod{projectedPod("a", "x"), projectedPod("a", "x")},
			read: []string{"configmaps/kube-root-ca.crt"},
			steps: []func(o *ObjectCache){
				func(o *ObjectCache) { o.UnregisterPod("a") },
			},
			open: []int{0},
		},
		{
			name: "another namespace's pod keeps nothing here",
			pods: []*v1.Pod{projectedPod("a", "x"), projectedPod("b", "y")},
			read: []string{"configmaps/kube-root-ca.crt"},
			steps: []func(o *ObjectCache){
				func(o *ObjectCache) { o.UnregisterPod("a") },
			},
			open: []int{0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, ow := fakeAPI(t,
				&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": "CA"}},
				&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "creds"}, Data: map[string][]byte{"k": []byte("v")}})
			o := NewForClientset(cs, "n").NewObjectCache(time.Hour)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for _, p := range tt.pods {
				o.RegisterPod(p)
			}
			for _, r := range tt.read {
				var err error
				if name, ok := strings.CutPrefix(r, "configmaps/"); ok {
					var cm *v1.ConfigMap
					cm, err = o.ConfigMap(ctx, "x", name)
					if err == nil && cm.Data["ca.crt"] != "CA" {
						t.Fatalf("configmap %s: %v", name, cm.Data)
					}
				} else if name, ok := strings.CutPrefix(r, "secrets/"); ok {
					_, err = o.Secret(ctx, "x", name)
				}
				if err != nil {
					t.Fatalf("read %s: %v", r, err)
				}
			}
			actortest.Eventually(t, "the watch on kube-root-ca.crt", func() bool { return ow.count(rootCA) == 1 })
			for i, step := range tt.steps {
				step(o)
				want := tt.open[i]
				actortest.Eventually(t, fmt.Sprintf("%d watches on kube-root-ca.crt after step %d", want, i), func() bool { return ow.count(rootCA) == want })
			}
			if slices.Contains(tt.read, "secrets/creds") {
				actortest.Eventually(t, "no watch on the secret", func() bool { return ow.count("secrets/x/metadata.name=creds") == 0 })
			}
			o.mu.Lock()
			n, refs := len(o.watches), len(o.refs["configmaps/x/kube-root-ca.crt"])
			o.mu.Unlock()
			if n != 0 || refs != 0 {
				t.Fatalf("cache keeps %d watches, %d references to kube-root-ca.crt in x; want none", n, refs)
			}
		})
	}
}

// TestObjectCacheKeepsWatchForReadInFlight: the last pod goes while a read
// of the object waits for its first list: the read still gets the object,
// and the watch is stopped right after it.
func TestObjectCacheKeepsWatchForReadInFlight(t *testing.T) {
	cs, ow := fakeAPI(t, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": "CA"}})
	listing := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	cs.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(listing) })
		<-release
		return false, nil, nil
	})
	o := NewForClientset(cs, "n").NewObjectCache(time.Hour)
	o.RegisterPod(projectedPod("a", "x"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type result struct {
		cm  *v1.ConfigMap
		err error
	}
	got := make(chan result, 1)
	go func() {
		cm, err := o.ConfigMap(ctx, "x", "kube-root-ca.crt")
		got <- result{cm, err}
	}()
	<-listing
	o.UnregisterPod("a")
	o.mu.Lock()
	kept := len(o.watches)
	o.mu.Unlock()
	if kept != 1 {
		t.Fatalf("%d watches while a read is in flight, want it kept", kept)
	}
	close(release)
	r := <-got
	if r.err != nil || r.cm.Data["ca.crt"] != "CA" {
		t.Fatalf("read in flight: %v, %v", r.cm, r.err)
	}
	o.mu.Lock()
	n := len(o.watches)
	o.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d watches after the read, want none", n)
	}
	actortest.Eventually(t, "no watch on kube-root-ca.crt", func() bool { return ow.count(rootCA) == 0 })
}

// TestObjectCacheWatchPodsRegisters: the pods the API source sees are
// registered, and a pod deleted from the API server releases its objects.
func TestObjectCacheWatchPodsRegisters(t *testing.T) {
	p := projectedPod("a", "x")
	p.Spec.NodeName = "n"
	cs, ow := fakeAPI(t, p, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "kube-root-ca.crt"}})
	o := NewForClientset(cs, "n").NewObjectCache(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	seen := map[types.UID]bool{}
	go o.WatchPods(ctx, func(p *v1.Pod) {
		mu.Lock()
		seen[p.UID] = true
		mu.Unlock()
	}, func(p *v1.Pod) {
		mu.Lock()
		delete(seen, p.UID)
		mu.Unlock()
	}, func() {})
	actortest.Eventually(t, "the pod upserted", func() bool { mu.Lock(); defer mu.Unlock(); return seen["a"] })
	if _, err := o.ConfigMap(ctx, "x", "kube-root-ca.crt"); err != nil {
		t.Fatal(err)
	}
	actortest.Eventually(t, "the watch on kube-root-ca.crt", func() bool { return ow.count(rootCA) == 1 })
	if err := cs.CoreV1().Pods("x").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	actortest.Eventually(t, "the pod removed", func() bool { mu.Lock(); defer mu.Unlock(); return !seen["a"] })
	actortest.Eventually(t, "no watch on kube-root-ca.crt", func() bool { return ow.count(rootCA) == 0 })
}
