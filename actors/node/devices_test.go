package node

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/messages"
)

const gpu = v1.ResourceName("nvidia.com/gpu")

// gpuPod asks for n GPUs (limits only, as a manifest may).
func gpuPod(uid string, n int64) *v1.Pod {
	p := mkPod(uid, "img")
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{gpu: *resource.NewQuantity(n, resource.DecimalSI)}
	return p
}

// devicesStub is the DevicesActor as the NodeActor sees it: it records
// what it is told.
type devicesStub struct {
	mu   sync.Mutex
	msgs []string
}

func (d *devicesStub) receive(c actor.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch m := c.Message().(type) {
	case *messages.GetDeviceCapacity:
		d.msgs = append(d.msgs, "capacity?")
	case *messages.ReleaseDevices:
		d.msgs = append(d.msgs, "release "+string(m.UID))
	case *messages.PodsKnown:
		d.msgs = append(d.msgs, "known")
	case barrier:
		close(m.done)
	}
}

func (d *devicesStub) log() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.msgs)
}

func newDevicesHarness(t *testing.T, clk *clocktesting.FakeClock) (*harness, *devicesStub) {
	t.Helper()
	stub := &devicesStub{}
	// The stub is spawned under this name in the harness's system.
	pid := actor.NewPID("nonhost", "devices")
	cfg := Config{NodeName: "n1", Devices: pid, DeviceWait: 10 * time.Second}
	if clk != nil {
		cfg.Clock = clk
	}
	h := newHarnessWith(t, cfg, map[string]actor.ReceiveFunc{"devices": stub.receive})
	h.quiesce()
	h.await(pid, nil)
	return h, stub
}

func TestExtendedResourcesAdmittedAgainstTheDevices(t *testing.T) {
	h, stub := newDevicesHarness(t, nil)
	if got := stub.log(); !slices.Equal(got, []string{"capacity?"}) {
		t.Fatalf("devices actor told %q at start, want the capacity asked", got)
	}
	h.run([]step{
		{
			name: "GPU pods wait until the devices are counted; the plain pod runs at once",
			do:   sendAll(set(messages.SourceFile, gpuPod("a", 1), gpuPod("b", 1), mkPod("c", "img"))),
			pods: map[string]string{"a": "", "b": "", "c": "SyncPod img"},
		},
		{
			name: "a capacity that is not ready yet admits nothing",
			do:   sendAll(&messages.DeviceCapacity{Allocatable: map[v1.ResourceName]int64{gpu: 0}}),
			pods: map[string]string{"a": "", "b": "", "c": "SyncPod img"},
		},
		{
			name:   "one GPU: the first pod runs, the second is OutOfnvidia.com/gpu",
			do:     sendAll(&messages.DeviceCapacity{Allocatable: map[v1.ResourceName]int64{gpu: 1}, Ready: true}),
			pods:   map[string]string{"a": "SyncPod img", "b": "", "c": "SyncPod img"},
			status: []string{"update b Failed OutOfnvidia.com/gpu"},
		},
	})
	if got := h.rec.last["b"].Status.Message; got != "Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 1, capacity: 1" {
		t.Errorf("rejection message %q", got)
	}
	h.terminated("a")
	h.terminated("c")
	h.quiesce()
	h.await(actor.NewPID("nonhost", "devices"), nil)
	if got := stub.log(); !slices.Equal(got, []string{"capacity?", "release a"}) {
		t.Fatalf("devices actor told %q, want the release of a only (c asked for no device)", got)
	}
	h.run([]step{{
		name:   "the GPU is free again: a new pod asking for it runs",
		do:     sendAll(add(messages.SourcePush, gpuPod("d", 1))),
		pods:   map[string]string{"d": "SyncPod img"},
		status: []string{"update b Failed OutOfnvidia.com/gpu", "forget a", "forget c"},
	}})
}

func TestDeviceWaitIsBounded(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	h, _ := newDevicesHarness(t, clk)
	h.run([]step{
		{
			name: "the GPU pod is held while the devices actor says nothing",
			do:   sendAll(set(messages.SourceFile, gpuPod("a", 1), mkPod("c", "img"))),
			pods: map[string]string{"a": "", "c": "SyncPod img"},
		},
		{
			name: "a held pod its source no longer wants is dropped",
			do:   sendAll(set(messages.SourceFile, gpuPod("a", 1), gpuPod("d", 1), mkPod("c", "img")), set(messages.SourceFile, gpuPod("a", 1), mkPod("c", "img"))),
			pods: map[string]string{"a": "", "d": "", "c": "SyncPod img"},
		},
		{
			name:   "after the wait: admitted with no device known",
			do:     func(h *harness) { clk.Step(10 * time.Second) },
			pods:   map[string]string{"a": "", "d": "", "c": "SyncPod img"},
			status: []string{"update a Failed OutOfnvidia.com/gpu"},
		},
	})
}

func TestDeviceLabelsMatchNodeSelectors(t *testing.T) {
	h, _ := newDevicesHarness(t, nil)
	onGPUNode := gpuPod("a", 1)
	onGPUNode.Spec.NodeSelector = map[string]string{"nvidia.com/gpu.present": "true"}
	h.run([]step{{
		name: "a pod selecting the GPU feature discovery label runs once the devices tell it",
		do: sendAll(&messages.DeviceCapacity{Allocatable: map[v1.ResourceName]int64{gpu: 1},
			Labels: map[string]string{"nvidia.com/gpu.present": "true"}, Ready: true},
			set(messages.SourceFile, onGPUNode)),
		pods: map[string]string{"a": "SyncPod img"},
	}})
}

// The device-wait part: pods asking for extended resources are held, once
// each and in order, until the wait ends; then none is.
func TestDeviceWait(t *testing.T) {
	var w deviceWait
	if w.hold(mkPod("cpu", "img"), messages.SourceAPI) {
		t.Fatal("a pod without extended resources held")
	}
	if !w.hold(gpuPod("a", 1), messages.SourceAPI) || !w.hold(gpuPod("b", 1), messages.SourceFile) || !w.hold(gpuPod("a", 1), messages.SourceAPI) {
		t.Fatal("GPU pods not held before the devices are counted")
	}
	held, ended := w.end()
	if !ended || !slices.Equal(held, []heldPod{{uid: "a", source: messages.SourceAPI}, {uid: "b", source: messages.SourceFile}}) {
		t.Fatalf("end: %v %v, want a then b, once each", held, ended)
	}
	if held, ended := w.end(); ended || held != nil {
		t.Fatalf("ended twice: %v", held)
	}
	if w.hold(gpuPod("c", 1), messages.SourceAPI) {
		t.Fatal("held after the wait ended")
	}
}
