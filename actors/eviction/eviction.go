// Package eviction is the EvictionActor: it watches the node's resources
// through the stats Summary, raises the MemoryPressure, DiskPressure and
// PIDPressure conditions, and when an eviction threshold is met it
// reclaims what the node can (dead containers, unused images) and then
// evicts pods, one per pass, ranked as the upstream kubelet's eviction
// manager (pkg/kubelet/eviction) ranks them.
//
// A pass is one housekeeping step (every HousekeepingPeriod, 10 s, on the
// injected clock; at once on EvaluateEviction or when the kernel's memory
// threshold notifier fires): the Summary is read off the mailbox; the
// observations decide the conditions (sent to the subscribers as
// NodePressure when they change) and the threshold to act on, if any; when
// the Summary has pods, the pods are asked of the StatusActor (GetPods) and
// every pod over a local ephemeral storage limit is evicted at once
// (localstorage.go; such a pass acts on no threshold); then, for a
// threshold, the pods are asked if they were not yet and a disk threshold
// first asks the container garbage collector
// (ReclaimContainers) and the ImageActor (ReclaimImages) and observes
// again; a threshold still met evicts the first pod of the ranking that is
// not critical (EvictPod to the NodeActor, a Warning event "Evicted",
// kubelet_evictions{eviction_signal}). Every reply arrives as a message;
// the mailbox never waits.
package eviction

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// Defaults, as upstream.
const (
	// DefaultHousekeepingPeriod is how often a pass runs (upstream's
	// evictionMonitoringPeriod).
	DefaultHousekeepingPeriod = 10 * time.Second
	// DefaultPressureTransitionPeriod is
	// --eviction-pressure-transition-period.
	DefaultPressureTransitionPeriod = 5 * time.Minute
	// DefaultPassTimeout bounds one pass: the Summary, the pods, the
	// reclaims (the runtime request timeout, 2 m).
	DefaultPassTimeout = 2 * time.Minute
	// evictionWait is how long an evicted pod may take to end before the
	// next pass evicts another (upstream's podCleanupTimeout).
	evictionWait = 30 * time.Second
	// notifierRefresh: the memory notifier's thresholds are set again at
	// most this often (upstream's notifierRefreshInterval).
	notifierRefresh = 10 * time.Second
)

// SummaryProvider gives the node's stats (the stats adapter's Summary).
type SummaryProvider interface {
	Summary(ctx context.Context) (*statsapi.Summary, error)
}

// MemoryNotifier is the kernel's memory threshold notification
// (adapters/host's MemoryThresholdNotifier): Wait returns when the
// node's memory usage crosses one of the usage thresholds set last.
type MemoryNotifier interface {
	// SetThresholds replaces the usage thresholds, in bytes.
	SetThresholds(usageBytes []int64) error
	// Wait blocks until a threshold is crossed or ctx ends.
	Wait(ctx context.Context) error
	Close() error
}

// Recorder records events (client-go's record.EventRecorder satisfies it).
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Metrics counts evictions (kubelet_evictions{eviction_signal}).
type Metrics interface {
	IncEvictions(signal string)
}

// Config of the EvictionActor. Stats and Status are required.
type Config struct {
	// Thresholds from ParseThresholds (--eviction-hard, --eviction-soft,
	// ...). None: the actor only reports no pressure.
	Thresholds []Threshold
	// HousekeepingPeriod between passes (DefaultHousekeepingPeriod).
	HousekeepingPeriod time.Duration
	// PressureTransitionPeriod a condition stays true after its last
	// threshold cleared (DefaultPressureTransitionPeriod).
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriodSeconds (--eviction-max-pod-grace-period) caps the
	// pod's own grace period for soft thresholds; negative: the pod's own.
	// Upstream's default is 0. Hard thresholds kill at once (grace 0).
	MaxPodGracePeriodSeconds int64
	// DedicatedImageFs: the runtime's image filesystem is not the node's
	// (nodefs pressure then reclaims nothing, imagefs pressure containers
	// and images; the pods are ranked by what is on the filesystem).
	DedicatedImageFs bool
	// PassTimeout bounds one pass (DefaultPassTimeout).
	PassTimeout time.Duration
	// Clock (default the real clock).
	Clock clock.WithDelayedExecution
	// Stats gives the Summary.
	Stats SummaryProvider
	// Status is the StatusActor (GetPods: the pods to rank).
	Status *actor.PID
	// Node is the NodeActor (EvictPod); nil: nothing is evicted.
	Node *actor.PID
	// Images is the ImageActor (ReclaimImages) and ContainerGC the
	// container garbage collector (ReclaimContainers); nil: not asked.
	Images, ContainerGC *actor.PID
	// Subscribers are sent NodePressure when it changes (the NodeActor,
	// the NodeStatusActor).
	Subscribers []*actor.PID
	// NodeName names the node in its events ("EvictionThresholdMet").
	NodeName string
	// Events records the pods' "Evicted" events; nil: none.
	Events Recorder
	// Metrics; nil: none.
	Metrics Metrics
	// MemoryNotifier makes the kernel memory threshold notifier (called
	// once per incarnation; adapters/host.NewMemoryThresholdNotifier);
	// nil, or an error: the housekeeping period alone.
	MemoryNotifier func() (MemoryNotifier, error)
}

