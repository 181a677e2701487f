package devices

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/supervisors"
)

var quiet = slog.New(slog.DiscardHandler)

// fakeProvider serves one resource's devices from memory and records the
// calls it gets.
type fakeProvider struct {
	name string

	mu         sync.Mutex
	devs       []*pluginapi.Device
	watchers   map[int]func([]*pluginapi.Device, string)
	nextW      int
	watchCalls int
	fail       chan error    // a Watch returns the error sent here
	gate       chan struct{} // when set, Allocate waits for it to close
	entered    chan []string // when set, Allocate tells its IDs here first
	allocs     [][]string
	preStarts  int
	allocErr   error
	prefer     func(available, must []string, size int) []string
}

var _ Provider = (*fakeProvider)(nil)

func newFake(name string, ids ...string) *fakeProvider {
	f := &fakeProvider{name: name, watchers: map[int]func([]*pluginapi.Device, string){}, fail: make(chan error, 1)}
	for _, id := range ids {
		f.devs = append(f.devs, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
	}
	return f
}

func cloneDevs(devs []*pluginapi.Device) []*pluginapi.Device {
	out := make([]*pluginapi.Device, 0, len(devs))
	for _, d := range devs {
		out = append(out, &pluginapi.Device{ID: d.ID, Health: d.Health})
	}
	return out
}

func (f *fakeProvider) ResourceName() string { return f.name }

func (f *fakeProvider) Watch(ctx context.Context, update func([]*pluginapi.Device, string)) error {
	f.mu.Lock()
	id := f.nextW
	f.nextW++
	f.watchCalls++
	f.watchers[id] = update
	devs := cloneDevs(f.devs)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.watchers, id)
		f.mu.Unlock()
	}()
	update(devs, "")
	select {
	case <-ctx.Done():
		return nil
	case err := <-f.fail:
		return err
	}
}

// setHealth changes a device's health and tells the watchers.
func (f *fakeProvider) setHealth(id, health, why string) {
	f.mu.Lock()
	for _, d := range f.devs {
		if d.ID == id {
			d.Health = health
		}
	}
	devs := cloneDevs(f.devs)
	ws := make([]func([]*pluginapi.Device, string), 0, len(f.watchers))
	for _, w := range f.watchers {
		ws = append(ws, w)
	}
	f.mu.Unlock()
	for _, w := range ws {
		w(devs, why)
	}
}

func (f *fakeProvider) watching() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.watchers)
}

func (f *fakeProvider) watchCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.watchCalls
}

func (f *fakeProvider) allocCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.allocs)
}

func (f *fakeProvider) Allocate(ctx context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
	f.mu.Lock()
	gate, entered, err := f.gate, f.entered, f.allocErr
	f.mu.Unlock()
	if entered != nil {
		entered <- append([]string(nil), ids...)
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.allocs = append(f.allocs, append([]string(nil), ids...))
	f.mu.Unlock()
	resp := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"FAKE_VISIBLE_DEVICES": strings.Join(ids, ",")}}
	for _, id := range ids {
		resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{ContainerPath: "/dev/" + id, HostPath: "/dev/" + id, Permissions: "rw"})
	}
	return resp, nil
}

func (f *fakeProvider) PreferredAllocation(_ context.Context, available, must []string, size int) ([]string, error) {
	f.mu.Lock()
	p := f.prefer
	f.mu.Unlock()
	if p == nil {
		return nil, nil
	}
	return p(available, must, size), nil
}

func (f *fakeProvider) PreStart(context.Context, []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.preStarts++
	return nil
}

// gpuProvider is a fake provider of GPUs: it also describes, samples and
// takes injected faults (as the simulated NVML provider does).
type gpuProvider struct {
	*fakeProvider
	samples map[string]map[string]float64
	xids    chan string
}

var (
	_ Describer     = (*gpuProvider)(nil)
	_ Sampler       = (*gpuProvider)(nil)
	_ FaultInjector = (*gpuProvider)(nil)
)

func newGPUs(ids ...string) *gpuProvider {
	g := &gpuProvider{fakeProvider: newFake("nvidia.com/gpu", ids...), samples: map[string]map[string]float64{}, xids: make(chan string, 8)}
	for i, id := range ids {
		g.samples[id] = map[string]float64{"DCGM_FI_DEV_GPU_UTIL": float64(10 * i), "DCGM_FI_DEV_FB_USED": 1024}
	}
	return g
}

