// Package dra is the ClaimsActor: Dynamic Resource Allocation on the node,
// as upstream's DRA manager (pkg/kubelet/cm/dra). DRA drivers register
// through the plugin registration directory (adapters/dra hands them on);
// before a pod's sandbox is created the PodActor asks PrepareClaims: every
// ResourceClaim of the pod is read from the API server, must be allocated
// and reserved for the pod, and is prepared by its drivers
// (NodePrepareResources); the CDI device IDs they answer go to the
// containers that use the claim. Once the pod is gone (UnprepareClaims)
// each claim no other pod of the node uses is unprepared. The claims are
// checkpointed (<root-dir>/dra_manager_state) before any answer, so a
// restarted agent neither prepares again nor leaks. The drivers' resource
// health streams feed ClaimsHealth to the PodActors.
package dra

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// Driver is one registered DRA driver's gRPC service (adapters/dra.Client).
type Driver interface {
	Prepare(ctx context.Context, claims []*drapb.Claim) (*drapb.NodePrepareResourcesResponse, error)
	Unprepare(ctx context.Context, claims []*drapb.Claim) (*drapb.NodeUnprepareResourcesResponse, error)
	// WatchHealth follows the driver's health stream until ctx ends or the
	// stream does; ErrNoHealth-like errors (the driver has no health
	// service, or answers Unimplemented) end the watch for good.
	WatchHealth(ctx context.Context, report func(*drahealthv1.NodeWatchResourcesResponse)) error
	Close() error
}

// Dialer connects to a driver that registered; connected is told
// whenever the connection comes up or goes down (from any goroutine).
type Dialer interface {
	Dial(driver, endpoint string, services []string, connected func(bool)) (Driver, error)
}

// ClaimGetter reads a ResourceClaim from the API server.
type ClaimGetter interface {
	GetClaim(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error)
}

// Wiper deletes the node's ResourceSlices of a driver ("": every driver).
type Wiper interface {
	WipeSlices(ctx context.Context, driver string) error
}

// Metrics receives the actor's metrics (adapters/dra.Metrics).
type Metrics interface {
	ObserveOperation(op string, d time.Duration, failed bool)
	IncDriverError(driver, op string)
	SetClaimsInUse(byDriver map[string]int)
}

// Config of the ClaimsActor. Store and Clock are required.
type Config struct {
	Dialer Dialer
	// Claims reads ResourceClaims; nil (standalone mode): a pod with claims
	// cannot be prepared.
	Claims ClaimGetter
	// Wiper deletes ResourceSlices; nil: none are deleted.
	Wiper   Wiper
	Store   Store
	Metrics Metrics
	Clock   clock.WithDelayedExecution
	// APITimeout bounds reading a pod's claims (default 30s); the drivers'
	// calls have their own timeout (the Dialer's).
	APITimeout time.Duration
	// RetryBackoff paces unprepare retries and slice wiping (1s doubling
	// to 5m, as upstream's wiping).
	RetryBackoff actorkit.Backoff
	// WipeDelay is how long a driver may stay away before its slices are
	// deleted (upstream: 30s). Negative: never.
	WipeDelay time.Duration
	// HealthRetry paces restarting a failed health stream (upstream: 5s).
	HealthRetry time.Duration
	// HealthTimeout: a device's health older than this (or than the
	// driver's own timeout for it) reads Unknown (upstream: 30s).
	HealthTimeout time.Duration
}

// Reasons of the actor's log lines and answers.
const (
	opPrepare   = "PrepareResources"
	opUnprepare = "UnprepareResources"
)

