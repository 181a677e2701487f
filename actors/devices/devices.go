package devices

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// Reasons the actor gives, as upstream's device manager and kubelet.
const (
	// ReasonUnexpectedAdmissionError is DevicesAllocated's Reason when a
	// pod cannot have its devices.
	ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"
	// ReasonDeviceUnhealthy is the Warning event on a pod holding a device
	// that turned unhealthy.
	ReasonDeviceUnhealthy = "DeviceUnhealthy"
)

// Recorder records Kubernetes events (client-go's record.EventRecorder).
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Owner is who holds a device, for metric labels: the pod's namespace and
// name and the container; the zero Owner for a free device.
type Owner struct {
	Namespace, Pod, Container string
}

// Metrics receives the actor's device metrics (adapters/metrics: DCGM
// exporter's names, with pod, namespace and container labels).
type Metrics interface {
	// SetDeviceSample sets one device's sampled values (metric name, e.g.
	// DCGM_FI_DEV_GPU_UTIL, to value), replacing its earlier sample: its
	// owner may have changed since.
	SetDeviceSample(resource, deviceID string, owner Owner, values map[string]float64)
	// DeleteDeviceSample drops the samples of a device no longer measured.
	DeleteDeviceSample(resource, deviceID string)
	// SetDevices sets a resource's device counts: all, healthy, allocated.
	SetDevices(resource string, capacity, allocatable, allocated int)
	// IncDeviceUnhealthy counts a device of the resource turning unhealthy.
	IncDeviceUnhealthy(resource string)
}

// Config of the DevicesActor. Store and Clock are required.
type Config struct {
	// Providers are the built-in providers (the GPUs on NVML), watched from
	// the actor's start; one per resource.
	Providers []Provider
	// Dialer connects to device plugins that register; nil: plugins are
	// refused (logged).
	Dialer Dialer
	// Store keeps the checkpoint of allocations.
	Store Store
	// Subscribers are told DeviceCapacity whenever it changes, and once
	// after the first device list of every built-in provider (at once when
	// there are none).
	Subscribers []*actor.PID
	// Events records events on pods (nil: none).
	Events Recorder
	// Metrics receives device samples and counts (nil: none).
	Metrics Metrics
	// Clock paces sampling and watch retries.
	Clock clock.WithDelayedExecution
	// SamplePeriod is how often Samplers are polled: 0 means 10s, negative
	// turns sampling off.
	SamplePeriod time.Duration
	// OpTimeout bounds one call of a provider or the dialer (30s).
	OpTimeout time.Duration
	// RetryBackoff paces restarting a provider whose Watch failed (1s
	// doubling to 1m).
	RetryBackoff actorkit.Backoff
}

// New returns the DevicesActor's producer (spawn it once, named
// "devices", under the root). It panics on a missing Store or Clock, a nil
// provider or two providers of one resource.
func New(cfg Config, log *slog.Logger) actor.Producer {
	if cfg.Store == nil || cfg.Clock == nil {
		panic("devices.New: Store and Clock are required")
	}
	seen := map[string]bool{}
	for _, p := range cfg.Providers {
		if p == nil {
			panic("devices.New: a nil provider")
		}
		name := p.ResourceName()
		if name == "" || seen[name] {
			panic(fmt.Sprintf("devices.New: provider resource name %q is empty or given twice", name))
		}
		seen[name] = true
	}
	if cfg.SamplePeriod == 0 {
		cfg.SamplePeriod = 10 * time.Second
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 30 * time.Second
	}
	if cfg.RetryBackoff.Base <= 0 {
		cfg.RetryBackoff = actorkit.Backoff{Base: time.Second, Cap: time.Minute}
	}
	if log == nil {
		log = slog.Default()
	}
	log = log.With("actor", "devices")
	sh := &shared{saver: &saver{store: cfg.Store}, plugins: map[string]plugin{}}
	cfg.Providers = append([]Provider(nil), cfg.Providers...)
	cfg.Subscribers = append([]*actor.PID(nil), cfg.Subscribers...)
	return func() actor.Actor {
		return &Actor{cfg: cfg, log: log, sh: sh}
	}
}

