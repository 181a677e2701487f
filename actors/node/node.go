// Package node is the NodeActor: it merges the pod sources, admits pods,
// owns one PodActor per pod UID and routes runtime events to them.
package node

import (
	"log/slog"
	"maps"
	goruntime "runtime"
	"slices"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// rejectedBy notes, on a rejected pod kept for republishing, its source.
const rejectedBy = "actorlet.io/rejected-from-source"

// PodProps builds the props of the PodActor for uid (wiring supplies it).
type PodProps func(uid types.UID) *actor.Props

// Metrics is what the NodeActor reports. May be nil.
type Metrics interface {
	SetDesiredPods(static bool, n int)
}

// Config of the NodeActor.
type Config struct {
	NodeName string
	MaxPods  int
	// Sources that must deliver their first state before orphans (runtime
	// pods no source wants) are killed.
	Sources []string
	// SourcePIDs are asked to resend their pods when the NodeActor starts,
	// so a restarted NodeActor rebuilds its view.
	SourcePIDs []*actor.PID
	// Allocatable cpu, memory and ephemeral-storage: pods of every source
	// whose requests do not fit what the admitted pods leave are rejected
	// (OutOfcpu, OutOfmemory, OutOfephemeral-storage), as upstream (admit.go).
	// A resource missing: not checked.
	Allocatable v1.ResourceList
	// Sysctls are the sysctls pods may set (the safe ones and
	// --allowed-unsafe-sysctls): a pod asking for another is rejected
	// (SysctlForbidden), as upstream (admit.go). Nil: not checked.
	Sysctls *podspec.SysctlAllowlist
	// MaxParallelStarts bounds the pods starting at once (StartSlot); 0: no
	// bound.
	MaxParallelStarts int
	// NodeLabels are this node's labels (kubernetes.io/hostname, os, arch
	// and --node-labels): pods whose node selector or required node
	// affinity they do not match are rejected (NodeAffinity), as upstream.
	// Without kubernetes.io/os the node's is this machine's, as upstream.
	NodeLabels map[string]string
	// Sweeper removes the directories of pods gone, every
	// HousekeepingPeriod (default DefaultHousekeepingPeriod) on Clock
	// (default the real clock). Nil: nothing is removed.
	Sweeper            Sweeper
	HousekeepingPeriod time.Duration
	Clock              clock.WithDelayedExecution
	// RespawnBackoff (default DefaultRespawnBackoff), doubling up to
	// RespawnBackoffMax (default DefaultRespawnBackoffMax), is how long a
	// PodActor stopped by its supervisor stays down (respawn.go).
	RespawnBackoff, RespawnBackoffMax time.Duration
	// Events records events about pods (a PodActor stopped for failing
	// too often); nil: none. A recorder that remembers objects (cluster
	// mode's, which counts repeated events) and has Forget(uid) is told
	// when a pod's actor has stopped for good.
	Events Recorder
	// Devices is the DevicesActor: pods are admitted against the extended
	// resources it reports, and it is told when a pod's devices are free
	// (devices.go). Nil: extended resources are not checked.
	Devices *actor.PID
	// GC is the container garbage collector: every housekeeping it is told
	// the pods a source wants or a PodActor holds (PodsKnown; not those
	// only left in the runtime: what is left of them is its to remove).
	// Nil: not told.
	GC *actor.PID
	// DeviceWait bounds the wait for its first capacity (default
	// DefaultDeviceWait).
	DeviceWait time.Duration
	// Eviction is the EvictionActor: its EvictPods are carried out, and
	// pods are admitted under its NodePressure as upstream (evict.go); it
	// is asked for the pressure at start. Nil: no pressure is known.
	Eviction *actor.PID
}

// New returns the NodeActor producer.
func New(cfg Config, status *actor.PID, podProps PodProps, m Metrics, log *slog.Logger) actor.Producer {
	if status == nil || podProps == nil {
		panic("node.New: status and podProps are required")
	}
	if log == nil {
		log = slog.Default()
	}
	if _, ok := cfg.NodeLabels[v1.LabelOSStable]; !ok {
		cfg.NodeLabels = maps.Clone(cfg.NodeLabels)
		if cfg.NodeLabels == nil {
			cfg.NodeLabels = map[string]string{}
		}
		cfg.NodeLabels[v1.LabelOSStable] = goruntime.GOOS
	}
	if cfg.HousekeepingPeriod <= 0 {
		cfg.HousekeepingPeriod = DefaultHousekeepingPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.DeviceWait <= 0 {
		cfg.DeviceWait = DefaultDeviceWait
	}
	if cfg.RespawnBackoff <= 0 {
		cfg.RespawnBackoff = DefaultRespawnBackoff
	}
	if cfg.RespawnBackoffMax < cfg.RespawnBackoff {
		cfg.RespawnBackoffMax = max(DefaultRespawnBackoffMax, cfg.RespawnBackoff)
	}
	return func() actor.Actor {
		return &Actor{cfg: cfg, status: status, podProps: podProps, m: m, log: log}
	}
}

type entry struct {
	pod     *v1.Pod // desired; nil for an orphan
	source  string
	pid     *actor.PID
	killing *messages.KillPod
	// stopping: the pod is terminated and its actor is stopping; the entry
	// stays until the name pod-<uid> is free again.
	stopping bool
	// respawn: the pod was desired again (by respawnSource) while being
	// killed; it runs again once the old actor is gone.
	respawn       *v1.Pod
	respawnSource string
	// deleting: the API server asked for a graceful deletion; once nothing
	// runs, the pod is deleted from the API for good.
	deleting bool
	// w: the PodActor stopped by its supervisor and its respawn.
	w worker
}

// Actor is the NodeActor.
type Actor struct {
	cfg      Config
	status   *actor.PID
	podProps PodProps
	m        Metrics
	log      *slog.Logger

	sources  map[string]map[types.UID]*v1.Pod
	synced   map[string]bool
	pods     map[types.UID]*entry
	rejected map[types.UID]*v1.Pod // pods refused at admission, with their status
	runtime  []types.UID           // last RuntimePods
	// haveRuntime: a RuntimePods arrived (this incarnation).
	haveRuntime bool
	// finished: API pods whose graceful deletion ended here (nothing runs,
	// the StatusActor holds the final delete), until the API source drops
	// them. A later update of one (the echo of its last status patch) is
	// not a new deletion, and a restarted StatusActor gets the final
	// delete again on its Resync.
	finished map[types.UID]*messages.PodForget

	self         actorkit.Self
	since        time.Time // this incarnation started (SyncPod.NewSince)
	closing      bool      // stopping or restarting: children end with it
	housekeeping actorkit.Timer
	sweeping     bool // a sweep is in flight
	// resyncAsks are StatusActor Resyncs answered once every source is
	// synced.
	resyncAsks []uint64

	// Kept up to date on every change of an entry (no walk over all pods
	// per update): admitted pods by source kind and their requests.
	nActive, nStatic, nAPI int
	requested              v1.ResourceList
	hostPorts              map[string]map[string]int // "TCP/80" -> host IP -> pods
	extUsed                map[v1.ResourceName]int64 // extended resources of admitted pods
	dev                    deviceState
	names                  map[string]types.UID // namespace/name -> the admitted pod holding it

	starting map[types.UID]bool // pods holding a start slot
	waiting  []types.UID        // pods waiting for one, in order

	pressure messages.NodePressure // the EvictionActor's, for admission

	shrink shrinkers // compact.go
}

// track adds (sign 1) or removes (sign -1) an entry's share of the counts;
// every change of an entry's pod or killing is wrapped in track(-1), change,
// track(+1).
func (a *Actor) track(e *entry, sign int) {
	if e == nil || e.pod == nil || e.killing != nil {
		return
	}
	a.nActive += sign
	if e.source == messages.SourceAPI {
		a.nAPI += sign
	} else {
		a.nStatic += sign
	}
	a.trackHostPorts(e.pod, sign)
	a.trackName(e.pod, sign)
	a.trackDevices(e.pod, sign)
	if a.requested == nil {
		a.requested = v1.ResourceList{}
	}
	for _, name := range admittedResources {
		q := podRequest(e.pod, name)
		if q.IsZero() {
			continue
		}
		cur := a.requested[name]
		if sign > 0 {
			cur.Add(q)
		} else {
			cur.Sub(q)
		}
		a.requested[name] = cur
	}
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.handleStarted(ctx)
	case *messages.Resync:
		a.handleResync(ctx, m)
	case *messages.PodUpdate:
		a.handlePodUpdate(ctx, m)
	case *messages.DeviceCapacity:
		a.handleDeviceCapacity(ctx, m)
	case *messages.NodePressure:
		a.handleNodePressure(m)
	case *messages.EvictPod:
		a.handleEvictPod(ctx, m)
	case *messages.SourceSynced:
		a.markSynced(ctx, m.Source)
	case *messages.PodEvents:
		a.handlePodEvents(ctx, m)
	case *messages.RuntimePods:
		a.runtime, a.haveRuntime = m.UIDs, true
		a.killOrphans(ctx)
	case *messages.NeedPod:
		a.handleNeedPod(ctx, m)
	case *messages.PodTerminated:
		a.handleTerminated(ctx, m)
	case *messages.StartSlot:
		a.handleStartSlot(ctx, m.UID)
	case *messages.StartDone:
		a.releaseSlot(ctx, m.UID)
	case *actor.Restarting, *actor.Stopping:
		a.closing = true
	case *actor.Terminated:
		actorkit.ForgetStoppedChildren(ctx) // else the stopped PodActor stays reachable
		a.handleChildTerminated(ctx, m.Who)
	case *actorkit.Fired:
		if !a.handleRespawnFired(ctx, m) && !a.handleDevicesFired(ctx, m) {
			a.handleFired(m)
		}
	case *swept:
		a.handleSwept(m)
	}
}

func (a *Actor) handleStarted(ctx actor.Context) {
	a.sources = map[string]map[types.UID]*v1.Pod{}
	a.synced = map[string]bool{}
	a.pods = map[types.UID]*entry{}
	a.rejected = map[types.UID]*v1.Pod{}
	a.finished = map[types.UID]*messages.PodForget{}
	a.nActive, a.nStatic, a.nAPI, a.requested, a.hostPorts, a.names, a.extUsed = 0, 0, 0, v1.ResourceList{}, nil, nil, nil
	a.starting, a.waiting = map[types.UID]bool{}, nil
	a.runtime, a.haveRuntime, a.sweeping = nil, false, false
	a.resyncAsks = nil
	a.shrink = shrinkers{}
	a.self = actorkit.Start(ctx, a.cfg.Clock)
	a.since = a.cfg.Clock.Now()
	a.housekeeping = actorkit.NewTimer("housekeeping")
	a.startDevices(ctx)
	a.startPressure(ctx)
	if a.cfg.Sweeper != nil {
		a.housekeeping.Arm(a.self, min(sweepSoon, a.cfg.HousekeepingPeriod))
	}
	// After a restart nothing is known: the sources send their pods again
	// and new PodActors adopt what runs (the old ones were stopped with us).
	for _, pid := range a.cfg.SourcePIDs {
		ctx.Send(pid, &messages.Resync{})
	}
}

// handleResync has every PodActor republish its status and republishes the
// admission failures (a restarted StatusActor asks for it). The StatusActor
// is told first which pods it gets back (ResyncPods): a PodActor killing
// its pod publishes nothing more, and one whose pod is terminated is
// forgotten already, so neither is awaited. Until every source has
// delivered its pods (a NodeActor restarted too) the set is not known: it
// is sent once they have (markSynced), or when the StatusActor asks again
// (after its ResyncEvery, 10 s): a source that is down for good (an
// unreachable manifest URL) must not keep the pods of the others unread.
func (a *Actor) handleResync(ctx actor.Context, m *messages.Resync) {
	switch i := slices.Index(a.resyncAsks, m.Ask); {
	case a.allSynced():
		a.answerResync(ctx, m.Ask)
	case i >= 0:
		a.resyncAsks = slices.Delete(a.resyncAsks, i, i+1)
		a.log.Warn("answering the status actor before every pod source delivered its pods", "synced", a.synced)
		a.answerResync(ctx, m.Ask)
	default:
		a.resyncAsks = append(a.resyncAsks, m.Ask)
	}
	for _, e := range a.pods {
		if !a.resyncDown(ctx, e) {
			ctx.Send(e.pid, &messages.Resync{})
		}
	}
	for _, p := range a.rejected {
		ctx.Send(a.status, &messages.PodStatusUpdate{Pod: p.DeepCopy()})
	}
	for _, f := range a.finished {
		ctx.Send(a.status, &messages.PodForget{UID: f.UID, Namespace: f.Namespace, Name: f.Name, DeleteFromAPI: true})
	}
}

// answerResync tells the StatusActor the pods whose status it gets again.
func (a *Actor) answerResync(ctx actor.Context, ask uint64) {
	uids := make([]types.UID, 0, len(a.pods)+len(a.rejected))
	for uid, e := range a.pods {
		if e.pod != nil && e.killing == nil && !e.stopping {
			uids = append(uids, uid)
		}
	}
	for uid := range a.rejected {
		uids = append(uids, uid)
	}
	ctx.Send(a.status, &messages.ResyncPods{Ask: ask, UIDs: uids})
}

func (a *Actor) allSynced() bool {
	for _, s := range a.cfg.Sources {
		if !a.synced[s] {
			return false
		}
	}
	return true
}

func (a *Actor) markSynced(ctx actor.Context, source string) {
	if a.synced[source] {
		return
	}
	a.synced[source] = true
	a.log.Info("source synced", "source", source)
	if a.allSynced() {
		for _, ask := range a.resyncAsks {
			a.answerResync(ctx, ask)
		}
		a.resyncAsks = nil
	}
	a.killOrphans(ctx)
}

func (a *Actor) handlePodUpdate(ctx actor.Context, m *messages.PodUpdate) {
	set := a.sources[m.Source]
	if set == nil {
		set = map[types.UID]*v1.Pod{}
		a.sources[m.Source] = set
	}
	switch m.Op {
	case messages.OpSet:
		next := make(map[types.UID]*v1.Pod, len(m.Pods))
		for _, p := range m.Pods {
			next[p.UID] = p
		}
		for uid := range set {
			if _, ok := next[uid]; !ok {
				a.remove(ctx, uid, m.Source)
			}
		}
		for _, p := range admissionOrder(m.Pods) {
			a.upsert(ctx, p, m.Source)
		}
		a.sources[m.Source] = next
		a.markSynced(ctx, m.Source)
	case messages.OpAdd:
		for _, p := range m.Pods {
			set[p.UID] = p
			a.upsert(ctx, p, m.Source)
		}
	case messages.OpRemove:
		for _, p := range m.Pods {
			delete(set, p.UID)
			a.remove(ctx, p.UID, m.Source)
		}
	}
	a.reportDesired()
	a.compact()
}

func (a *Actor) active() int { return a.nActive }

func (a *Actor) upsert(ctx actor.Context, p *v1.Pod, source string) {
	if p == nil || p.UID == "" {
		return
	}
	if p.DeletionTimestamp != nil {
		a.gracefulDelete(ctx, p, source)
		return
	}
	if e, ok := a.pods[p.UID]; ok {
		if e.killing != nil {
			// Being killed: run it again afterwards, for the source that
			// wants it (the killed pod's own source first).
			if e.respawn == nil || e.respawnSource == source || source == e.source {
				e.respawn, e.respawnSource = p, source
			}
			return
		}
		if e.source != source {
			return // the first source to claim a UID owns it; the others are kept for a handover
		}
		if e.pod == p || e.pod != nil && equality.Semantic.DeepEqual(e.pod.Spec, p.Spec) &&
			equality.Semantic.DeepEqual(e.pod.ObjectMeta, p.ObjectMeta) {
			return
		}
		a.track(e, -1)
		e.pod = p
		a.track(e, 1)
		ctx.Send(e.pid, &messages.SyncPod{Pod: p})
		return
	}
	if _, ok := a.rejected[p.UID]; ok {
		return
	}
	if source == messages.SourceAPI && (p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed) {
		return // finished before: never run again (what is left in the runtime is an orphan)
	}
	if reason, msg := a.nameConflict(p); reason != "" {
		a.reject(ctx, p, source, reason, msg)
		return
	}
	if reason, msg := a.admitPressure(p, source); reason != "" {
		a.reject(ctx, p, source, reason, msg)
		return
	}
	if reason, msg := a.cfg.Sysctls.Admit(p); reason != "" {
		a.reject(ctx, p, source, reason, msg)
		return
	}
	if reason, msg := a.fits(p); reason != "" {
		a.reject(ctx, p, source, reason, msg)
		return
	}
	if a.holdForDevices(p, source) {
		return // devicesReady admits it
	}
	if reason, msg := a.fitsDevices(p); reason != "" {
		a.reject(ctx, p, source, reason, msg)
		return
	}
	if reason, msg := a.predicates(p); reason != "" {
		a.reject(ctx, p, source, reason, msg)
		return
	}
	a.spawn(ctx, p, source)
}

func (a *Actor) spawn(ctx actor.Context, p *v1.Pod, source string) {
	pid, err := ctx.SpawnNamed(a.podProps(p.UID), "pod-"+string(p.UID))
	if err != nil {
		// Cannot happen while entries outlive their actors' stop; logged
		// loudly if it ever does.
		a.log.Error("spawn pod actor", "pod", p.Namespace+"/"+p.Name, "err", err)
		return
	}
	e := &entry{pod: p, source: source, pid: pid}
	a.pods[p.UID] = e
	a.track(e, 1)
	// No entry held the UID: no PodActor of this incarnation runs or ran
	// anything of it that a later kill did not remove, so its first read
	// may come from the runtime cache (messages.SyncPod.NewSince).
	ctx.Send(pid, &messages.SyncPod{Pod: p, NewSince: a.since})
}

// gracefulDelete kills an API pod whose deletion was requested, with the
// deletion's grace period; the final delete follows PodTerminated.
func (a *Actor) gracefulDelete(ctx actor.Context, p *v1.Pod, source string) {
	kill := &messages.KillPod{UID: p.UID, GracePeriod: p.DeletionGracePeriodSeconds, Reason: "deleted from the API server"}
	e, ok := a.pods[p.UID]
	if _, done := a.finished[p.UID]; done && !ok {
		return // its deletion ended here; the StatusActor deletes it
	}
	if !ok {
		delete(a.rejected, p.UID)
		// Not running here (or not any more): a PodActor still cleans up
		// whatever the runtime holds, then the pod is deleted for good.
		pid, err := ctx.SpawnNamed(a.podProps(p.UID), "pod-"+string(p.UID))
		if err != nil {
			a.log.Error("spawn pod actor for deletion", "pod", p.Namespace+"/"+p.Name, "err", err)
			return
		}
		e = &entry{pod: p, source: source, pid: pid}
		a.pods[p.UID] = e
		a.track(e, 1)
	}
	if e.source != source && e.pod != nil {
		return
	}
	a.track(e, -1)
	e.pod, e.deleting, e.respawn = p, true, nil
	if e.killing == nil || e.killing.GracePeriod == nil ||
		(kill.GracePeriod != nil && *kill.GracePeriod < *e.killing.GracePeriod) {
		// A shorter grace period (a second, forced delete) wins.
		keepEviction(e.killing, kill)
		e.killing = kill
		a.sendKill(ctx, p.UID, e)
	}
	a.track(e, 1)
}

// reject reports a pod refused at admission: Failed with the reason, as
// upstream (OutOfpods, OutOfcpu, ...).
func (a *Actor) reject(ctx actor.Context, p *v1.Pod, source, reason, msg string) {
	a.log.Warn("pod rejected", "pod", p.Namespace+"/"+p.Name, "reason", reason, "message", msg)
	out := p.DeepCopy()
	out.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: reason, Message: msg}
	now := metav1.Now()
	out.Status.StartTime = &now
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[rejectedBy] = source
	a.rejected[p.UID] = out
	ctx.Send(a.status, &messages.PodStatusUpdate{Pod: out.DeepCopy()})
}