func (g *gpuProvider) Describe() (map[string]string, map[string]string) {
	return map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "2"},
		map[string]string{"actorlet.io/gpus": "fake"}
}

func (g *gpuProvider) Sample(context.Context) (map[string]map[string]float64, error) {
	out := map[string]map[string]float64{}
	for id, v := range g.samples {
		out[id] = maps.Clone(v)
	}
	return out, nil
}

func (g *gpuProvider) InjectXid(id string, xid uint64) error {
	if xid == 0 {
		return errors.New("xid 0 is no error")
	}
	g.xids <- fmt.Sprintf("%s:%d", id, xid)
	return nil
}

// fakeDialer dials the providers it knows by endpoint.
type fakeDialer struct {
	mu        sync.Mutex
	providers map[string]Provider
	closed    map[string]int
}

var _ Dialer = (*fakeDialer)(nil)

func (d *fakeDialer) Dial(_ context.Context, resourceName, endpoint string, _, _ bool) (Provider, func() error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.providers[endpoint]
	if !ok || p.ResourceName() != resourceName {
		return nil, nil, fmt.Errorf("dial %s: connection refused", endpoint)
	}
	return p, func() error {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.closed[endpoint]++
		return nil
	}, nil
}

func (d *fakeDialer) closes(endpoint string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed[endpoint]
}

// fakeRecorder keeps events as "type reason ns/name: message".
type fakeRecorder struct {
	mu     sync.Mutex
	events []string
}

var _ Recorder = (*fakeRecorder)(nil)

func (r *fakeRecorder) Eventf(obj runtime.Object, eventtype, reason, format string, args ...interface{}) {
	p := obj.(*v1.Pod)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s %s %s/%s: %s", eventtype, reason, p.Namespace, p.Name, fmt.Sprintf(format, args...)))
}

func (r *fakeRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// fakeMetrics keeps the last values set.
type fakeMetrics struct {
	mu        sync.Mutex
	samples   map[string]Owner // resource/device -> owner
	values    map[string]map[string]float64
	devices   map[string][3]int
	unhealthy map[string]int
}

var _ Metrics = (*fakeMetrics)(nil)

func newMetrics() *fakeMetrics {
	return &fakeMetrics{samples: map[string]Owner{}, values: map[string]map[string]float64{}, devices: map[string][3]int{}, unhealthy: map[string]int{}}
}

func (m *fakeMetrics) SetDeviceSample(resource, id string, owner Owner, values map[string]float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples[resource+"/"+id] = owner
	m.values[resource+"/"+id] = values
}

func (m *fakeMetrics) DeleteDeviceSample(resource, id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.samples, resource+"/"+id)
	delete(m.values, resource+"/"+id)
}

func (m *fakeMetrics) SetDevices(resource string, capacity, allocatable, allocated int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.devices[resource] = [3]int{capacity, allocatable, allocated}
}

func (m *fakeMetrics) IncDeviceUnhealthy(resource string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unhealthy[resource]++
}

func (m *fakeMetrics) sample(key string) (Owner, map[string]float64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.samples[key]
	return o, m.values[key], ok
}

func (m *fakeMetrics) unhealthyCount(resource string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unhealthy[resource]
}

func (m *fakeMetrics) counts(resource string) [3]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.devices[resource]
}

// harness runs one DevicesActor in a fresh actor system, with a sink that
// subscribes to its capacity and takes its replies.
type harness struct {
	t       *testing.T
	sys     *actor.ActorSystem
	pid     *actor.PID
	sink    *actor.PID
	clk     *testclock.FakeClock
	store   *fakeStore
	events  *fakeRecorder
	metrics *fakeMetrics
	caps    chan *messages.DeviceCapacity
	replies chan *messages.DevicesAllocated
	cfg     Config
}

// newHarness makes the harness; edit changes the Config before the actor
// is spawned (by spawn).
func newHarness(t *testing.T, edit func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t,
		sys:     actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet })),
		clk:     testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		store:   &fakeStore{},
		events:  &fakeRecorder{},
		metrics: newMetrics(),
		caps:    make(chan *messages.DeviceCapacity, 100),
		replies: make(chan *messages.DevicesAllocated, 100),
	}
	h.sink = h.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.DeviceCapacity:
			h.caps <- m
		case *messages.DevicesAllocated:
			h.replies <- m
		}
	}))
	h.cfg = Config{Store: h.store, Clock: h.clk, Subscribers: []*actor.PID{h.sink}, Events: h.events, Metrics: h.metrics, SamplePeriod: -1}
	if edit != nil {
		edit(&h.cfg)
	}
	return h
}