// shared is what outlives one incarnation of the actor: the checkpoint
// writer and the device plugins that registered (they do not register
// again because the actor restarted).
type shared struct {
	saver *saver

	mu      sync.Mutex
	plugins map[string]plugin // by resource name
}

type plugin struct {
	prov  Provider
	close func() error
}

// Actor is the DevicesActor.
type Actor struct {
	cfg Config
	log *slog.Logger
	sh  *shared

	self   actorkit.Self
	ctx    context.Context // cancelled when this incarnation ends
	cancel context.CancelFunc

	res     map[string]*resource
	pods    map[types.UID]*podRecord    // allocated (and checkpointed, or being saved)
	pending map[types.UID]*pendingAlloc // being allocated
	nextOp  uint64
	epochs  uint64 // watch sessions started
	sweeps  int    // PodsKnown handled

	initialSent bool
	lastSent    *messages.DeviceCapacity
	counts      map[string][3]int // the last SetDevices per resource

	saving      bool
	dirty       bool
	saveWaiters []saveWaiter

	sampleTimer actorkit.Timer
}

// resource is one extended resource and its provider.
type resource struct {
	name    string
	prov    Provider
	builtin bool

	epoch  uint64 // the watch session running (0: none)
	cancel context.CancelFunc
	retry  actorkit.Timer

	devices  map[string]bool // ID -> healthy; nil: none (not listed yet, or the watch failed)
	health   map[string]bool // the last health seen of each device, across watch failures
	listed   bool            // listed once, or failed (the first capacity waits for built-ins)
	failures int

	labels, annotations map[string]string

	sampling  bool
	sampled   map[string]bool
	sampleErr string
}

// pendingAlloc is a pod being allocated: its devices are reserved from its
// plan on (so no other pod gets them) until it is recorded or fails.
type pendingAlloc struct {
	op        uint64
	uid       types.UID
	namespace string
	name      string
	needs     []containerNeed
	waiters   []*actor.PID
	reserved  map[string][]string // by resource; nil before the plan
}

// saveWaiter is an allocated pod whose reply waits for its checkpoint.
type saveWaiter struct {
	rec *podRecord
	to  []*actor.PID
}

// Messages the actor sends itself.
type (
	devState struct {
		id      string
		healthy bool
	}
	devicesUpdate struct {
		actorkit.Tag
		resource            string
		epoch               uint64
		devices             []devState
		why                 string
		labels, annotations map[string]string
	}
	watchEnded struct {
		actorkit.Tag
		resource string
		epoch    uint64
		err      error
	}
	dialed struct {
		actorkit.Tag
		reg   *messages.DevicePluginRegistered
		prov  Provider
		close func() error
		err   error
	}
	preferred struct {
		actorkit.Tag
		uid  types.UID
		op   uint64
		plan plan
		err  error
	}
	allocated struct {
		actorkit.Tag
		uid        types.UID
		op         uint64
		containers []*containerRecord
		err        error
	}
	saved struct {
		actorkit.Tag
		waiters []saveWaiter
		err     error
	}
	sampled struct {
		actorkit.Tag
		resource string
		values   map[string]map[string]float64
		err      error
	}
	faultDone struct {
		actorkit.Tag
		to  *actor.PID
		err error
	}
)

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.handleStarted(ctx)
	case *actor.Restarting:
		a.handleEnd(false)
	case *actor.Stopping:
		a.handleEnd(true)
	case *messages.AllocateDevices:
		a.handleAllocate(ctx, m)
	case *messages.ReleaseDevices:
		a.handleRelease(m)
	case *messages.PodsKnown:
		a.handlePodsKnown(m)
	case *messages.GetDeviceCapacity:
		a.handleGetCapacity(ctx, m)
	case *messages.DevicePluginRegistered:
		a.handleRegistered(m)
	case *messages.GetPodDevices:
		a.handleGetPodDevices(ctx, m)
	case *messages.GetAllocatableDevices:
		a.handleGetAllocatable(ctx)
	case *messages.InjectDeviceFault:
		a.handleInjectFault(ctx, m)
	case *devicesUpdate:
		if a.self.Mine(m) {
			a.handleUpdate(m)
		}
	case *watchEnded:
		if a.self.Mine(m) {
			a.handleWatchEnded(m)
		}
	case *dialed:
		// Handled whatever the incarnation: the plugin registered once.
		a.handleDialed(m)
	case *preferred:
		if a.self.Mine(m) {
			a.handlePreferred(m)
		}
	case *allocated:
		if a.self.Mine(m) {
			a.handleAllocated(m)
		}
	case *saved:
		if a.self.Mine(m) {
			a.handleSaved(m)
		}
	case *sampled:
		if a.self.Mine(m) {
			a.handleSampled(m)
		}
	case *faultDone:
		a.handleFaultDone(m)
	case *actorkit.Fired:
		a.handleFired(m)
	}
}

