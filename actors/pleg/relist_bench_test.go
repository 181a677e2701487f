package pleg

import (
	"fmt"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkSteadyRelist is the PLEG's share of one relist of a node with
// 1,000 running pods, none changed since the last relist: the grouping
// (the runtime cache) and the diff. It is paid every relist period.
func BenchmarkSteadyRelist(b *testing.B) {
	m := &relisted{}
	for i := range 1000 {
		uid := fmt.Sprintf("uid-%d", i)
		m.sandboxes = append(m.sandboxes, sandbox("sb-"+uid, uid, runtimeapi.PodSandboxState_SANDBOX_READY))
		m.containers = append(m.containers, container("c-"+uid, uid, runtimeapi.ContainerState_CONTAINER_RUNNING))
	}
	a := &Actor{containers: map[string]record{}, sandboxes: map[string]record{}}
	a.diff(m)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_ = group(m)
		if ev := a.diff(m); len(ev) != 0 {
			b.Fatalf("%d events of a relist that changed nothing", len(ev))
		}
	}
}