// New returns the EvictionActor's producer.
func New(cfg Config, log *slog.Logger) actor.Producer {
	if cfg.Stats == nil || cfg.Status == nil {
		panic("eviction.New: Stats and Status are required")
	}
	if log == nil {
		log = slog.Default()
	}
	if cfg.HousekeepingPeriod <= 0 {
		cfg.HousekeepingPeriod = DefaultHousekeepingPeriod
	}
	if cfg.PressureTransitionPeriod <= 0 {
		cfg.PressureTransitionPeriod = DefaultPressureTransitionPeriod
	}
	if cfg.PassTimeout <= 0 {
		cfg.PassTimeout = DefaultPassTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	log = log.With("actor", "eviction")
	return func() actor.Actor { return &Actor{cfg: cfg, log: log} }
}

// phase is where a pass stands.
type phase int

const (
	observing phase = iota // the Summary is asked
	reclaimContainers
	reclaimImages
	reobserving // the Summary after a reclaim
	awaitingPods
	checkingLimits // the pods are asked for the local storage limits
)

// pass is one housekeeping step in flight.
type pass struct {
	seq     uint64
	phase   phase
	summary *statsapi.Summary
	pods    []*v1.Pod
	podsIn  bool // the StatusActor answered (pods may be empty)
	podsErr string
	// threshold acted on, and the decision that chose it.
	threshold Threshold
	dec       decision
	obs       observations
	replies   []*actor.PID // EvaluateEviction callers
	evicted   types.UID
	signal    string
	err       string
}

// Actor is the EvictionActor.
type Actor struct {
	cfg Config
	log *slog.Logger

	self     actorkit.Self
	tick     actorkit.Timer
	deadline actorkit.Timer
	st       state
	cur      *pass
	seq      uint64       // passes started
	again    []*actor.PID // EvaluateEviction callers of the queued pass
	queued   bool         // a pass was asked while one ran
	// calls ends the Summary reads of this incarnation when it stops.
	calls       context.Context
	cancelCalls context.CancelFunc

	pressure  messages.NodePressure
	published bool
	// evicting: pods evicted and not seen ended yet, until when the
	// next eviction waits for them.
	evicting map[types.UID]time.Time

	notifier        MemoryNotifier
	notifierCancel  context.CancelFunc
	notifierUpdated time.Time
}

// Messages the actor sends itself.
type (
	summaryDone struct {
		actorkit.Tag
		seq     uint64
		summary *statsapi.Summary
		err     error
	}
	// memoryCrossed: the kernel said memory usage crossed a threshold.
	memoryCrossed struct{ actorkit.Tag }
	notifierSet   struct {
		actorkit.Tag
		err error
	}
)

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.handleStarted(ctx)
	case *actor.Restarting, *actor.Stopping:
		a.handleStop()
	case *actorkit.Fired:
		a.handleFired(ctx, m)
	case *messages.EvaluateEviction:
		to := m.ReplyTo
		if to == nil {
			to = ctx.Sender() // a RequestFuture (tests, the sim's commands)
		}
		a.trigger(ctx, to)
	case *memoryCrossed:
		if a.self.Mine(m) {
			a.log.Info("memory threshold crossed (kernel notification): evaluating now")
			a.trigger(ctx, nil)
		}
	case *notifierSet:
		if a.self.Mine(m) && m.err != nil {
			a.log.Warn("memory threshold notifier not updated", "err", m.err)
		}
	case *summaryDone:
		if a.self.Mine(m) {
			a.handleSummary(ctx, m)
		}
	case *messages.PodList:
		a.handlePods(ctx, m.Items, "")
	case *messages.StatusUnavailable:
		a.handlePods(ctx, nil, fmt.Sprintf("status unavailable: %s", m.Reason))
	case *messages.ContainersReclaimed:
		a.handleContainersReclaimed(ctx, m)
	case *messages.ImagesReclaimed:
		a.handleImagesReclaimed(ctx, m)
	case *messages.GetNodePressure:
		a.handleGetNodePressure(ctx, m)
	}
}