func (a *Actor) handleStarted(ctx actor.Context) {
	a.self = actorkit.Start(ctx, a.cfg.Clock)
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.res = map[string]*resource{}
	a.pods = map[types.UID]*podRecord{}
	a.pending = map[types.UID]*pendingAlloc{}
	a.counts = map[string][3]int{}
	a.sampleTimer = actorkit.NewTimer("sample")

	b, err := a.sh.saver.load()
	if err == nil {
		var pods map[types.UID]*podRecord
		if pods, err = decodeCheckpoint(b); err == nil {
			a.pods = pods
		}
	}
	switch {
	case err != nil:
		a.log.Warn("device checkpoint ignored: starting with no allocation", "err", err)
	case len(a.pods) > 0:
		a.log.Info("device allocations restored from the checkpoint", "pods", len(a.pods))
	}

	for _, p := range a.cfg.Providers {
		a.addResource(p.ResourceName(), p, true)
	}
	a.sh.mu.Lock()
	plugins := maps.Clone(a.sh.plugins)
	a.sh.mu.Unlock()
	for _, name := range sortedKeys(plugins) {
		a.addResource(name, plugins[name].prov, false)
	}
	if a.cfg.SamplePeriod > 0 {
		a.sampleTimer.Arm(a.self, a.cfg.SamplePeriod)
	}
	a.publish() // at once when no built-in provider must list first
}

// handleEnd ends this incarnation's watches, calls and timers; stopping
// for good also closes the device plugins' connections.
func (a *Actor) handleEnd(stopping bool) {
	if a.cancel != nil {
		a.cancel()
	}
	a.sampleTimer.Stop()
	for _, r := range a.res {
		r.retry.Stop()
	}
	if !stopping {
		return
	}
	a.sh.mu.Lock()
	plugins := a.sh.plugins
	a.sh.plugins = map[string]plugin{}
	a.sh.mu.Unlock()
	for name, p := range plugins {
		a.closePlugin(name, p)
	}
}

func (a *Actor) closePlugin(name string, p plugin) {
	if p.close == nil {
		return
	}
	log := a.log
	go func() {
		if err := p.close(); err != nil {
			log.Warn("closing a device plugin", "resource", name, "err", err)
		}
	}()
}

// addResource starts watching prov for the resource name, replacing the
// provider it had (its devices count until the new one lists).
func (a *Actor) addResource(name string, prov Provider, builtin bool) {
	r := a.res[name]
	if r == nil {
		r = &resource{name: name, health: map[string]bool{}, retry: actorkit.NewTimer("watch/" + name)}
		a.res[name] = r
	} else {
		a.stopWatch(r)
		r.retry.Stop()
		r.failures = 0
	}
	r.prov, r.builtin = prov, builtin
	a.startWatch(r)
}

