package devices

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

func TestDiscoveryTellsCapacity(t *testing.T) {
	t.Run("the built-in GPUs with their labels", func(t *testing.T) {
		gpus := newGPUs("GPU-0", "GPU-1")
		h := newHarness(t, func(c *Config) { c.Providers = []Provider{gpus} })
		h.spawn()
		c := h.capacity()
		want := &messages.DeviceCapacity{
			Capacity:    map[v1.ResourceName]int64{"nvidia.com/gpu": 2},
			Allocatable: map[v1.ResourceName]int64{"nvidia.com/gpu": 2},
			Labels:      map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "2"},
			Annotations: map[string]string{"actorlet.io/gpus": "fake"},
			Ready:       true, // the only built-in provider listed
		}
		if !reflect.DeepEqual(c, want) {
			t.Fatalf("capacity %+v, want %+v", c, want)
		}
		h.noCapacity()
		// A subscriber that restarted asks.
		if got := h.ask(&messages.GetDeviceCapacity{}).(*messages.DeviceCapacity); !reflect.DeepEqual(got, want) {
			t.Fatalf("GetDeviceCapacity %+v, want %+v", got, want)
		}
		if got := h.ask(&messages.GetAllocatableDevices{}).(*messages.AllocatableDevices); !reflect.DeepEqual(got.Devices,
			map[v1.ResourceName][]string{"nvidia.com/gpu": {"GPU-0", "GPU-1"}}) {
			t.Fatalf("allocatable devices %v", got.Devices)
		}
	})
	t.Run("no provider: told at once", func(t *testing.T) {
		h := newHarness(t, nil)
		h.spawn()
		if c := h.capacity(); len(c.Capacity) != 0 || len(c.Allocatable) != 0 {
			t.Fatalf("capacity %+v, want none", c)
		}
	})
}