func (a *Actor) handleStarted(ctx actor.Context) {
	a.self = actorkit.Start(ctx, a.cfg.Clock)
	a.tick = actorkit.NewTimer("housekeeping")
	a.deadline = actorkit.NewTimer("pass")
	a.st = newState()
	a.cur, a.again, a.queued = nil, nil, false
	a.pressure, a.published = messages.NodePressure{}, false
	a.evicting = map[types.UID]time.Time{}
	a.calls, a.cancelCalls = context.WithCancel(context.Background())
	a.startNotifier()
	// The first pass soon after the start: a restarted actor tells its
	// subscribers the pressure again.
	a.trigger(ctx, nil)
}

func (a *Actor) handleStop() {
	a.tick.Stop()
	a.deadline.Stop()
	if a.cancelCalls != nil {
		a.cancelCalls()
	}
	if a.notifierCancel != nil {
		a.notifierCancel()
		a.notifierCancel = nil
	}
	if a.notifier != nil {
		if err := a.notifier.Close(); err != nil {
			a.log.Debug("close memory threshold notifier", "err", err)
		}
		a.notifier = nil
	}
}

func (a *Actor) handleFired(ctx actor.Context, m *actorkit.Fired) {
	switch {
	case a.tick.Fired(a.self, m):
		a.trigger(ctx, nil)
	case a.deadline.Fired(a.self, m):
		if a.cur != nil {
			a.log.Warn("eviction pass timed out", "phase", a.cur.phase, "timeout", a.cfg.PassTimeout)
			a.cur.err = fmt.Sprintf("pass timed out after %s", a.cfg.PassTimeout)
			a.finish(ctx)
		}
	}
}

// trigger starts a pass, or queues one behind the pass in flight.
func (a *Actor) trigger(ctx actor.Context, replyTo *actor.PID) {
	if a.cur != nil {
		a.queued = true
		if replyTo != nil {
			a.again = append(a.again, replyTo)
		}
		return
	}
	a.tick.Stop()
	a.seq++
	a.cur = &pass{seq: a.seq, phase: observing}
	if replyTo != nil {
		a.cur.replies = append(a.cur.replies, replyTo)
	}
	a.deadline.Arm(a.self, a.cfg.PassTimeout)
	a.readSummary()
}

func (a *Actor) readSummary() {
	stats, seq := a.cfg.Stats, a.seq
	actorkit.GoIn(a.self, a.calls, a.cfg.PassTimeout, func(ctx context.Context) *summaryDone {
		s, err := stats.Summary(ctx)
		if err == nil && s == nil {
			err = errors.New("no summary")
		}
		return &summaryDone{seq: seq, summary: s, err: err}
	})
}

func (a *Actor) handleSummary(ctx actor.Context, m *summaryDone) {
	p := a.cur
	if p == nil || m.seq != p.seq || (p.phase != observing && p.phase != reobserving) {
		return // a pass that timed out
	}
	if m.err != nil {
		a.log.Warn("eviction: no summary", "err", m.err)
		p.err = fmt.Sprintf("summary: %v", m.err)
		a.finish(ctx)
		return
	}
	if p.phase == reobserving {
		a.afterReclaim(ctx, m.summary)
		return
	}
	p.summary = m.summary
	a.updateNotifier(m.summary)
	now := a.cfg.Clock.Now()
	p.obs = observe(m.summary)
	p.dec = synchronize(&a.st, a.cfg.Thresholds, p.obs, now, a.cfg.PressureTransitionPeriod)
	a.setPressure(ctx, p.dec)
	if a.cfg.Node != nil && len(m.summary.Pods) > 0 {
		// The local storage limits are checked on every pass with pods
		// (localstorage.go), before the thresholds, as upstream.
		p.phase = checkingLimits
		ctx.Request(a.cfg.Status, &messages.GetPods{})
		return
	}
	a.actOnThresholds(ctx)
}

