package devices

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/actorlet/actorlet/messages"
)

// fakeCDI records the claims' specs written and removed.
type fakeCDI struct {
	mu       sync.Mutex
	specs    map[types.UID][]PreparedDevice
	writes   int
	writeErr error
}

func (f *fakeCDI) Write(c ClaimRef, devs []PreparedDevice) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.writeErr != nil {
		return f.writeErr
	}
	f.writes++
	f.specs[c.UID] = devs
	return nil
}

func (f *fakeCDI) Remove(c ClaimRef) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.specs, c.UID)
	return nil
}

func (f *fakeCDI) spec(uid types.UID) ([]PreparedDevice, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.specs[uid]
	return d, ok
}

// fakeSlices keeps every device list the actor published.
type fakeSlices struct{ ch chan []SliceDevice }

func (f *fakeSlices) SetDevices(d []SliceDevice) { f.ch <- d }

func (f *fakeSlices) next(t *testing.T) []SliceDevice {
	t.Helper()
	select {
	case d := <-f.ch:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no slice published")
		return nil
	}
}

type draHarness struct {
	*harness
	gpus   *gpuProvider
	cdi    *fakeCDI
	slices *fakeSlices
	claims *fakeStore
}

func newDRAHarness(t *testing.T, ids ...string) *draHarness {
	d := &draHarness{gpus: newGPUs(ids...), cdi: &fakeCDI{specs: map[types.UID][]PreparedDevice{}},
		slices: &fakeSlices{ch: make(chan []SliceDevice, 16)}, claims: &fakeStore{}}
	d.harness = newHarness(t, func(c *Config) {
		c.Providers = []Provider{d.gpus}
		c.DRA = &DRAConfig{Resource: "nvidia.com/gpu", Slices: d.slices, CDI: d.cdi, Store: d.claims}
	})
	d.spawn()
	return d
}

func claimOf(uid string, devs ...string) ClaimToPrepare {
	c := ClaimToPrepare{ClaimRef: ClaimRef{UID: types.UID(uid), Namespace: "ns", Name: "claim-" + uid}}
	for i, id := range devs {
		c.Devices = append(c.Devices, ClaimDevice{Requests: []string{"gpu"}, Pool: "node", Device: "gpu-" + string(rune('0'+i)), ID: id})
	}
	return c
}

func (d *draHarness) prepare(claims ...ClaimToPrepare) map[types.UID]ClaimResult {
	d.t.Helper()
	return d.ask(&PrepareClaims{Claims: claims}).(*ClaimsPrepared).Results
}

func (d *draHarness) unprepare(uids ...string) map[types.UID]error {
	d.t.Helper()
	m := &UnprepareClaims{}
	for _, u := range uids {
		m.Claims = append(m.Claims, ClaimRef{UID: types.UID(u), Namespace: "ns", Name: "claim-" + u})
	}
	return d.ask(m).(*ClaimsUnprepared).Results
}

func TestDRANoCapacityButASlice(t *testing.T) {
	d := newDRAHarness(t, "GPU-a", "GPU-b")
	c := d.capacity()
	if _, ok := c.Capacity["nvidia.com/gpu"]; ok || !c.Ready {
		t.Fatalf("capacity %+v: want no nvidia.com/gpu, ready", c)
	}
	if c.Labels["nvidia.com/gpu.product"] == "" {
		t.Errorf("the GPUs' labels are gone: %v", c.Labels)
	}
	want := []SliceDevice{{ID: "GPU-a", Healthy: true}, {ID: "GPU-b", Healthy: true}}
	if got := d.slices.next(t); !reflect.DeepEqual(got, want) {
		t.Fatalf("slice %v, want %v", got, want)
	}
	// An Xid: the device is published unhealthy (tainted), once.
	d.gpus.setHealth("GPU-b", pluginapi.Unhealthy, "Xid 79")
	want[1].Healthy = false
	if got := d.slices.next(t); !reflect.DeepEqual(got, want) {
		t.Fatalf("slice after the Xid %v, want %v", got, want)
	}
	// The device plugin path cannot allocate what DRA serves.
	if r := d.allocate(onePod("p", 1)); r.Reason != ReasonUnexpectedAdmissionError {
		t.Fatalf("a pod got nvidia.com/gpu by the device plugin path: %+v", r)
	}
}