// New returns the ClaimsActor's producer (spawn it once, named "dra",
// under the root). It panics on a missing Store or Clock.
func New(cfg Config, log *slog.Logger) actor.Producer {
	if cfg.Store == nil || cfg.Clock == nil {
		panic("dra.New: Store and Clock are required")
	}
	if cfg.APITimeout <= 0 {
		cfg.APITimeout = 30 * time.Second
	}
	if cfg.RetryBackoff.Base <= 0 {
		cfg.RetryBackoff = actorkit.Backoff{Base: time.Second, Cap: 5 * time.Minute}
	}
	if cfg.WipeDelay == 0 {
		cfg.WipeDelay = 30 * time.Second
	}
	if cfg.HealthRetry <= 0 {
		cfg.HealthRetry = 5 * time.Second
	}
	if cfg.HealthTimeout <= 0 {
		cfg.HealthTimeout = 30 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	log = log.With("actor", "dra")
	sh := &shared{drivers: map[string]*driverConn{}, health: map[string]map[string]deviceHealth{}}
	return func() actor.Actor { return &Actor{cfg: cfg, log: log, sh: sh} }
}

// shared outlives one incarnation: the registered drivers (they do not
// register again because the actor restarted), their health, and whether
// the start-up wipe of ResourceSlices ran.
type shared struct {
	mu      sync.Mutex
	drivers map[string]*driverConn
	health  map[string]map[string]deviceHealth // driver -> pool/device
	wiped   bool
}

// driverConn is one registered driver.
type driverConn struct {
	name, endpoint string
	drv            Driver
	stop           context.CancelFunc // ends its health stream
	connected      bool               // read and written in the mailbox
}

// wipeState is a pending deletion of a driver's slices.
type wipeState struct {
	seq      uint64
	attempts int
}

// deviceHealth is the last health a driver reported for a device.
type deviceHealth struct {
	health  drahealthv1.HealthStatus
	message string
	at      time.Time
	timeout time.Duration
}

// Actor is the ClaimsActor.
type Actor struct {
	cfg Config
	log *slog.Logger
	sh  *shared

	self   actorkit.Self
	ctx    context.Context
	cancel context.CancelFunc

	claims map[string]*claimInfo // by namespace/name; checkpointed
	ops    map[types.UID]*podOp  // a prepare or unprepare in flight
	// pods are the pods answered (their last pod and PodActor), for health.
	pods map[types.UID]*podRef
	// gone are pods to unprepare once their op ends, or again after a
	// failure (with the attempts so far).
	gone map[types.UID]int
	// unprepWaiters are told ClaimsUnprepared once the pod's claims are.
	unprepWaiters map[types.UID][]*actor.PID
	wipes         map[string]*wipeState // drivers whose slices wait to be wiped
	wipeSeq       uint64
}

// podRef is an answered pod: its spec (read only) and its PodActor.
type podRef struct {
	pod  *v1.Pod
	to   *actor.PID
	sent string // the last ClaimsHealth sent, as a key (no repeat)
}

// podOp is one operation of a pod in flight.
type podOp struct {
	unprepare bool
	pod       *v1.Pod
	waiters   []*actor.PID
	start     time.Time
}

// Messages the actor sends itself.
type (
	fetched struct {
		actorkit.Tag
		uid    types.UID
		claims []*resourceapi.ResourceClaim
		err    error
	}
	prepared struct {
		actorkit.Tag
		uid     types.UID
		results []driverResult
		err     error
		driver  string // the driver that failed, if one did
	}
	unprepared struct {
		actorkit.Tag
		uid    types.UID
		keys   []string
		err    error
		driver string
	}
	retryUnprepare struct {
		actorkit.Tag
		uid types.UID
	}
	wipeDue struct {
		actorkit.Tag
		driver string
		seq    uint64
	}
	connState struct {
		conn      *driverConn
		connected bool
	}
	wipeDone struct {
		actorkit.Tag
		driver string
		err    error
	}
	healthReport struct {
		driver string
		conn   *driverConn
		resp   *drahealthv1.NodeWatchResourcesResponse
	}
	healthEnded struct {
		driver string
		conn   *driverConn
	}
)

// driverResult is one driver's answer to NodePrepareResources.
type driverResult struct {
	driver string
	resp   *drapb.NodePrepareResourcesResponse
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.handleStarted(ctx)
	case *actor.Restarting:
		a.handleEnd(false)
	case *actor.Stopping:
		a.handleEnd(true)
	case *messages.PrepareClaims:
		a.handlePrepare(m)
	case *messages.UnprepareClaims:
		if m.ReplyTo != nil {
			a.unprepWaiters[m.UID] = append(a.unprepWaiters[m.UID], m.ReplyTo)
		}
		a.handleUnprepare(m.UID)
	case *messages.PodsKnown:
		a.handlePodsKnown(m)
	case *messages.DRADriverRegistered:
		a.handleRegistered(m)
	case *messages.DRADriverDeregistered:
		a.handleDeregistered(m)
	case *fetched:
		if a.self.Mine(m) {
			a.handleFetched(m)
		}
	case *prepared:
		if a.self.Mine(m) {
			a.handlePrepared(m)
		}
	case *unprepared:
		if a.self.Mine(m) {
			a.handleUnprepared(m)
		}
	case *retryUnprepare:
		if a.self.Mine(m) {
			a.handleUnprepare(m.uid)
		}
	case *wipeDue:
		if a.self.Mine(m) {
			a.handleWipeDue(m)
		}
	case *wipeDone:
		if a.self.Mine(m) {
			a.handleWipeDone(m)
		}
	case *healthReport:
		a.handleHealth(m)
	case *healthEnded:
		a.handleHealthEnded(m)
	case *connState:
		a.handleConnState(m)
	}
}