// actOnThresholds acts on the first threshold met, if any: node-level
// reclaim first for disk signals, then one pod evicted.
func (a *Actor) actOnThresholds(ctx actor.Context) {
	p := a.cur
	if len(p.dec.act) == 0 {
		a.finish(ctx)
		return
	}
	p.threshold = p.dec.act[0]
	if !p.podsIn {
		// The pods are asked only now when the local storage limits did
		// not ask them (a pass with nothing to do costs the StatusActor
		// nothing); the answer comes during the reclaim.
		ctx.Request(a.cfg.Status, &messages.GetPods{})
	}
	res := signalResource[p.threshold.Signal]
	a.log.Info("eviction threshold met: attempting to reclaim", "signal", p.threshold.Signal, "threshold", p.threshold.String(), "resource", res)
	a.nodeEvent(v1.EventTypeWarning, "EvictionThresholdMet", fmt.Sprintf("Attempting to reclaim %s", res))
	if a.reclaimsNodeLevel(p.threshold.Signal) {
		a.reclaimContainers(ctx)
		return
	}
	a.evict(ctx)
}

// reclaimsNodeLevel: disk signals reclaim dead containers and unused
// images first, as upstream's buildSignalToNodeReclaimFuncs (with a
// dedicated image filesystem, nodefs pressure reclaims neither).
func (a *Actor) reclaimsNodeLevel(sig Signal) bool {
	if !isDisk(sig) || a.cfg.ContainerGC == nil && a.cfg.Images == nil {
		return false
	}
	if a.cfg.DedicatedImageFs && (sig == SignalNodeFsAvailable || sig == SignalNodeFsInodesFree) {
		return false
	}
	return true
}

func (a *Actor) reclaimContainers(ctx actor.Context) {
	if a.cfg.ContainerGC == nil {
		a.reclaimImages(ctx)
		return
	}
	a.cur.phase = reclaimContainers
	ctx.Send(a.cfg.ContainerGC, &messages.ReclaimContainers{ReplyTo: a.self.PID()})
}

func (a *Actor) handleContainersReclaimed(ctx actor.Context, m *messages.ContainersReclaimed) {
	if a.cur == nil || a.cur.phase != reclaimContainers {
		return
	}
	if m.Err != "" {
		a.log.Warn("container garbage collection failed", "err", m.Err)
	} else {
		a.log.Info("dead containers reclaimed", "containers", m.Containers, "sandboxes", m.Sandboxes)
	}
	a.reclaimImages(ctx)
}

// reclaimImages asks the ImageActor for the bytes below the threshold
// plus its minimum reclaim; for an inode signal, every unused image.
func (a *Actor) reclaimImages(ctx actor.Context) {
	if a.cfg.Images == nil {
		a.reobserve()
		return
	}
	p := a.cur
	p.phase = reclaimImages
	want := int64(math.MaxInt64)
	if signalResource[p.threshold.Signal] == v1.ResourceEphemeralStorage {
		o := p.obs[p.threshold.Signal]
		q := p.threshold.Value.Of(o.capacity)
		if p.threshold.MinReclaim != nil {
			q.Add(p.threshold.MinReclaim.Of(o.capacity))
		}
		q.Sub(o.available)
		want = max(q.Value(), 1)
	}
	ctx.Send(a.cfg.Images, &messages.ReclaimImages{Bytes: want, ReplyTo: a.self.PID()})
}

func (a *Actor) handleImagesReclaimed(_ actor.Context, m *messages.ImagesReclaimed) {
	if a.cur == nil || a.cur.phase != reclaimImages {
		return
	}
	if m.Err != "" {
		a.log.Warn("image garbage collection failed", "err", m.Err)
	} else {
		a.log.Info("unused images reclaimed", "images", m.Removed, "bytes", m.Freed)
	}
	a.reobserve()
}

func (a *Actor) reobserve() {
	a.cur.phase = reobserving
	a.readSummary()
}

// afterReclaim: the node-level reclaim sufficed when no threshold is met
// any more counting the minimum reclaims (grace periods aside), as
// upstream; else a pod is evicted.
func (a *Actor) afterReclaim(ctx actor.Context, s *statsapi.Summary) {
	p := a.cur
	obs := observe(s)
	if len(thresholdsMet(a.cfg.Thresholds, obs, true)) == 0 {
		a.log.Info("eviction: node-level reclaim relieved the pressure without evicting pods", "signal", p.threshold.Signal)
		a.finish(ctx)
		return
	}
	p.summary, p.obs = s, obs
	a.evict(ctx)
}

