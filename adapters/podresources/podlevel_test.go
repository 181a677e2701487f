package podresources_test

import (
	"context"
	"testing"

	api "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// v1.37 added pod-level cpu_ids and memory to PodResources. actorlet has
// no CPU or memory manager (upstream's none policies), so both are empty
// on the wire for every pod, as are the containers' (List and Get).
func TestPodLevelCPUAndMemoryEmpty(t *testing.T) {
	c := serve(t, node())
	list, err := c.List(context.Background(), &api.ListPodResourcesRequest{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(list.GetPodResources()) == 0 {
		t.Fatal("List: no pods")
	}
	for _, p := range list.GetPodResources() {
		if len(p.GetCpuIds()) != 0 || len(p.GetMemory()) != 0 {
			t.Errorf("pod %s: cpu_ids %v memory %v, want none", p.GetName(), p.GetCpuIds(), p.GetMemory())
		}
		for _, ct := range p.GetContainers() {
			if len(ct.GetCpuIds()) != 0 || len(ct.GetMemory()) != 0 {
				t.Errorf("pod %s container %s: cpu_ids %v memory %v, want none", p.GetName(), ct.GetName(), ct.GetCpuIds(), ct.GetMemory())
			}
		}
	}
	got, err := c.Get(context.Background(), &api.GetPodResourcesRequest{PodName: "gpu-pod", PodNamespace: "default"})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if pr := got.GetPodResources(); pr.GetName() != "gpu-pod" || len(pr.GetCpuIds()) != 0 || len(pr.GetMemory()) != 0 {
		t.Errorf("Get gpu-pod: %v", pr)
	}
}