func TestAllocate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		devices []string
		pod     *v1.Pod
		want    map[string][]string // container -> IDs
		reason  string
		message string
	}{
		{name: "one device", devices: []string{"g0", "g1", "g2"}, pod: onePod("a", 1), want: map[string][]string{"c": {"g0"}}},
		{name: "two devices", devices: []string{"g0", "g1", "g2"}, pod: onePod("a", 2), want: map[string][]string{"c": {"g0", "g1"}}},
		{name: "two containers", devices: []string{"g0", "g1", "g2"}, pod: gpuPod("a", "nvidia.com/gpu", map[string]int{"x": 1, "y": 2}),
			want: map[string][]string{"x": {"g0"}, "y": {"g1", "g2"}}},
		{name: "not enough", devices: []string{"g0"}, pod: onePod("a", 2), reason: ReasonUnexpectedAdmissionError,
			message: "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 2, Available: 1, which is unexpected"},
		{name: "an unknown resource", devices: []string{"g0"}, pod: gpuPod("a", "example.com/foo", map[string]int{"c": 1}), reason: ReasonUnexpectedAdmissionError,
			message: "Allocate failed due to cannot allocate unregistered device example.com/foo, which is unexpected"},
		{name: "no extended resource", devices: []string{"g0"}, pod: gpuPod("a", "cpu", map[string]int{"c": 1}), want: map[string][]string{}},
		{name: "init container's devices reused", devices: []string{"g0", "g1"},
			pod:  gpuPod("a", "nvidia.com/gpu", map[string]int{"init:setup": 2, "main": 2}),
			want: map[string][]string{"setup": {"g0", "g1"}, "main": {"g0", "g1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gpus := newGPUs(tc.devices...)
			h := newHarness(t, func(c *Config) { c.Providers = []Provider{gpus} })
			h.spawn()
			h.capacity()
			r := h.allocate(tc.pod)
			if r.UID != tc.pod.UID || r.Reason != tc.reason || r.Message != tc.message {
				t.Fatalf("reply %+v, want reason %q message %q", r, tc.reason, tc.message)
			}
			if tc.reason != "" {
				if len(h.podDevices()) != 0 {
					t.Fatalf("a refused pod holds devices: %v", h.podDevices())
				}
				return
			}
			got := map[string][]string{}
			for c, d := range r.Containers {
				ids := d.IDs["nvidia.com/gpu"]
				got[c] = ids
				// The container gets what the provider answered for its devices.
				if d.Envs["FAKE_VISIBLE_DEVICES"] != strings.Join(ids, ",") || len(d.Devices) != len(ids) || d.Devices[0].HostPath != "/dev/"+ids[0] {
					t.Errorf("container %s got %+v, not the provider's answer for %v", c, d, ids)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("devices %v, want %v", got, tc.want)
			}
			// Asked again (a restarted PodActor): the same answer, no second
			// allocation by the provider.
			calls := gpus.allocCount()
			if again := h.allocate(tc.pod); !reflect.DeepEqual(again, r) {
				t.Fatalf("asked again: %+v, first %+v", again, r)
			}
			if n := gpus.allocCount(); n != calls {
				t.Fatalf("the provider allocated again: %d calls, then %d", calls, n)
			}
		})
	}
}

func TestNoDoubleUseUnderConcurrentPods(t *testing.T) {
	ids := []string{"g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7"}
	gpus := newGPUs(ids...)
	gate := make(chan struct{})
	gpus.gate = gate // every Allocate waits: all 20 pods are in flight together
	h := newHarness(t, func(c *Config) { c.Providers = []Provider{gpus} })
	h.spawn()
	h.capacity()
	for i := range 20 {
		h.send(&messages.AllocateDevices{Pod: onePod(string(rune('a'+i)), 1), ReplyTo: h.sink})
	}
	h.sync()
	close(gate)
	var ok, refused int
	seen := map[string]types.UID{}
	for range 20 {
		r := h.reply()
		if r.Reason != "" {
			refused++
			if !strings.Contains(r.Message, "Requested: 1, Available: 0") {
				t.Errorf("refused with %q", r.Message)
			}
			continue
		}
		ok++
		got := r.Containers["c"].IDs["nvidia.com/gpu"]
		if len(got) != 1 {
			t.Fatalf("pod %s got %v", r.UID, got)
		}
		if other, dup := seen[got[0]]; dup {
			t.Fatalf("device %s given to %s and %s", got[0], other, r.UID)
		}
		seen[got[0]] = r.UID
	}
	if ok != 8 || refused != 12 {
		t.Fatalf("%d pods got a device and %d were refused, want 8 and 12", ok, refused)
	}
	if n := len(h.podDevices()); n != 8 {
		t.Fatalf("%d allocations listed, want 8", n)
	}
}

func TestPreferredAllocation(t *testing.T) {
	gpus := newGPUs("g0", "g1", "g2", "g3")
	gpus.prefer = func(available, _ []string, size int) []string {
		if size == 2 && len(available) == 4 {
			return []string{"g1", "g3"} // e.g. the same NVLink island
		}
		return nil
	}
	h := newHarness(t, func(c *Config) { c.Providers = []Provider{gpus} })
	h.spawn()
	h.capacity()
	if got := h.allocate(onePod("a", 2)).Containers["c"].IDs["nvidia.com/gpu"]; !slices.Equal(got, []string{"g1", "g3"}) {
		t.Fatalf("got %v, want the provider's preference [g1 g3]", got)
	}
}

func TestProviderErrorRefusesAndFrees(t *testing.T) {
	gpus := newGPUs("g0")
	gpus.allocErr = errors.New("plugin says no")
	h := newHarness(t, func(c *Config) { c.Providers = []Provider{gpus} })
	h.spawn()
	h.capacity()
	r := h.allocate(onePod("a", 1))
	if r.Reason != ReasonUnexpectedAdmissionError || !strings.Contains(r.Message, "plugin says no") {
		t.Fatalf("reply %+v, want the provider's error", r)
	}
	gpus.mu.Lock()
	gpus.allocErr = nil
	gpus.mu.Unlock()
	if r := h.allocate(onePod("b", 1)); r.Reason != "" {
		t.Fatalf("the failed pod's reservation was kept: %+v", r)
	}
}

func TestRestartKeepsAllocations(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart func(h *harness)
	}{
		{name: "the actor panics and is restarted", restart: func(h *harness) {
			h.send(&messages.ChaosPanic{Reason: "test"})
			h.sync()
		}},
		{name: "the process restarts (a new actor on the same checkpoint)", restart: func(h *harness) {
			h.stop()
			h.spawn()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gpus := newGPUs("g0", "g1", "g2")
			h := newHarness(t, func(c *Config) { c.Providers = []Provider{gpus} })
			h.spawn()
			h.capacity()
			first := h.allocate(onePod("a", 2))
			if first.Reason != "" {
				t.Fatalf("refused: %s", first.Message)
			}
			tc.restart(h)
			h.capacity() // the new incarnation lists and tells again
			if again := h.allocate(onePod("a", 2)); !reflect.DeepEqual(again, first) {
				t.Fatalf("after the restart: %+v, before %+v", again, first)
			}
			if n := gpus.allocCount(); n != 1 {
				t.Fatalf("the provider allocated %d times, want once", n)
			}
			r := h.allocate(onePod("b", 2))
			if r.Message != "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 2, Available: 1, which is unexpected" {
				t.Fatalf("second pod after the restart: %+v", r)
			}
			if got := h.allocate(onePod("c", 1)).Containers["c"].IDs["nvidia.com/gpu"]; !slices.Equal(got, []string{"g2"}) {
				t.Fatalf("third pod got %v, want the one device left [g2]", got)
			}
		})
	}
}