func (a *Actor) handlePods(ctx actor.Context, pods []*v1.Pod, errMsg string) {
	p := a.cur
	if p == nil || p.podsIn {
		return
	}
	p.podsIn, p.pods, p.podsErr = true, pods, errMsg
	switch p.phase {
	case awaitingPods:
		a.evict(ctx)
	case checkingLimits:
		a.enforceLimits(ctx)
	}
}

// enforceLimits evicts every pod over one of its local storage limits
// (grace 1 s, as upstream); a pass that evicted one acts on no threshold.
func (a *Actor) enforceLimits(ctx actor.Context) {
	p := a.cur
	if p.podsErr != "" {
		a.actOnThresholds(ctx) // which says the pods are unknown if it needs them
		return
	}
	now := a.cfg.Clock.Now()
	var active []*v1.Pod
	for i := range p.pods {
		pod := p.pods[i]
		if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		if until, ok := a.evicting[pod.UID]; ok && now.Before(until) {
			continue // evicted before and not ended yet
		}
		active = append(active, pod)
	}
	for _, v := range localStorageViolations(active, statsOf(p.summary), a.cfg.DedicatedImageFs) {
		if IsCriticalPod(v.pod) {
			a.log.Error("eviction: cannot evict a critical pod", "pod", v.pod.Namespace+"/"+v.pod.Name, "signal", v.signal)
			continue
		}
		a.log.Info("evicting pod over its local storage limit", "pod", v.pod.Namespace+"/"+v.pod.Name, "uid", v.pod.UID, "signal", v.signal, "message", v.message)
		if a.cfg.Events != nil {
			a.cfg.Events.Eventf(v.pod.DeepCopy(), v1.EventTypeWarning, messages.ReasonEvicted, "%s", v.message)
		}
		grace := limitGracePeriod
		ctx.Send(a.cfg.Node, &messages.EvictPod{UID: v.pod.UID, GracePeriod: &grace, Message: v.message, Signal: v.signal})
		if a.cfg.Metrics != nil {
			a.cfg.Metrics.IncEvictions(v.signal)
		}
		a.evicting[v.pod.UID] = now.Add(evictionWait)
		if p.evicted == "" {
			p.evicted, p.signal = v.pod.UID, v.signal
		}
	}
	if p.evicted != "" {
		a.finish(ctx)
		return
	}
	a.actOnThresholds(ctx)
}

// evict evicts one pod for the pass's threshold, once the pods are in.
func (a *Actor) evict(ctx actor.Context) {
	p := a.cur
	if !p.podsIn {
		p.phase = awaitingPods // the StatusActor's answer continues
		return
	}
	if p.podsErr != "" {
		a.log.Warn("eviction: the pods are unknown, none evicted", "err", p.podsErr)
		p.err = p.podsErr
		a.finish(ctx)
		return
	}
	now := a.cfg.Clock.Now()
	var active []*v1.Pod
	waiting := 0
	for i := range p.pods {
		pod := p.pods[i]
		terminal := pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
		if until, ok := a.evicting[pod.UID]; ok {
			if !terminal && now.Before(until) {
				waiting++
			}
			continue
		}
		if !terminal {
			active = append(active, pod)
		}
	}
	for uid, until := range a.evicting {
		if !now.Before(until) || !listed(p.pods, uid) {
			delete(a.evicting, uid)
		}
	}
	if waiting > 0 {
		a.log.Info("eviction: waiting for the pods evicted before to end", "pods", waiting)
		a.finish(ctx)
		return
	}
	if a.cfg.Node == nil || len(active) == 0 {
		a.log.Error("eviction thresholds met, but no pod can be evicted", "signal", p.threshold.Signal)
		a.finish(ctx)
		return
	}
	stats := statsOf(p.summary)
	rankPods(active, p.threshold.Signal, stats, a.cfg.DedicatedImageFs)
	res := signalResource[p.threshold.Signal]
	for _, pod := range active {
		if IsCriticalPod(pod) {
			a.log.Error("eviction: cannot evict a critical pod", "pod", pod.Namespace+"/"+pod.Name)
			continue
		}
		msg := evictionMessage(res, pod, stats, p.dec.met, p.obs)
		grace := a.gracePeriod(pod, p.threshold)
		a.log.Info("evicting pod", "pod", pod.Namespace+"/"+pod.Name, "uid", pod.UID, "signal", p.threshold.Signal, "grace", grace, "message", msg)
		if a.cfg.Events != nil {
			a.cfg.Events.Eventf(pod.DeepCopy(), v1.EventTypeWarning, messages.ReasonEvicted, "%s", msg)
		}
		ctx.Send(a.cfg.Node, &messages.EvictPod{UID: pod.UID, GracePeriod: &grace, Message: msg, Signal: string(p.threshold.Signal)})
		if a.cfg.Metrics != nil {
			a.cfg.Metrics.IncEvictions(string(p.threshold.Signal))
		}
		a.evicting[pod.UID] = now.Add(evictionWait)
		p.evicted, p.signal = pod.UID, string(p.threshold.Signal)
		break
	}
	if p.evicted == "" {
		a.log.Error("eviction: unable to evict any pod from the node", "signal", p.threshold.Signal)
	}
	a.finish(ctx)
}