func (a *Actor) stopWatch(r *resource) {
	if r.cancel != nil {
		r.cancel()
		r.cancel = nil
	}
	r.epoch = 0
}

// startWatch runs the provider's Watch in a goroutine of this incarnation:
// each list comes back as a devicesUpdate, its end as watchEnded.
func (a *Actor) startWatch(r *resource) {
	a.epochs++
	r.epoch = a.epochs
	wctx, cancel := context.WithCancel(a.ctx)
	r.cancel = cancel
	prov, name, epoch, self := r.prov, r.name, r.epoch, a.self
	tag := actorkit.Tag{Gen: self.Gen()}
	desc, _ := prov.(Describer)
	go func() {
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("provider panicked: %v", p)
				}
			}()
			return prov.Watch(wctx, func(devs []*pluginapi.Device, why string) {
				u := &devicesUpdate{Tag: tag, resource: name, epoch: epoch, why: why, devices: make([]devState, 0, len(devs))}
				for _, d := range devs {
					if d != nil {
						u.devices = append(u.devices, devState{id: d.GetID(), healthy: d.GetHealth() == pluginapi.Healthy})
					}
				}
				if desc != nil {
					l, an := desc.Describe()
					u.labels, u.annotations = maps.Clone(l), maps.Clone(an)
				}
				self.Send(u)
			})
		}()
		if wctx.Err() != nil {
			return // replaced or stopped: nobody waits for this end
		}
		self.Send(&watchEnded{Tag: tag, resource: name, epoch: epoch, err: err})
	}()
}

func (a *Actor) handleUpdate(m *devicesUpdate) {
	r := a.res[m.resource]
	if r == nil || r.epoch != m.epoch {
		return // a replaced provider's, or after its watch ended
	}
	devs := make(map[string]bool, len(m.devices))
	for _, d := range m.devices {
		if d.id != "" {
			devs[d.id] = d.healthy
		}
	}
	var turned []string
	for _, id := range sortedKeys(devs) {
		if was, seen := r.health[id]; seen && was && !devs[id] {
			turned = append(turned, id)
		}
		r.health[id] = devs[id]
	}
	r.devices, r.listed, r.failures = devs, true, 0
	r.labels, r.annotations = m.labels, m.annotations
	for _, id := range turned {
		a.log.Warn("device unhealthy", "resource", r.name, "device", id, "why", m.why)
		if a.cfg.Metrics != nil {
			a.cfg.Metrics.IncDeviceUnhealthy(r.name)
		}
		a.warnHolders(r.name, id, m.why)
	}
	a.publish()
}

// warnHolders records a Warning event on each pod holding the device.
func (a *Actor) warnHolders(resource, id, why string) {
	if a.cfg.Events == nil {
		return
	}
	if why == "" {
		why = "reported unhealthy by its provider"
	}
	for _, uid := range sortedKeys(a.pods) {
		p := a.pods[uid]
		var ctrs []string
		for _, c := range p.Containers {
			for _, r := range c.Resources {
				if r.Resource == resource && contains(r.IDs, id) {
					ctrs = append(ctrs, c.Name)
				}
			}
		}
		if len(ctrs) > 0 {
			a.cfg.Events.Eventf(podRef(p), v1.EventTypeWarning, ReasonDeviceUnhealthy,
				"Device %s (%s) of container %s is unhealthy: %s", id, resource, strings.Join(ctrs, ", "), why)
		}
	}
}

func podRef(p *podRecord) *v1.Pod {
	return &v1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID}}
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func (a *Actor) handleWatchEnded(m *watchEnded) {
	r := a.res[m.resource]
	if r == nil || r.epoch != m.epoch {
		return
	}
	a.stopWatch(r)
	err := m.err
	if err == nil {
		err = errors.New("watch ended")
	}
	r.failures++
	retry := a.cfg.RetryBackoff.Delay(r.failures)
	a.log.Warn("device provider failed: its devices count as gone until it lists again",
		"resource", r.name, "err", err, "retryIn", retry)
	r.devices, r.listed = nil, true
	r.retry.Arm(a.self, retry)
	a.publish()
}