func TestCorruptCheckpointIgnored(t *testing.T) {
	for _, tc := range []struct {
		name  string
		data  []byte
		store func(*fakeStore)
	}{
		{name: "not JSON", data: []byte("\x00\x01garbage")},
		{name: "a wrong checksum", data: func() []byte {
			b, _ := encodeCheckpoint(map[types.UID]*podRecord{"uid-x": {UID: "uid-x", Namespace: "ns", Name: "x",
				Containers: []*containerRecord{{Name: "c", Resources: []*resourceRecord{{Resource: "nvidia.com/gpu", IDs: []string{"g0"}}}}}}})
			return []byte(strings.Replace(string(b), `"g0"`, `"g1"`, 1))
		}()},
		{name: "unreadable", store: func(s *fakeStore) { s.loadErr = errors.New("input/output error") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gpus := newGPUs("g0", "g1")
			h := newHarness(t, func(c *Config) { c.Providers = []Provider{gpus} })
			h.store.set(tc.data)
			if tc.store != nil {
				tc.store(h.store)
			}
			h.spawn()
			h.capacity()
			if got := h.podDevices(); len(got) != 0 {
				t.Fatalf("allocations from a corrupt checkpoint: %v", got)
			}
			if r := h.allocate(onePod("a", 2)); r.Reason != "" {
				t.Fatalf("refused after a corrupt checkpoint: %s", r.Message)
			}
			// The checkpoint is written anew and good.
			pods, err := decodeCheckpoint(h.store.get())
			if err != nil || pods["uid-a"] == nil {
				t.Fatalf("checkpoint after the allocation: %v, %v", pods, err)
			}
		})
	}
}

func TestReleaseFrees(t *testing.T) {
	gpus := newGPUs("g0")
	h := newHarness(t, func(c *Config) { c.Providers = []Provider{gpus} })
	h.spawn()
	h.capacity()
	if r := h.allocate(onePod("a", 1)); r.Reason != "" {
		t.Fatal(r.Message)
	}
	if r := h.allocate(onePod("b", 1)); r.Reason == "" {
		t.Fatal("a second pod got the only device")
	}
	h.send(&messages.ReleaseDevices{UID: "uid-a"})
	if r := h.allocate(onePod("b", 1)); r.Reason != "" || r.Containers["c"].IDs["nvidia.com/gpu"][0] != "g0" {
		t.Fatalf("after the release: %+v", r)
	}
	one := h.ask(&messages.GetPodDevices{UID: "uid-b"}).(*messages.PodDevicesList).Pods
	if len(one) != 1 || one[0].Name != "b" || !slices.Equal(one[0].Containers["c"]["nvidia.com/gpu"], []string{"g0"}) {
		t.Fatalf("GetPodDevices of b: %+v", one)
	}
	actortest.Eventually(t, "the checkpoint without the released pod", func() bool {
		pods, err := decodeCheckpoint(h.store.get())
		return err == nil && pods["uid-a"] == nil && pods["uid-b"] != nil
	})
}

func TestPodsKnownFreesTheUnknown(t *testing.T) {
	gpus := newGPUs("g0", "g1", "g2")
	h := newHarness(t, func(c *Config) { c.Providers = []Provider{gpus} })
	h.spawn()
	h.capacity()
	for _, p := range []string{"a", "b"} {
		if r := h.allocate(onePod(p, 1)); r.Reason != "" {
			t.Fatal(r.Message)
		}
	}
	h.send(&messages.PodsKnown{UIDs: map[types.UID]bool{"uid-a": true, "uid-b": true}})
	// c is allocated after that list: the next list may have been taken
	// before c was asked for, so c survives one list that misses it.
	if r := h.allocate(onePod("c", 1)); r.Reason != "" {
		t.Fatal(r.Message)
	}
	h.send(&messages.PodsKnown{UIDs: map[types.UID]bool{"uid-a": true}})
	got := h.podDevices()
	if _, ok := got["ns/b c nvidia.com/gpu"]; ok || len(got) != 2 {
		t.Fatalf("after a list without b and c: %v, want a and c", got)
	}
	if r := h.allocate(onePod("d", 1)); r.Reason != "" || r.Containers["c"].IDs["nvidia.com/gpu"][0] != "g1" {
		t.Fatalf("a new pod after b was dropped: %+v, want b's device g1", r)
	}
	h.send(&messages.PodsKnown{UIDs: map[types.UID]bool{"uid-a": true, "uid-d": true}})
	if got := h.podDevices(); len(got) != 2 || got["ns/c c nvidia.com/gpu"] != nil {
		t.Fatalf("after a second list without c: %v, want a and d", got)
	}
}

