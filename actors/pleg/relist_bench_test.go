package pleg

import (
	"fmt"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/podspec"
)

// listed is a relist of n running pods, one container each (see protos).
func listed(n int) *relisted { return protos(n).relist(t0) }

// protos is what the full listing of n running pods gives, one container
// each, with the labels and annotations actorlet gives them (as the
// runtime lists them back) and IDs as long as containerd's.
func protos(n int) view {
	var m view
	for i := range n {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("bench-%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("0f0e0d0c-0b0a-0908-0706-%012d", i)),
				Labels: map[string]string{"app": "bench"},
			},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
		}
		sbCfg := podspec.SandboxConfig(pod, 0, "/var/log/pods")
		sbID, cID := fmt.Sprintf("%064x", 2*i), fmt.Sprintf("%064x", 2*i+1)
		m.sandboxes = append(m.sandboxes, &runtimeapi.PodSandbox{
			Id: sbID, Metadata: sbCfg.Metadata, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: 1,
			Labels: sbCfg.Labels, Annotations: sbCfg.Annotations, RuntimeHandler: "runc",
		})
		cCfg := podspec.ContainerConfig(pod, &pod.Spec.Containers[0], 0, "sha256:"+fmt.Sprintf("%064x", 7), false)
		m.containers = append(m.containers, &runtimeapi.Container{
			Id: cID, PodSandboxId: sbID, Metadata: cCfg.Metadata, Image: cCfg.Image, ImageRef: cCfg.Image.Image,
			State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: 2, Labels: cCfg.Labels, Annotations: cCfg.Annotations,
		})
	}
	return m
}

// BenchmarkSteadyRelist is the PLEG's share of one relist of a node with
// 1,000 running pods, none changed since the last relist: the diff and the
// runtime cache's update. It is paid every relist period.
func BenchmarkSteadyRelist(b *testing.B) {
	m := listed(1000)
	a := &Actor{}
	a.cache(m, a.diff(m))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ev := a.diff(m)
		if len(ev) != 0 {
			b.Fatalf("%d events of a relist that changed nothing", len(ev))
		}
		a.cache(m, ev)
	}
}

// BenchmarkRuntimeCacheBytes is what the PLEG keeps between relists per
// pod of a node with 1,000 running pods (its records and the runtime
// cache), against the full listing's protos (listed-B/pod), which it no
// longer keeps, and what it holds of a relist during its diff
// (relist-B/pod). Each iteration is one PLEG's first relist.
func BenchmarkRuntimeCacheBytes(b *testing.B) {
	const n = 1000
	var kept, list, relist float64
	for range b.N {
		before := liveHeap()
		v := protos(n)
		withList := liveHeap()
		m := v.relist(t0) // v is dead past here: the GC in liveHeap frees its lists
		withRelist := liveHeap()
		a := &Actor{}
		a.cache(m, a.diff(m))
		m.sandboxes, m.containers = nil, nil
		after := liveHeap()
		runtime.KeepAlive(a)
		kept += float64(after-before) / n
		list += float64(withList-before) / n
		relist += float64(withRelist-before) / n
	}
	b.ReportMetric(kept/float64(b.N), "kept-B/pod")
	b.ReportMetric(list/float64(b.N), "listed-B/pod")
	b.ReportMetric(relist/float64(b.N), "relist-B/pod")
}

func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