func (a *Actor) remove(ctx actor.Context, uid types.UID, source string) {
	if source == messages.SourceAPI {
		delete(a.finished, uid)
	}
	if rp, ok := a.rejected[uid]; ok && rp.Annotations[rejectedBy] == source {
		delete(a.rejected, uid)
		ctx.Send(a.status, &messages.PodForget{UID: uid})
		return
	}
	e, ok := a.pods[uid]
	if !ok {
		return
	}
	if e.respawnSource == source {
		e.respawn, e.respawnSource = nil, ""
	}
	if e.source != source || e.killing != nil {
		return
	}
	a.track(e, -1)
	a.releaseSlot(ctx, uid)
	e.killing = &messages.KillPod{UID: uid, Reason: "removed from source " + source}
	a.sendKill(ctx, uid, e)
	a.handOver(e, uid, source)
}

// handOver lets another source that also wants uid run it once the kill
// is done.
func (a *Actor) handOver(e *entry, uid types.UID, from string) {
	if e.respawn != nil {
		return
	}
	names := make([]string, 0, len(a.sources))
	for name := range a.sources {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if p, ok := a.sources[name][uid]; ok && name != from {
			e.respawn, e.respawnSource = p, name
			return
		}
	}
}

func (a *Actor) handlePodEvents(ctx actor.Context, m *messages.PodEvents) {
	for i := range m.Events {
		ev := m.Events[i]
		if e, ok := a.pods[ev.UID]; ok {
			ctx.Send(e.pid, &ev)
		}
	}
}