func TestUnhealthyDevice(t *testing.T) {
	gpus := newGPUs("g0", "g1", "g2")
	h := newHarness(t, func(c *Config) { c.Providers = []Provider{gpus} })
	h.spawn()
	h.capacity()
	if r := h.allocate(onePod("a", 1)); r.Containers["c"].IDs["nvidia.com/gpu"][0] != "g0" {
		t.Fatalf("a got %+v", r)
	}
	gpus.setHealth("g0", pluginapi.Unhealthy, "g0: Xid 79 (GPU has fallen off the bus)")
	h.waitCapacity("nvidia.com/gpu", 3, 2)
	want := []string{"Warning DeviceUnhealthy ns/a: Device g0 (nvidia.com/gpu) of container c is unhealthy: g0: Xid 79 (GPU has fallen off the bus)"}
	if got := h.events.all(); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	if n := h.metrics.unhealthyCount("nvidia.com/gpu"); n != 1 {
		t.Fatalf("%d unhealthy devices counted, want 1", n)
	}
	// a keeps it; the allocatable devices no longer list it.
	if got := h.podDevices()["ns/a c nvidia.com/gpu"]; !slices.Equal(got, []string{"g0"}) {
		t.Fatalf("a holds %v after g0 turned unhealthy", got)
	}
	if got := h.ask(&messages.GetAllocatableDevices{}).(*messages.AllocatableDevices).Devices["nvidia.com/gpu"]; !slices.Equal(got, []string{"g1", "g2"}) {
		t.Fatalf("allocatable %v", got)
	}
	// Released, it is never given to a new pod while unhealthy.
	h.send(&messages.ReleaseDevices{UID: "uid-a"})
	if r := h.allocate(onePod("b", 2)); !slices.Equal(r.Containers["c"].IDs["nvidia.com/gpu"], []string{"g1", "g2"}) {
		t.Fatalf("b got %+v", r)
	}
	if r := h.allocate(onePod("c", 1)); r.Reason != ReasonUnexpectedAdmissionError {
		t.Fatalf("c got the unhealthy device: %+v", r)
	}
	// Healthy again: allocatable again, no more events.
	gpus.setHealth("g0", pluginapi.Healthy, "")
	h.waitCapacity("nvidia.com/gpu", 3, 3)
	if r := h.allocate(onePod("d", 1)); r.Reason != "" {
		t.Fatalf("d refused with g0 healthy again: %s", r.Message)
	}
	if got := h.events.all(); len(got) != 1 {
		t.Fatalf("events %q", got)
	}
}