func (a *Actor) handleFired(m *actorkit.Fired) {
	if m.Name == "sample" {
		if a.sampleTimer.Fired(a.self, m) {
			a.sample()
			a.sampleTimer.Arm(a.self, a.cfg.SamplePeriod)
		}
		return
	}
	if r := a.res[strings.TrimPrefix(m.Name, "watch/")]; r != nil && r.retry.Fired(a.self, m) {
		a.startWatch(r)
	}
}

// capacity is the count of every resource's devices, all and healthy,
// with the labels and annotations of its provider (merged in resource
// order).
func (a *Actor) capacity() *messages.DeviceCapacity {
	c := &messages.DeviceCapacity{Capacity: map[v1.ResourceName]int64{}, Allocatable: map[v1.ResourceName]int64{},
		Labels: map[string]string{}, Annotations: map[string]string{}}
	for _, name := range sortedKeys(a.res) {
		r := a.res[name]
		var healthy int64
		for _, ok := range r.devices {
			if ok {
				healthy++
			}
		}
		c.Capacity[v1.ResourceName(name)] = int64(len(r.devices))
		c.Allocatable[v1.ResourceName(name)] = healthy
		maps.Copy(c.Labels, r.labels)
		maps.Copy(c.Annotations, r.annotations)
	}
	return c
}

func copyCapacity(c *messages.DeviceCapacity) *messages.DeviceCapacity {
	return &messages.DeviceCapacity{Capacity: maps.Clone(c.Capacity), Allocatable: maps.Clone(c.Allocatable),
		Labels: maps.Clone(c.Labels), Annotations: maps.Clone(c.Annotations)}
}

func equalCapacity(x, y *messages.DeviceCapacity) bool {
	return maps.Equal(x.Capacity, y.Capacity) && maps.Equal(x.Allocatable, y.Allocatable) &&
		maps.Equal(x.Labels, y.Labels) && maps.Equal(x.Annotations, y.Annotations)
}

// publish tells the subscribers the capacity when it changed (the first
// time once every built-in provider listed or failed) and sets the device
// counts.
func (a *Actor) publish() {
	a.setCounts(false)
	if !a.initialSent {
		for _, r := range a.res {
			if r.builtin && !r.listed {
				return
			}
		}
	}
	c := a.capacity()
	if a.initialSent && equalCapacity(c, a.lastSent) {
		return
	}
	a.initialSent, a.lastSent = true, c
	for _, sub := range a.cfg.Subscribers {
		a.self.SendTo(sub, copyCapacity(c))
	}
}

// setCounts sets each resource's device counts (only those that changed
// unless all).
func (a *Actor) setCounts(all bool) {
	if a.cfg.Metrics == nil {
		return
	}
	for _, name := range sortedKeys(a.res) {
		r := a.res[name]
		healthy := 0
		for _, ok := range r.devices {
			if ok {
				healthy++
			}
		}
		n := [3]int{len(r.devices), healthy, len(a.allocatedOf(name))}
		if old, ok := a.counts[name]; all || !ok || old != n {
			a.counts[name] = n
			a.cfg.Metrics.SetDevices(name, n[0], n[1], n[2])
		}
	}
}

// allocatedOf is the devices of the resource held by allocated pods.
func (a *Actor) allocatedOf(resource string) map[string]bool {
	out := map[string]bool{}
	for _, p := range a.pods {
		for _, c := range p.Containers {
			for _, r := range c.Resources {
				if r.Resource == resource {
					for _, id := range r.IDs {
						out[id] = true
					}
				}
			}
		}
	}
	return out
}