func TestDRAPrepareUnprepare(t *testing.T) {
	d := newDRAHarness(t, "GPU-a", "GPU-b")
	d.capacity()
	res := d.prepare(claimOf("u1", "GPU-a"))
	r := res["u1"]
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	wantDev := []PreparedDevice{{ClaimDevice: ClaimDevice{Requests: []string{"gpu"}, Pool: "node", Device: "gpu-0", ID: "GPU-a"},
		CDIDevices: []string{"k8s.gpu.nvidia.com/claim=u1-gpu-0"}}}
	if !reflect.DeepEqual(r.Devices, wantDev) {
		t.Fatalf("prepared %+v, want %+v", r.Devices, wantDev)
	}
	if spec, ok := d.cdi.spec("u1"); !ok || !reflect.DeepEqual(spec, wantDev) {
		t.Fatalf("CDI spec %+v (written %v)", spec, ok)
	}
	// Prepared again (the kubelet retries): the same answer, nothing written.
	if again := d.prepare(claimOf("u1", "GPU-a"))["u1"]; again.Err != nil || !reflect.DeepEqual(again.Devices, wantDev) {
		t.Fatalf("second prepare %+v", again)
	}
	if d.cdi.writes != 1 {
		t.Fatalf("CDI spec written %d times, want once", d.cdi.writes)
	}
	// The GPU is not given twice, nor to the device plugin path.
	if e := d.prepare(claimOf("u2", "GPU-a"))["u2"].Err; !errors.Is(e, ErrDeviceInUse) {
		t.Fatalf("a second claim of GPU-a: %v, want ErrDeviceInUse", e)
	}
	if _, ok := d.cdi.spec("u2"); ok {
		t.Fatal("a refused claim has a CDI spec")
	}
	// Unprepare frees it; unprepare again is no error.
	if errs := d.unprepare("u1"); errs["u1"] != nil {
		t.Fatal(errs["u1"])
	}
	if _, ok := d.cdi.spec("u1"); ok {
		t.Fatal("the CDI spec outlived its claim")
	}
	if errs := d.unprepare("u1", "never"); errs["u1"] != nil || errs["never"] != nil {
		t.Fatalf("unprepare of unprepared claims: %v", errs)
	}
	if e := d.prepare(claimOf("u2", "GPU-a"))["u2"].Err; e != nil {
		t.Fatalf("GPU-a after its claim was unprepared: %v", e)
	}
}

func TestDRABadClaims(t *testing.T) {
	d := newDRAHarness(t, "GPU-a", "GPU-b")
	d.capacity()
	d.gpus.setHealth("GPU-b", pluginapi.Unhealthy, "Xid 79")
	d.slices.next(t)
	d.slices.next(t)
	res := d.prepare(claimOf("unknown", "GPU-zzz"), claimOf("sick", "GPU-b"), claimOf("twice", "GPU-a", "GPU-a"), claimOf("none"))
	for uid, want := range map[types.UID]error{"unknown": ErrUnknownDevice, "sick": ErrDeviceUnhealthy, "twice": ErrDeviceInUse} {
		if !errors.Is(res[uid].Err, want) {
			t.Errorf("claim %s: %v, want %v", uid, res[uid].Err, want)
		}
	}
	if res["none"].Err == nil {
		t.Error("a claim without devices was prepared")
	}
	// Prepared with other devices than before: refused.
	if e := d.prepare(claimOf("c", "GPU-a"))["c"].Err; e != nil {
		t.Fatal(e)
	}
	other := claimOf("c", "GPU-a")
	other.Devices[0].Device = "gpu-7"
	if e := d.prepare(other)["c"].Err; e == nil {
		t.Error("a claim prepared again with other devices was accepted")
	}
	// The CDI spec cannot be written: refused, nothing kept.
	d.cdi.mu.Lock()
	d.cdi.writeErr = errors.New("read-only file system")
	d.cdi.mu.Unlock()
	d.unprepare("c")
	if e := d.prepare(claimOf("d", "GPU-a"))["d"].Err; e == nil {
		t.Fatal("prepared without its CDI spec")
	}
	d.cdi.mu.Lock()
	d.cdi.writeErr = nil
	d.cdi.mu.Unlock()
	if e := d.prepare(claimOf("d", "GPU-a"))["d"].Err; e != nil {
		t.Fatalf("after the failed write the GPU is still held: %v", e)
	}
}