func listed(pods []*v1.Pod, uid types.UID) bool {
	for i := range pods {
		if pods[i].UID == uid {
			return true
		}
	}
	return false
}

// gracePeriod: 0 for a hard threshold; for a soft one the pod's own
// (default 30 s) capped by MaxPodGracePeriodSeconds (negative: no cap).
func (a *Actor) gracePeriod(pod *v1.Pod, t Threshold) int64 {
	if t.Hard() {
		return 0
	}
	g := int64(30)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	if a.cfg.MaxPodGracePeriodSeconds >= 0 {
		g = min(g, a.cfg.MaxPodGracePeriodSeconds)
	}
	return g
}

// finish ends the pass: answers EvaluateEviction, arms the next period
// (or runs the pass asked meanwhile).
func (a *Actor) finish(ctx actor.Context) {
	p := a.cur
	a.cur = nil
	a.deadline.Stop()
	if !a.queued {
		// Armed before the answers: whoever is answered finds the next
		// pass scheduled (a test stepping its clock, a user's next read).
		a.tick.Arm(a.self, a.cfg.HousekeepingPeriod)
	}
	for _, to := range p.replies {
		ctx.Send(to, &messages.EvictionEvaluated{Pressure: a.pressureCopy(), Evicted: p.evicted, Signal: p.signal, Err: p.err})
	}
	if a.queued {
		next := a.again
		a.queued, a.again = false, nil
		a.trigger(ctx, nil)
		if a.cur != nil {
			a.cur.replies = append(a.cur.replies, next...)
		}
	}
}

// setPressure sends NodePressure to the subscribers when it changed (and
// after the first pass of an incarnation).
func (a *Actor) setPressure(ctx actor.Context, d decision) {
	next := messages.NodePressure{
		Memory:  d.conditions[v1.NodeMemoryPressure],
		Disk:    d.conditions[v1.NodeDiskPressure],
		PID:     d.conditions[v1.NodePIDPressure],
		Signals: d.signals,
	}
	if a.published && samePressure(a.pressure, next) {
		return
	}
	if a.pressure.Memory != next.Memory || a.pressure.Disk != next.Disk || a.pressure.PID != next.PID || !a.published {
		a.log.Info("node pressure", "memory", next.Memory, "disk", next.Disk, "pid", next.PID, "signals", next.Signals)
	}
	a.pressure, a.published = next, true
	for _, sub := range a.cfg.Subscribers {
		p := a.pressureCopy()
		ctx.Send(sub, &p)
	}
}

func samePressure(a, b messages.NodePressure) bool {
	if a.Memory != b.Memory || a.Disk != b.Disk || a.PID != b.PID || len(a.Signals) != len(b.Signals) {
		return false
	}
	for i := range a.Signals {
		if a.Signals[i] != b.Signals[i] {
			return false
		}
	}
	return true
}

func (a *Actor) pressureCopy() messages.NodePressure {
	out := a.pressure
	out.Signals = append([]string(nil), a.pressure.Signals...)
	return out
}

func (a *Actor) handleGetNodePressure(ctx actor.Context, m *messages.GetNodePressure) {
	reply := a.pressureCopy()
	if m.ReplyTo != nil {
		ctx.Send(m.ReplyTo, &reply)
		return
	}
	if ctx.Sender() != nil {
		ctx.Respond(&reply)
	}
}

func (a *Actor) nodeEvent(eventtype, reason, msg string) {
	if a.cfg.Events == nil || a.cfg.NodeName == "" {
		return
	}
	ref := &v1.ObjectReference{Kind: "Node", Name: a.cfg.NodeName, UID: types.UID(a.cfg.NodeName)}
	a.cfg.Events.Eventf(ref, eventtype, reason, "%s", msg)
}
