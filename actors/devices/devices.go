package devices

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
	// DRA serves a built-in resource through DRA instead (dra.go); nil:
	// the device plugin path only.
	DRA *DRAConfig
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
	if cfg.DRA != nil && (cfg.DRA.Store == nil || cfg.DRA.CDI == nil || cfg.DRA.Resource == "") {
		panic("devices.New: DRA needs its Resource, Store and CDI")
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

	draSaver *saver // the DRA claims' checkpoint writer (dra.go)
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

	dra *draState // nil: DRA off (dra.go)
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
	case *PrepareClaims:
		a.handlePrepareClaims(ctx, m)
	case *UnprepareClaims:
		a.handleUnprepareClaims(ctx, m)
	case *draOpDone:
		// Handled whatever the incarnation: the specs were written.
		a.handleDRAOpDone(m)
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

	a.draStart()
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