// spawn starts a DevicesActor (a new one with the same Config and Store:
// a restarted process) and waits until it handled Started.
func (h *harness) spawn() {
	h.t.Helper()
	props := actor.PropsFromProducer(New(h.cfg, quiet), actor.WithReceiverMiddleware(supervisors.Chaos(), actortest.Barrier()))
	h.pid = h.sys.Root.Spawn(props)
	pid := h.pid
	h.t.Cleanup(func() { h.sys.Root.Stop(pid) })
	actortest.Sync(h.t, h.sys, h.pid)
}

// stop stops the actor and waits until it is gone.
func (h *harness) stop() {
	h.t.Helper()
	if err := h.sys.Root.StopFuture(h.pid).Wait(); err != nil {
		h.t.Fatalf("stop: %v", err)
	}
}

func (h *harness) send(m any) { h.sys.Root.Send(h.pid, m) }

func (h *harness) sync() { h.t.Helper(); actortest.Sync(h.t, h.sys, h.pid) }

// capacity waits for the next DeviceCapacity told to subscribers.
func (h *harness) capacity() *messages.DeviceCapacity {
	h.t.Helper()
	select {
	case c := <-h.caps:
		return c
	case <-time.After(10 * time.Second):
		h.t.Fatal("no DeviceCapacity told")
		return nil
	}
}

// noCapacity fails if a DeviceCapacity was told since the last one read
// (after the actor handled everything sent to it).
func (h *harness) noCapacity() {
	h.t.Helper()
	h.sync()
	select {
	case c := <-h.caps:
		h.t.Fatalf("capacity told though nothing changed: %+v", c)
	default:
	}
}

// waitCapacity waits for a DeviceCapacity with these allocatable counts
// of the resource (capacity counts all devices).
func (h *harness) waitCapacity(res string, capacity, allocatable int64) *messages.DeviceCapacity {
	h.t.Helper()
	for {
		c := h.capacity()
		if c.Capacity[v1.ResourceName(res)] == capacity && c.Allocatable[v1.ResourceName(res)] == allocatable {
			return c
		}
	}
}

// allocate asks for a pod's devices and waits for the answer.
func (h *harness) allocate(pod *v1.Pod) *messages.DevicesAllocated {
	h.t.Helper()
	h.send(&messages.AllocateDevices{Pod: pod, ReplyTo: h.sink})
	return h.reply()
}

func (h *harness) reply() *messages.DevicesAllocated {
	h.t.Helper()
	select {
	case r := <-h.replies:
		return r
	case <-time.After(10 * time.Second):
		h.t.Fatal("no DevicesAllocated")
		return nil
	}
}

// ask sends a request and returns the actor's response.
func (h *harness) ask(m any) any {
	h.t.Helper()
	r, err := h.sys.Root.RequestFuture(h.pid, m, 10*time.Second).Result()
	if err != nil {
		h.t.Fatalf("%T: %v", m, err)
	}
	return r
}

// podDevices is what GetPodDevices says, "ns/name container resource" to IDs.
func (h *harness) podDevices() map[string][]string {
	h.t.Helper()
	out := map[string][]string{}
	for _, p := range h.ask(&messages.GetPodDevices{}).(*messages.PodDevicesList).Pods {
		for c, byRes := range p.Containers {
			for r, ids := range byRes {
				out[p.Namespace+"/"+p.Name+" "+c+" "+string(r)] = ids
			}
		}
	}
	return out
}

// gpuPod is a pod whose container c asks for n of resource res per
// container name given (init containers prefixed "init:").
func gpuPod(name string, res string, ctrs map[string]int) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
	for _, c := range sortedKeys(ctrs) {
		ctr := v1.Container{Name: strings.TrimPrefix(c, "init:"), Resources: v1.ResourceRequirements{
			Limits: v1.ResourceList{v1.ResourceName(res): *apiresource.NewQuantity(int64(ctrs[c]), apiresource.DecimalSI)}}}
		if strings.HasPrefix(c, "init:") {
			p.Spec.InitContainers = append(p.Spec.InitContainers, ctr)
		} else {
			p.Spec.Containers = append(p.Spec.Containers, ctr)
		}
	}
	return p
}

func onePod(name string, n int) *v1.Pod {
	return gpuPod(name, "nvidia.com/gpu", map[string]int{"c": n})
}