// killOrphans starts a terminating PodActor for every pod in the runtime
// that no source wants, once every source has delivered its state.
func (a *Actor) killOrphans(ctx actor.Context) {
	if !a.allSynced() {
		return
	}
	for _, uid := range a.runtime {
		if _, ok := a.pods[uid]; ok || a.wanted(uid) {
			// Running, or still wanted by a source: an API pod whose
			// deletion finished here stays in its source until the API
			// server deletes it, and a relist that started before its
			// PodActor removed everything still lists it.
			continue
		}
		pid, err := ctx.SpawnNamed(a.podProps(uid), "pod-"+string(uid))
		if err != nil {
			a.log.Error("spawn orphan killer", "uid", uid, "err", err)
			continue
		}
		a.log.Info("killing orphaned pod", "uid", uid)
		e := &entry{pid: pid, killing: &messages.KillPod{UID: uid, Reason: "orphaned: no source wants it"}}
		a.pods[uid] = e
		ctx.Send(pid, e.killing)
	}
}

// wanted reports whether a source holds the pod.
func (a *Actor) wanted(uid types.UID) bool {
	for _, set := range a.sources {
		if _, ok := set[uid]; ok {
			return true
		}
	}
	return false
}

func (a *Actor) handleNeedPod(ctx actor.Context, m *messages.NeedPod) {
	e, ok := a.pods[m.UID]
	if !ok {
		return
	}
	if e.killing != nil {
		a.evictedSyncFirst(ctx, e)
		ctx.Send(e.pid, e.killing)
		return
	}
	ctx.Send(e.pid, &messages.SyncPod{Pod: e.pod})
}