func TestPluginRegistration(t *testing.T) {
	p1, p2 := newFake("example.com/foo", "f0", "f1"), newFake("example.com/foo", "f0", "f1", "f2")
	dialer := &fakeDialer{providers: map[string]Provider{"/dp/p1.sock": p1, "/dp/p2.sock": p2}, closed: map[string]int{}}
	gpus := newGPUs("g0")
	h := newHarness(t, func(c *Config) { c.Providers = []Provider{gpus}; c.Dialer = dialer })
	h.spawn()
	h.capacity()

	h.send(&messages.DevicePluginRegistered{ResourceName: "example.com/foo", Endpoint: "/dp/p1.sock"})
	c := h.waitCapacity("example.com/foo", 2, 2)
	if c.Capacity["nvidia.com/gpu"] != 1 {
		t.Fatalf("capacity %+v lost the GPUs", c)
	}
	if r := h.allocate(gpuPod("a", "example.com/foo", map[string]int{"c": 1})); r.Reason != "" || r.Containers["c"].IDs["example.com/foo"][0] != "f0" {
		t.Fatalf("a plugin's device: %+v", r)
	}

	// The plugin registers again (restarted, on a new socket): the new one
	// replaces the old, which is closed and no longer watched.
	h.send(&messages.DevicePluginRegistered{ResourceName: "example.com/foo", Endpoint: "/dp/p2.sock"})
	h.waitCapacity("example.com/foo", 3, 3)
	actortest.Eventually(t, "the old plugin closed and unwatched", func() bool { return dialer.closes("/dp/p1.sock") == 1 && p1.watching() == 0 })
	if r := h.allocate(gpuPod("b", "example.com/foo", map[string]int{"c": 2})); r.Reason != "" || !slices.Equal(r.Containers["c"].IDs["example.com/foo"], []string{"f1", "f2"}) {
		t.Fatalf("after re-registration (f0 is a's): %+v", r)
	}

	// Refused: a plugin whose socket does not answer, a native resource
	// name. Nothing changes.
	h.send(&messages.DevicePluginRegistered{ResourceName: "example.com/bar", Endpoint: "/dp/nobody.sock"})
	h.send(&messages.DevicePluginRegistered{ResourceName: "memory", Endpoint: "/dp/p2.sock"})
	h.noCapacity()

	// The actor restarts: the plugin stays registered and is watched again.
	h.send(&messages.ChaosPanic{})
	c = h.waitCapacity("example.com/foo", 3, 3)
	if c.Capacity["nvidia.com/gpu"] != 1 {
		t.Fatalf("after the restart: %+v", c)
	}
	if p2.watchCount() != 2 || dialer.closes("/dp/p2.sock") != 0 {
		t.Fatalf("after the restart: %d watches of the plugin, %d closes", p2.watchCount(), dialer.closes("/dp/p2.sock"))
	}
	// Stopped for good: the plugin's connection is closed.
	h.stop()
	actortest.Eventually(t, "the plugin closed at stop", func() bool { return dialer.closes("/dp/p2.sock") == 1 })
}

func TestNoDialerRefusesPlugins(t *testing.T) {
	h := newHarness(t, nil)
	h.spawn()
	h.capacity()
	h.send(&messages.DevicePluginRegistered{ResourceName: "example.com/foo", Endpoint: "/dp/p.sock"})
	h.noCapacity()
}

func TestWatchFailureRetriedAfterBackoff(t *testing.T) {
	gpus := newGPUs("g0", "g1")
	h := newHarness(t, func(c *Config) { c.Providers = []Provider{gpus} })
	h.spawn()
	h.waitCapacity("nvidia.com/gpu", 2, 2)

	gpus.fail <- errors.New("NVML: GPU is lost")
	h.waitCapacity("nvidia.com/gpu", 0, 0)
	h.sync()
	h.clk.Step(999 * time.Millisecond)
	h.noCapacity()
	if n := gpus.watchCount(); n != 1 {
		t.Fatalf("watched again before the back-off: %d", n)
	}
	h.clk.Step(time.Millisecond)
	h.waitCapacity("nvidia.com/gpu", 2, 2)

	// It fails again at once: the next wait is 1s again (it listed in
	// between); twice in a row without a list: 2s.
	gpus.fail <- errors.New("NVML: GPU is lost")
	h.waitCapacity("nvidia.com/gpu", 0, 0)
	h.sync()
	h.clk.Step(time.Second)
	h.waitCapacity("nvidia.com/gpu", 2, 2)
	if n := gpus.watchCount(); n != 3 {
		t.Fatalf("%d watches, want 3", n)
	}
}

func TestSamplingSetsMetricsWithOwners(t *testing.T) {
	gpus := newGPUs("g0", "g1")
	h := newHarness(t, func(c *Config) { c.Providers = []Provider{gpus}; c.SamplePeriod = 0 })
	h.spawn()
	h.capacity()
	if r := h.allocate(gpuPod("a", "nvidia.com/gpu", map[string]int{"init:setup": 1, "main": 1})); r.Reason != "" {
		t.Fatal(r.Message)
	}
	h.clk.Step(10 * time.Second) // the default period
	actortest.Eventually(t, "both GPUs sampled", func() bool {
		_, _, ok0 := h.metrics.sample("nvidia.com/gpu/g0")
		_, _, ok1 := h.metrics.sample("nvidia.com/gpu/g1")
		return ok0 && ok1
	})
	owner, values, _ := h.metrics.sample("nvidia.com/gpu/g0")
	if owner != (Owner{Namespace: "ns", Pod: "a", Container: "main"}) || values["DCGM_FI_DEV_FB_USED"] != 1024 {
		t.Fatalf("g0: %+v %v, want a's main container (which reuses setup's GPU)", owner, values)
	}
	if owner, values, _ := h.metrics.sample("nvidia.com/gpu/g1"); owner != (Owner{}) || values["DCGM_FI_DEV_GPU_UTIL"] != 10 {
		t.Fatalf("g1: %+v %v, want no owner", owner, values)
	}
	if got := h.metrics.counts("nvidia.com/gpu"); got != [3]int{2, 2, 1} {
		t.Fatalf("device counts %v, want capacity 2, allocatable 2, allocated 1", got)
	}
	// Released: the next sample has no owner.
	h.send(&messages.ReleaseDevices{UID: "uid-a"})
	h.sync()
	h.clk.Step(10 * time.Second)
	actortest.Eventually(t, "g0 sampled free", func() bool {
		owner, _, ok := h.metrics.sample("nvidia.com/gpu/g0")
		return ok && owner == (Owner{})
	})
}

