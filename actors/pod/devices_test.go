package pod

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/actorlet/actorlet/messages"
)

func TestDevicesAreGivenToTheContainer(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app", "plain")
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "OWN", Value: "1"}}
	var mu sync.Mutex
	fail, asks := true, 0
	rec := &fakeRecorder{}
	h := newHarnessSys(t, p, func(sys *actor.ActorSystem, d *Deps) {
		d.Events = rec
		d.Devices = sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			m, ok := c.Message().(*messages.AllocateDevices)
			if !ok {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			asks++
			if fail {
				c.Send(m.ReplyTo, &messages.DevicesAllocated{UID: m.Pod.UID, Reason: "UnexpectedAdmissionError",
					Message: "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected"})
				return
			}
			c.Send(m.ReplyTo, &messages.DevicesAllocated{UID: m.Pod.UID, Containers: map[string]messages.ContainerDevices{"app": {
				Envs:        map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-1"},
				Devices:     []messages.DeviceNode{{ContainerPath: "/dev/nvidia0", HostPath: "/dev/nvidia0", Permissions: "rw"}},
				Mounts:      []messages.DeviceMount{{ContainerPath: "/usr/lib/x", HostPath: "/opt/x", ReadOnly: true}},
				Annotations: map[string]string{"a": "b"},
				CDIDevices:  []string{"nvidia.com/gpu=0"},
			}}})
		}))
	})
	h.waitStatus("waiting on devices", func(s *v1.PodStatus) bool {
		w := s.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == ReasonContainerCreating && contains(w.Message, "UnexpectedAdmissionError")
	})
	if h.rt.Count("CreateContainer") != 0 {
		t.Fatal("container created before its devices")
	}
	if !rec.has("UnexpectedAdmissionError") {
		t.Fatalf("no event for the refused allocation: %v", rec.events)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	h.clk.Step(time.Second) // the retry after a refused allocation
	h.waitStatus("Running", running)
	for _, c := range h.rt.Containers() {
		cfg := h.rt.ContainerConfig(c.Id)
		var envs []string
		for _, kv := range cfg.Envs {
			envs = append(envs, kv.Key+"="+string(kv.Value))
		}
		switch c.Metadata.Name {
		case "app":
			if i, j := slices.Index(envs, "NVIDIA_VISIBLE_DEVICES=GPU-1"), slices.Index(envs, "OWN=1"); i < 0 || j < i {
				t.Errorf("app's env %v: want the device's variable, before the container's own", envs)
			}
			if len(cfg.Devices) != 1 || cfg.Devices[0].ContainerPath != "/dev/nvidia0" || cfg.Devices[0].Permissions != "rw" {
				t.Errorf("app's devices %v", cfg.Devices)
			}
			if cfg.Annotations["a"] != "b" || len(cfg.CDIDevices) != 1 || cfg.CDIDevices[0].Name != "nvidia.com/gpu=0" {
				t.Errorf("app's annotations %v, CDI devices %v", cfg.Annotations, cfg.CDIDevices)
			}
			found := false
			for _, m := range cfg.Mounts {
				found = found || (m.ContainerPath == "/usr/lib/x" && m.HostPath == "/opt/x" && m.Readonly)
			}
			if !found {
				t.Errorf("app's mounts %v lack the device mount", cfg.Mounts)
			}
		case "plain":
			if len(cfg.Devices) != 0 || slices.Contains(envs, "NVIDIA_VISIBLE_DEVICES=GPU-1") {
				t.Errorf("plain container got devices %v / env %v", cfg.Devices, envs)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if asks != 2 {
		t.Errorf("the devices actor was asked %d times, want 2 (the refusal and the retry): one answer serves every container", asks)
	}
}

// A runtime that cannot inject CDI devices (containerd 1.6) gets no
// container that needs them: it waits with CreateContainerConfigError and
// a Failed event naming the devices and why, rather than run without them.
func TestCDIDevicesRefusedWhereTheRuntimeCannot(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app", "plain")
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{"example.com/dev": resource.MustParse("1")}
	rec := &fakeRecorder{}
	const why = "containerd 1.6.20 ignores CDI devices (CDI needs containerd 1.7 or later)"
	h := newHarnessSys(t, p, func(sys *actor.ActorSystem, d *Deps) {
		d.Events = rec
		d.Config.NoCDI = why
		d.Devices = sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if m, ok := c.Message().(*messages.AllocateDevices); ok {
				c.Send(m.ReplyTo, &messages.DevicesAllocated{UID: m.Pod.UID, Containers: map[string]messages.ContainerDevices{
					"app": {CDIDevices: []string{"example.com/dev=dev0"}}}})
			}
		}))
	})
	h.waitStatus("app refused", func(s *v1.PodStatus) bool {
		w := s.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == ReasonCreateContainerConfigError &&
			contains(w.Message, "example.com/dev=dev0") && contains(w.Message, why)
	})
	for _, c := range h.rt.Containers() {
		if c.Metadata.Name == "app" {
			t.Fatalf("app was created on a runtime without CDI: %v", c)
		}
	}
	if !rec.has("Failed") {
		t.Errorf("no Failed event: %v", rec.events)
	}
}
