package node

import (
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/messages"
)

// The devices' labels join the configured ones, which win; a capacity
// without labels goes back to the configured ones.
func TestNodeStatusLabels(t *testing.T) {
	configured := map[string]string{"disk": "ssd", "gpu.product": "configured"}
	n := newNodeStatus("n1", configured)
	if !maps.Equal(n.labels(), configured) {
		t.Fatalf("labels %v, want the configured ones", n.labels())
	}
	n.setDevices(&messages.DeviceCapacity{Allocatable: map[v1.ResourceName]int64{gpu: 2},
		Labels: map[string]string{"gpu.product": "H100", "gpu.count": "2"}})
	want := map[string]string{"disk": "ssd", "gpu.product": "configured", "gpu.count": "2"}
	if !maps.Equal(n.labels(), want) {
		t.Fatalf("labels %v, want %v", n.labels(), want)
	}
	if n.allocatable[gpu] != 2 {
		t.Fatalf("allocatable %v", n.allocatable)
	}
	if len(configured) != 2 {
		t.Fatal("the configured labels were written")
	}
	n.setDevices(&messages.DeviceCapacity{})
	if !maps.Equal(n.labels(), configured) || n.allocatable != nil {
		t.Fatalf("after a capacity without labels: labels %v, allocatable %v", n.labels(), n.allocatable)
	}
}

func TestNodeStatusSelectsOnDeviceLabels(t *testing.T) {
	n := newNodeStatus("n1", map[string]string{v1.LabelOSStable: "linux"})
	p := mkPod("a", "img")
	p.Spec.NodeSelector = map[string]string{"gpu.product": "H100"}
	if reason, _ := n.selects(p); reason != ReasonNodeAffinity {
		t.Fatalf("reason %q before the devices' labels, want %s", reason, ReasonNodeAffinity)
	}
	n.setDevices(&messages.DeviceCapacity{Labels: map[string]string{"gpu.product": "H100"}})
	if reason, msg := n.selects(p); reason != "" {
		t.Fatalf("refused with the devices' labels: %s %s", reason, msg)
	}
}

func TestNodeStatusPressure(t *testing.T) {
	var n nodeStatus
	if n.setPressure(&messages.NodePressure{}) {
		t.Error("no pressure after none: changed")
	}
	if !n.setPressure(&messages.NodePressure{Memory: true}) {
		t.Error("memory pressure: not changed")
	}
	if n.setPressure(&messages.NodePressure{Memory: true}) {
		t.Error("the same pressure again: changed")
	}
	if !n.setPressure(&messages.NodePressure{Memory: true, PID: true}) {
		t.Error("pid pressure added: not changed")
	}
	got := n.pressureConditions()
	if len(got) != 2 || got[0] != v1.NodeMemoryPressure || got[1] != v1.NodePIDPressure {
		t.Errorf("conditions %v", got)
	}
}