// free is what each known resource can give a new pod: its healthy devices
// that no allocated pod holds and no pending one reserved, sorted.
func (a *Actor) free() map[string][]string {
	out := make(map[string][]string, len(a.res))
	for name, r := range a.res {
		busy := a.allocatedOf(name)
		for _, pa := range a.pending {
			for _, id := range pa.reserved[name] {
				busy[id] = true
			}
		}
		ids := []string{}
		for id, ok := range r.devices {
			if ok && !busy[id] {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		out[name] = ids
	}
	return out
}

func (a *Actor) handleGetCapacity(ctx actor.Context, m *messages.GetDeviceCapacity) {
	to := m.ReplyTo
	if to == nil {
		to = ctx.Sender()
	}
	if to != nil {
		ctx.Send(to, copyCapacity(a.capacity()))
	}
}

func (a *Actor) handleGetPodDevices(ctx actor.Context, m *messages.GetPodDevices) {
	out := &messages.PodDevicesList{Pods: []messages.PodDevices{}}
	for _, uid := range sortedKeys(a.pods) {
		if m.UID != "" && m.UID != uid {
			continue
		}
		p := a.pods[uid]
		pd := messages.PodDevices{UID: p.UID, Namespace: p.Namespace, Name: p.Name,
			Containers: map[string]map[v1.ResourceName][]string{}}
		for _, c := range p.Containers {
			byRes := map[v1.ResourceName][]string{}
			for _, r := range c.Resources {
				byRes[v1.ResourceName(r.Resource)] = append([]string(nil), r.IDs...)
			}
			pd.Containers[c.Name] = byRes
		}
		out.Pods = append(out.Pods, pd)
	}
	if ctx.Sender() != nil {
		ctx.Respond(out)
	}
}

func (a *Actor) handleGetAllocatable(ctx actor.Context) {
	out := &messages.AllocatableDevices{Devices: map[v1.ResourceName][]string{}}
	for name, r := range a.res {
		ids := []string{}
		for id, ok := range r.devices {
			if ok {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		out.Devices[v1.ResourceName(name)] = ids
	}
	if ctx.Sender() != nil {
		ctx.Respond(out)
	}
}

func (a *Actor) handleRegistered(m *messages.DevicePluginRegistered) {
	if m.ResourceName == "" || !isExtended(v1.ResourceName(m.ResourceName)) || m.Endpoint == "" {
		a.log.Warn("device plugin refused: its resource must be an extended resource name and its endpoint a socket",
			"resource", m.ResourceName, "endpoint", m.Endpoint)
		return
	}
	if a.cfg.Dialer == nil {
		a.log.Warn("device plugin refused: this node takes no device plugins", "resource", m.ResourceName, "endpoint", m.Endpoint)
		return
	}
	reg := *m
	dialer := a.cfg.Dialer
	actorkit.Go(a.self, a.cfg.OpTimeout, func(ctx context.Context) (r *dialed) {
		defer func() {
			if p := recover(); p != nil {
				r = &dialed{reg: &reg, err: fmt.Errorf("dialer panicked: %v", p)}
			}
		}()
		prov, closer, err := dialer.Dial(ctx, reg.ResourceName, reg.Endpoint, reg.PreStartRequired, reg.GetPreferredAllocationAvailable)
		if err == nil && prov == nil {
			err = errors.New("the dialer returned no provider")
		}
		return &dialed{reg: &reg, prov: prov, close: closer, err: err}
	})
}

func (a *Actor) handleDialed(m *dialed) {
	name := m.reg.ResourceName
	if m.err != nil {
		a.log.Warn("device plugin dropped: dial failed", "resource", name, "endpoint", m.reg.Endpoint, "err", m.err)
		return
	}
	a.log.Info("device plugin registered", "resource", name, "endpoint", m.reg.Endpoint)
	a.sh.mu.Lock()
	old, had := a.sh.plugins[name]
	a.sh.plugins[name] = plugin{prov: m.prov, close: m.close}
	a.sh.mu.Unlock()
	if had {
		a.closePlugin(name, old)
	}
	a.addResource(name, m.prov, false)
}

func (a *Actor) handleInjectFault(ctx actor.Context, m *messages.InjectDeviceFault) {
	to := ctx.Sender()
	answer := func(err string) {
		if to != nil {
			ctx.Send(to, &messages.DeviceFaultInjected{Err: err})
		}
	}
	var r *resource
	for _, name := range sortedKeys(a.res) {
		if _, ok := a.res[name].devices[m.DeviceID]; ok {
			r = a.res[name]
			break
		}
	}
	if r == nil {
		answer(fmt.Sprintf("no device %q", m.DeviceID))
		return
	}
	fi, ok := r.prov.(FaultInjector)
	if !ok {
		answer(fmt.Sprintf("device %s (%s) is not simulated: its provider takes no injected fault", m.DeviceID, r.name))
		return
	}
	id, xid := m.DeviceID, m.Xid
	actorkit.Go(a.self, 0, func(context.Context) (r *faultDone) {
		defer func() {
			if p := recover(); p != nil {
				r = &faultDone{to: to, err: fmt.Errorf("fault injector panicked: %v", p)}
			}
		}()
		return &faultDone{to: to, err: fi.InjectXid(id, xid)}
	})
}

func (a *Actor) handleFaultDone(m *faultDone) {
	out := &messages.DeviceFaultInjected{}
	if m.err != nil {
		out.Err = m.err.Error()
	}
	a.self.SendTo(m.to, out)
}

// sample polls every Sampler off the mailbox (one poll per resource at a
// time).
func (a *Actor) sample() {
	for _, name := range sortedKeys(a.res) {
		r := a.res[name]
		s, ok := r.prov.(Sampler)
		if !ok || r.sampling {
			continue
		}
		r.sampling = true
		actorkit.GoIn(a.self, a.ctx, a.cfg.OpTimeout, func(ctx context.Context) (out *sampled) {
			defer func() {
				if p := recover(); p != nil {
					out = &sampled{resource: name, err: fmt.Errorf("sampler panicked: %v", p)}
				}
			}()
			v, err := s.Sample(ctx)
			return &sampled{resource: name, values: v, err: err}
		})
	}
}

func (a *Actor) handleSampled(m *sampled) {
	r := a.res[m.resource]
	if r == nil {
		return
	}
	r.sampling = false
	if m.err != nil {
		if msg := m.err.Error(); msg != r.sampleErr {
			a.log.Warn("device sampling failed", "resource", r.name, "err", m.err)
			r.sampleErr = msg
		}
		return
	}
	r.sampleErr = ""
	if a.cfg.Metrics == nil {
		return
	}
	owners := a.owners(r.name)
	now := map[string]bool{}
	for _, id := range sortedKeys(m.values) {
		now[id] = true
		a.cfg.Metrics.SetDeviceSample(r.name, id, owners[id], maps.Clone(m.values[id]))
	}
	for _, id := range sortedKeys(r.sampled) {
		if !now[id] {
			a.cfg.Metrics.DeleteDeviceSample(r.name, id)
		}
	}
	r.sampled = now
	a.setCounts(true)
}

// owners is who holds each allocated device of the resource: the last
// container in the pod's order (a regular container over the init
// container whose device it reuses).
func (a *Actor) owners(resource string) map[string]Owner {
	out := map[string]Owner{}
	for _, uid := range sortedKeys(a.pods) {
		p := a.pods[uid]
		for _, c := range p.Containers {
			for _, r := range c.Resources {
				if r.Resource != resource {
					continue
				}
				for _, id := range r.IDs {
					out[id] = Owner{Namespace: p.Namespace, Pod: p.Name, Container: c.Name}
				}
			}
		}
	}
	return out
}