func (a *Actor) handleTerminated(ctx actor.Context, m *messages.PodTerminated) {
	e, ok := a.pods[m.UID]
	if !ok || e.stopping {
		return
	}
	a.releaseSlot(ctx, m.UID)
	forget := &messages.PodForget{UID: m.UID, DeleteFromAPI: e.deleting}
	if e.pod != nil {
		forget.Namespace, forget.Name = e.pod.Namespace, e.pod.Name
	}
	if !a.keepEvicted(ctx, e, m) {
		ctx.Send(a.status, forget)
	}
	a.releaseDevices(ctx, e)
	if e.deleting && e.source == messages.SourceAPI {
		a.finished[m.UID] = forget
	}
	if e.killing == nil {
		a.track(e, -1)
		e.killing = &messages.KillPod{UID: m.UID, Reason: "terminated"}
	}
	// Keep the entry until the actor has stopped and its name is free
	// (its *actor.Terminated: stopped); a pod desired again meanwhile is
	// respawned then. No StopFuture: the parent hears of its child's end
	// anyway, and a future per pod is a process (and a timer) more.
	e.stopping = true
	if e.w.down {
		a.stopped(ctx, m.UID, e) // stopped by its supervisor already
		return
	}
	ctx.Stop(e.pid)
}

// stopped drops the entry of a terminated pod whose actor has stopped.
func (a *Actor) stopped(ctx actor.Context, uid types.UID, e *entry) {
	if cur, ok := a.pods[uid]; !ok || cur != e {
		return
	}
	a.track(e, -1)
	delete(a.pods, uid)
	if f, ok := a.cfg.Events.(eventForgetter); ok {
		f.Forget(uid) // after the pod's last event: its actor has stopped
	}
	if e.respawn != nil {
		a.upsert(ctx, e.respawn, e.respawnSource)
	}
	a.reportDesired()
	a.compact()
}