func TestInjectFault(t *testing.T) {
	gpus := newGPUs("GPU-0")
	plain := newFake("example.com/foo", "f0")
	dialer := &fakeDialer{providers: map[string]Provider{"/dp/foo.sock": plain}, closed: map[string]int{}}
	h := newHarness(t, func(c *Config) { c.Providers = []Provider{gpus}; c.Dialer = dialer })
	h.spawn()
	h.capacity()
	h.send(&messages.DevicePluginRegistered{ResourceName: "example.com/foo", Endpoint: "/dp/foo.sock"})
	h.waitCapacity("example.com/foo", 1, 1)
	for _, tc := range []struct {
		name, id string
		xid      uint64
		wantErr  string
	}{
		{name: "a simulated GPU", id: "GPU-0", xid: 79},
		{name: "no such device", id: "GPU-9", xid: 79, wantErr: `no device "GPU-9"`},
		{name: "not simulated", id: "f0", xid: 79, wantErr: "not simulated"},
		{name: "the backend refuses", id: "GPU-0", xid: 0, wantErr: "xid 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.ask(&messages.InjectDeviceFault{DeviceID: tc.id, Xid: tc.xid}).(*messages.DeviceFaultInjected)
			if (tc.wantErr == "") != (r.Err == "") || !strings.Contains(r.Err, tc.wantErr) {
				t.Fatalf("answer %q, want %q", r.Err, tc.wantErr)
			}
			if tc.wantErr == "" {
				if got := <-gpus.xids; got != "GPU-0:79" {
					t.Fatalf("injected %q", got)
				}
			}
		})
	}
}

func TestCheckpointWriteFailureRefuses(t *testing.T) {
	gpus := newGPUs("g0")
	h := newHarness(t, func(c *Config) { c.Providers = []Provider{gpus} })
	h.store.saveErr = errors.New("no space left on device")
	h.spawn()
	h.capacity()
	r := h.allocate(onePod("a", 1))
	if r.Reason != ReasonUnexpectedAdmissionError || !strings.Contains(r.Message, "no space left on device") {
		t.Fatalf("reply %+v, want a refusal naming the checkpoint error", r)
	}
	h.store.mu.Lock()
	h.store.saveErr = nil
	h.store.mu.Unlock()
	if r := h.allocate(onePod("b", 1)); r.Reason != "" {
		t.Fatalf("the refused pod kept its device: %+v", r)
	}
}

func TestReleasedWhileAllocating(t *testing.T) {
	gpus := newGPUs("g0")
	gate := make(chan struct{})
	gpus.gate = gate
	h := newHarness(t, func(c *Config) { c.Providers = []Provider{gpus} })
	h.spawn()
	h.capacity()
	gpus.entered = make(chan []string, 1)
	h.send(&messages.AllocateDevices{Pod: onePod("a", 1), ReplyTo: h.sink})
	select { // a's device is reserved and being allocated
	case <-gpus.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("a's devices were never allocated")
	}
	if r := h.allocate(onePod("b", 1)); r.Reason == "" {
		t.Fatalf("b got a's reserved device: %+v", r)
	}
	h.send(&messages.ReleaseDevices{UID: "uid-a"}) // the pod is gone before its devices came
	close(gate)
	if r := h.allocate(onePod("b", 1)); r.Reason != "" || r.UID != "uid-b" {
		t.Fatalf("b after a was released mid-allocation: %+v", r)
	}
	if got := h.podDevices(); len(got) != 1 || got["ns/b c nvidia.com/gpu"] == nil {
		t.Fatalf("allocations %v, want b only", got)
	}
}