func TestDRARestartKeepsClaims(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart func(d *draHarness)
	}{
		{"the actor panics and is restarted", func(d *draHarness) {
			d.send(&messages.ChaosPanic{Reason: "test"})
			d.sync()
		}},
		{"the process restarts", func(d *draHarness) {
			d.stop()
			d.spawn()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDRAHarness(t, "GPU-a", "GPU-b")
			d.capacity()
			first := d.prepare(claimOf("u1", "GPU-b"))["u1"]
			if first.Err != nil {
				t.Fatal(first.Err)
			}
			tc.restart(d)
			d.capacity()
			if again := d.prepare(claimOf("u1", "GPU-b"))["u1"]; again.Err != nil || !reflect.DeepEqual(again.Devices, first.Devices) {
				t.Fatalf("after the restart %+v, before %+v", again, first)
			}
			if d.cdi.writes != 1 {
				t.Fatalf("prepared again after the restart: %d CDI writes", d.cdi.writes)
			}
			if e := d.prepare(claimOf("u2", "GPU-b"))["u2"].Err; !errors.Is(e, ErrDeviceInUse) {
				t.Fatalf("GPU-b given again after the restart: %v", e)
			}
			if errs := d.unprepare("u1"); errs["u1"] != nil {
				t.Fatal(errs["u1"])
			}
			tc.restart(d)
			d.capacity()
			if e := d.prepare(claimOf("u2", "GPU-b"))["u2"].Err; e != nil {
				t.Fatalf("GPU-b leaked across the restart: %v", e)
			}
		})
	}
}

func TestDRAClaimsCheckpointCorruptIgnored(t *testing.T) {
	claims := map[types.UID]*claimRecord{"u": {ClaimRef: ClaimRef{UID: "u"}, Devices: []PreparedDevice{{ClaimDevice: ClaimDevice{Device: "gpu-0", ID: "GPU-a"}}}}}
	b, err := encodeClaims(claims)
	if err != nil {
		t.Fatal(err)
	}
	got := map[types.UID]*claimRecord{}
	if err := decodeClaims(b, got); err != nil || !reflect.DeepEqual(got, claims) {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	b[len(b)/2] ^= 1
	if err := decodeClaims(b, map[types.UID]*claimRecord{}); err == nil {
		t.Fatal("a corrupt checkpoint was read")
	}
}

// slowList is a provider whose first listing waits for gate (a restarted
// agent whose GPUs are not listed yet).
type slowList struct {
	*gpuProvider
	gate chan struct{}
}

func (s *slowList) Watch(ctx context.Context, update func([]*pluginapi.Device, string)) error {
	select {
	case <-s.gate:
	case <-ctx.Done():
		return nil
	}
	return s.gpuProvider.Watch(ctx, update)
}

// TestDRAPrepareWaitsForTheListing: a prepare that comes before the GPUs
// are listed waits for the listing, not failing on an unknown device.
func TestDRAPrepareWaitsForTheListing(t *testing.T) {
	slow := &slowList{gpuProvider: newGPUs("GPU-a"), gate: make(chan struct{})}
	cdi := &fakeCDI{specs: map[types.UID][]PreparedDevice{}}
	h := newHarness(t, func(c *Config) {
		c.Providers = []Provider{slow}
		c.DRA = &DRAConfig{Resource: "nvidia.com/gpu", CDI: cdi, Store: &fakeStore{}}
	})
	h.spawn()
	got := make(chan *ClaimsPrepared, 1)
	go func() {
		r, err := h.sys.Root.RequestFuture(h.pid, &PrepareClaims{Claims: []ClaimToPrepare{claimOf("u1", "GPU-a")}}, 10*time.Second).Result()
		if err == nil {
			got <- r.(*ClaimsPrepared)
		}
		close(got)
	}()
	h.sync()
	select {
	case r := <-got:
		t.Fatalf("answered before the GPUs were listed: %+v", r)
	default:
	}
	close(slow.gate)
	select {
	case r, ok := <-got:
		if !ok || r.Results["u1"].Err != nil {
			t.Fatalf("after the listing: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer after the listing")
	}
}