func (a *Actor) handleStartSlot(ctx actor.Context, uid types.UID) {
	e, ok := a.pods[uid]
	if !ok {
		return
	}
	if a.cfg.MaxParallelStarts <= 0 || a.starting[uid] || len(a.starting) < a.cfg.MaxParallelStarts {
		a.starting[uid] = true
		ctx.Send(e.pid, &messages.StartGranted{})
		return
	}
	for _, w := range a.waiting {
		if w == uid {
			return
		}
	}
	a.waiting = append(a.waiting, uid)
}

// releaseSlot frees uid's slot (or its place in the queue) and grants the
// next pods waiting.
func (a *Actor) releaseSlot(ctx actor.Context, uid types.UID) {
	delete(a.starting, uid)
	for i, w := range a.waiting {
		if w == uid {
			a.waiting = append(a.waiting[:i], a.waiting[i+1:]...)
			break
		}
	}
	for len(a.waiting) > 0 && len(a.starting) < a.cfg.MaxParallelStarts {
		next := a.waiting[0]
		a.waiting = a.waiting[1:]
		if e, ok := a.pods[next]; ok && e.killing == nil {
			a.starting[next] = true
			ctx.Send(e.pid, &messages.StartGranted{})
		}
	}
}

func (a *Actor) reportDesired() {
	if a.m == nil {
		return
	}
	a.m.SetDesiredPods(true, a.nStatic)
	a.m.SetDesiredPods(false, a.nAPI)
}