func (a *Actor) handleStarted(ctx actor.Context) {
	a.self = actorkit.Start(ctx, a.cfg.Clock)
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.ops = map[types.UID]*podOp{}
	a.pods = map[types.UID]*podRef{}
	a.gone = map[types.UID]int{}
	a.unprepWaiters = map[types.UID][]*actor.PID{}
	a.wipes = map[string]*wipeState{}
	a.claims = map[string]*claimInfo{}
	b, err := a.cfg.Store.Load()
	if err == nil {
		var claims map[string]*claimInfo
		if claims, err = decodeCheckpoint(b); err == nil {
			a.claims = claims
		}
	}
	switch {
	case err != nil:
		a.log.Warn("DRA checkpoint ignored: starting with no prepared claim", "err", err)
	case len(a.claims) > 0:
		a.log.Info("prepared claims restored from the checkpoint", "claims", len(a.claims))
	}
	a.publishInUse()
	a.sh.mu.Lock()
	wipe := !a.sh.wiped && a.cfg.Wiper != nil
	a.sh.wiped = true
	var away []string
	for name, d := range a.sh.drivers {
		if d == nil || !d.connected {
			away = append(away, name) // gone, or not connected: wiped unless it comes back
		}
	}
	a.sh.mu.Unlock()
	if wipe {
		// As upstream at start: no driver has registered yet, so no slice
		// of this node can be served; the drivers publish theirs again.
		a.wipeSeq++
		a.wipes[""] = &wipeState{seq: a.wipeSeq}
		a.startWipe("")
	}
	for _, name := range away {
		a.scheduleWipe(name)
	}
}

// handleEnd ends this incarnation's calls; stopping for good also closes
// the drivers' connections.
func (a *Actor) handleEnd(stopping bool) {
	if a.cancel != nil {
		a.cancel()
	}
	if !stopping {
		return
	}
	a.sh.mu.Lock()
	drivers := a.sh.drivers
	a.sh.drivers = map[string]*driverConn{}
	a.sh.mu.Unlock()
	for _, d := range drivers {
		if d != nil {
			d.close(a.log)
		}
	}
}

func (d *driverConn) close(log *slog.Logger) {
	d.stop()
	if err := d.drv.Close(); err != nil {
		log.Debug("closing DRA driver connection", "driver", d.name, "err", err)
	}
}

// driver returns a registered driver, or nil.
func (a *Actor) driver(name string) *driverConn {
	a.sh.mu.Lock()
	defer a.sh.mu.Unlock()
	return a.sh.drivers[name]
}

// save writes the checkpoint.
func (a *Actor) save() error {
	b, err := encodeCheckpoint(a.claims)
	if err == nil {
		err = a.cfg.Store.Save(b)
	}
	if err != nil {
		a.log.Error("DRA checkpoint not written", "err", err)
		return fmt.Errorf("checkpoint ResourceClaim state: %w", err)
	}
	a.publishInUse()
	return nil
}

// publishInUse sets dra_resource_claims_in_use.
func (a *Actor) publishInUse() {
	if a.cfg.Metrics == nil {
		return
	}
	by := map[string]int{"<any>": len(a.claims)}
	for _, c := range a.claims {
		for d := range c.Drivers {
			by[d]++
		}
	}
	a.cfg.Metrics.SetClaimsInUse(by)
}

func (a *Actor) driverError(driver, op string) {
	if a.cfg.Metrics != nil && driver != "" {
		a.cfg.Metrics.IncDriverError(driver, op)
	}
}
