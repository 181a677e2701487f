// Package node is the NodeActor: it merges the pod sources, admits pods,
// owns one PodActor per pod UID and routes runtime events to them.
//
// The files: node.go (the actor: messages, admission in order, kills,
// routing), and one typed part of its state per file, each with its own
// tests: config.go (settings: what New was given, defaulted), sources.go
// (sourceSet: each source's pods, which have synced, Resyncs waiting),
// podtable.go (podTable: the entries, refused and finished pods, the
// runtime's pods), admission.go (admission: what the admitted pods hold
// and the checks against it), nodestatus.go (nodeStatus: labels, extended
// allocatable, pressure), devices.go (deviceWait: pods held until the
// devices are counted), slots.go (startSlots), housekeeping.go
// (housekeeping: its timer and the sweep in flight), allocation.go
// (allocations: the pods' allocated resources and their checkpoint),
// resize.go (resizes: the resize checks and those that wait). respawn.go (a
// PodActor stopped by its supervisor), evict.go (EvictPod), admit.go,
// predicates.go and names.go (admission's rules) act on those parts.
package node

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// New returns the NodeActor producer.
func New(cfg Config, status *actor.PID, podProps PodProps, m Metrics, log *slog.Logger) actor.Producer {
	s := newSettings(cfg, status, podProps, m, log)
	return func() actor.Actor {
		return &Actor{cfg: s}
	}
}

// Actor is the NodeActor. Its state is in typed parts, each owned by one
// file; every part but the configuration starts over with each
// incarnation (handleStarted).
type Actor struct {
	cfg settings // config.go: what New was given, defaulted; read only

	self    actorkit.Self
	since   time.Time // this incarnation started (SyncPod.NewSince)
	closing bool      // stopping or restarting: children end with it

	sources  sourceSet    // sources.go: the pods each source wants, synced, Resyncs waiting
	table    podTable     // podtable.go: entries, refused and finished pods, the runtime's pods
	admitted admission    // admission.go: what the admitted pods hold, and the checks against it
	node     nodeStatus   // nodestatus.go: labels, extended allocatable, pressure
	devWait  deviceWait   // devices.go: pods held until the devices are counted
	slots    startSlots   // slots.go: the start slots held and the queue
	house    housekeeping // housekeeping.go: the timer and the sweep in flight
	allocs   allocations  // allocation.go: the pods' allocated resources, checkpointed
	resizes  resizes      // resize.go: the resizes that wait
}

// track adds (sign 1) or removes (sign -1) an admitted entry's share of
// what the admitted pods hold; every change of an entry's pod or killing
// is wrapped in track(-1), change, track(+1).
func (a *Actor) track(e *entry, sign int) {
	if !e.admitted() {
		return
	}
	a.admitted.track(e.pod, e.source, sign)
}

// compact rebuilds the parts' maps by pod that shrank to a quarter of
// their peak. It runs after every change of the pod set (PodUpdate, an
// entry removed).
func (a *Actor) compact() {
	a.table.compact()
	a.admitted.compact()
	a.slots.compact()
	a.sources.compact()
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
		a.table.setRuntime(m.UIDs)
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
	a.sources = newSourceSet(a.cfg.Sources)
	a.table = newPodTable()
	a.admitted = admission{extended: a.cfg.devicesWired()}
	a.node = newNodeStatus(a.cfg.NodeName, a.cfg.NodeLabels)
	a.slots = newStartSlots(a.cfg.MaxParallelStarts)
	a.house = housekeeping{timer: actorkit.NewTimer("housekeeping")}
	a.allocs.load(a.cfg.allocs, a.cfg.log)
	a.resizes = resizes{}
	a.self = actorkit.Start(ctx, a.cfg.Clock)
	a.since = a.cfg.Clock.Now()
	a.startDevices(ctx)
	a.startPressure(ctx)
	if a.cfg.Sweeper != nil {
		next, _ := a.house.step(false, a.cfg.HousekeepingPeriod)
		a.house.timer.Arm(a.self, next)
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
	if answer, early := a.sources.ask(m.Ask); answer {
		if early {
			a.cfg.log.Warn("answering the status actor before every pod source delivered its pods", "synced", a.sources.synced)
		}
		a.answerResync(ctx, m.Ask)
	}
	for _, e := range a.table.entries {
		if !a.resyncDown(ctx, e) {
			ctx.Send(e.pid, &messages.Resync{})
		}
	}
	for _, p := range a.table.rejected {
		ctx.Send(a.cfg.status, &messages.PodStatusUpdate{Pod: p.DeepCopy()})
	}
	for _, f := range a.table.finished {
		ctx.Send(a.cfg.status, &messages.PodForget{UID: f.UID, Namespace: f.Namespace, Name: f.Name, DeleteFromAPI: true})
	}
}

// answerResync tells the StatusActor the pods whose status it gets again.
func (a *Actor) answerResync(ctx actor.Context, ask uint64) {
	ctx.Send(a.cfg.status, &messages.ResyncPods{Ask: ask, UIDs: a.table.resyncUIDs()})
}

func (a *Actor) markSynced(ctx actor.Context, source string) {
	first, answer := a.sources.markSynced(source)
	if !first {
		return
	}
	a.cfg.log.Info("source synced", "source", source)
	if a.sources.allSynced() {
		// Allocations of pods that did not come back are dropped.
		a.allocs.keepOnly(func(uid types.UID) bool {
			_, ok := a.table.get(uid)
			return ok || a.sources.wanted(uid)
		}, a.cfg.log)
	}
	for _, ask := range answer {
		a.answerResync(ctx, ask)
	}
	a.killOrphans(ctx)
}

func (a *Actor) handlePodUpdate(ctx actor.Context, m *messages.PodUpdate) {
	set := a.sources.of(m.Source)
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
		a.sources.replace(m.Source, next)
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
	a.retryResizes(ctx)
	a.reportDesired()
	a.compact()
}

func (a *Actor) upsert(ctx actor.Context, p *v1.Pod, source string) {
	if p == nil || p.UID == "" {
		return
	}
	if p.DeletionTimestamp != nil {
		a.gracefulDelete(ctx, p, source)
		return
	}
	if e, ok := a.table.get(p.UID); ok {
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
		e.pod = a.resizeUpdate(ctx, e, p) // p with its allocated resources
		a.track(e, 1)
		ctx.Send(e.pid, &messages.SyncPod{Pod: e.pod})
		return
	}
	if a.table.refused(p.UID) {
		return
	}
	if source == messages.SourceAPI && (p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed) {
		return // finished before: never run again (what is left in the runtime is an orphan)
	}
	// Admitted with its allocated resources when it has some (a restarted
	// agent); a resize asked meanwhile is checked once it runs.
	desired := p
	p = a.allocs.view(p)
	if reason, msg := a.nameConflict(p); reason != "" {
		a.reject(ctx, p, source, reason, msg)
		return
	}
	if reason, msg := a.node.admitPressure(p, source); reason != "" {
		a.reject(ctx, p, source, reason, msg)
		return
	}
	if reason, msg := a.cfg.Sysctls.Admit(p); reason != "" {
		a.reject(ctx, p, source, reason, msg)
		return
	}
	if reason, msg := a.admitted.fits(p, a.cfg.MaxPods, a.cfg.Allocatable); reason != "" {
		a.reject(ctx, p, source, reason, msg)
		return
	}
	if a.devWait.hold(p, source) {
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
	if e, ok := a.table.get(p.UID); ok && desired != p {
		a.track(e, -1)
		e.pod = a.resizeUpdate(ctx, e, desired)
		a.track(e, 1)
		if e.pod != p {
			ctx.Send(e.pid, &messages.SyncPod{Pod: e.pod})
		}
	}
}

func (a *Actor) spawn(ctx actor.Context, p *v1.Pod, source string) {
	pid, err := ctx.SpawnNamed(a.cfg.podProps(p.UID), "pod-"+string(p.UID))
	if err != nil {
		// Cannot happen while entries outlive their actors' stop; logged
		// loudly if it ever does.
		a.cfg.log.Error("spawn pod actor", "pod", p.Namespace+"/"+p.Name, "err", err)
		return
	}
	e := &entry{pod: p, source: source, pid: pid}
	a.table.add(p.UID, e)
	a.track(e, 1)
	if a.allocs.get(p.UID) == nil {
		a.allocs.set(p, a.cfg.log) // admitted with what it asks for
	}
	// No entry held the UID: no PodActor of this incarnation runs or ran
	// anything of it that a later kill did not remove, so its first read
	// may come from the runtime cache (messages.SyncPod.NewSince).
	ctx.Send(pid, &messages.SyncPod{Pod: p, NewSince: a.since})
}

// gracefulDelete kills an API pod whose deletion was requested, with the
// deletion's grace period; the final delete follows PodTerminated.
func (a *Actor) gracefulDelete(ctx actor.Context, p *v1.Pod, source string) {
	kill := &messages.KillPod{UID: p.UID, GracePeriod: p.DeletionGracePeriodSeconds, Reason: "deleted from the API server"}
	e, ok := a.table.get(p.UID)
	if a.table.isFinished(p.UID) && !ok {
		return // its deletion ended here; the StatusActor deletes it
	}
	if !ok {
		delete(a.table.rejected, p.UID)
		// Not running here (or not any more): a PodActor still cleans up
		// whatever the runtime holds, then the pod is deleted for good.
		pid, err := ctx.SpawnNamed(a.cfg.podProps(p.UID), "pod-"+string(p.UID))
		if err != nil {
			a.cfg.log.Error("spawn pod actor for deletion", "pod", p.Namespace+"/"+p.Name, "err", err)
			return
		}
		e = &entry{pod: p, source: source, pid: pid}
		a.table.add(p.UID, e)
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
	a.cfg.log.Warn("pod rejected", "pod", p.Namespace+"/"+p.Name, "reason", reason, "message", msg)
	out := p.DeepCopy()
	out.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: reason, Message: msg}
	now := metav1.Now()
	out.Status.StartTime = &now
	a.table.refuse(out, source)
	ctx.Send(a.cfg.status, &messages.PodStatusUpdate{Pod: out.DeepCopy()})
}

func (a *Actor) remove(ctx actor.Context, uid types.UID, source string) {
	if source == messages.SourceAPI {
		delete(a.table.finished, uid)
	}
	if a.table.unrefuse(uid, source) {
		ctx.Send(a.cfg.status, &messages.PodForget{UID: uid})
		return
	}
	e, ok := a.table.get(uid)
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
	if p, name, ok := a.sources.other(uid, from); ok {
		e.respawn, e.respawnSource = p, name
	}
}

func (a *Actor) handlePodEvents(ctx actor.Context, m *messages.PodEvents) {
	for i := range m.Events {
		ev := m.Events[i]
		if e, ok := a.table.get(ev.UID); ok {
			ctx.Send(e.pid, &ev)
		}
	}
}

// killOrphans starts a terminating PodActor for every pod in the runtime
// that no source wants, once every source has delivered its state.
func (a *Actor) killOrphans(ctx actor.Context) {
	if !a.sources.allSynced() {
		return
	}
	for _, uid := range a.table.runtime {
		if _, ok := a.table.get(uid); ok || a.sources.wanted(uid) {
			// Running, or still wanted by a source: an API pod whose
			// deletion finished here stays in its source until the API
			// server deletes it, and a relist that started before its
			// PodActor removed everything still lists it.
			continue
		}
		pid, err := ctx.SpawnNamed(a.cfg.podProps(uid), "pod-"+string(uid))
		if err != nil {
			a.cfg.log.Error("spawn orphan killer", "uid", uid, "err", err)
			continue
		}
		a.cfg.log.Info("killing orphaned pod", "uid", uid)
		e := &entry{pid: pid, killing: &messages.KillPod{UID: uid, Reason: "orphaned: no source wants it"}}
		a.table.add(uid, e)
		ctx.Send(pid, e.killing)
	}
}

func (a *Actor) handleNeedPod(ctx actor.Context, m *messages.NeedPod) {
	e, ok := a.table.get(m.UID)
	if !ok {
		return
	}
	if e.killing != nil {
		a.evictedSyncFirst(ctx, e)
		ctx.Send(e.pid, e.killing)
		return
	}
	ctx.Send(e.pid, &messages.SyncPod{Pod: e.pod})
	a.sendPending(ctx, m.UID, e)
}

func (a *Actor) handleTerminated(ctx actor.Context, m *messages.PodTerminated) {
	e, ok := a.table.get(m.UID)
	if !ok || e.stopping {
		return
	}
	a.releaseSlot(ctx, m.UID)
	forget := &messages.PodForget{UID: m.UID, DeleteFromAPI: e.deleting}
	if e.pod != nil {
		forget.Namespace, forget.Name = e.pod.Namespace, e.pod.Name
	}
	if !a.keepEvicted(ctx, e, m) {
		ctx.Send(a.cfg.status, forget)
	}
	a.releaseDevices(ctx, e)
	a.unprepareClaims(ctx, e)
	if e.deleting && e.source == messages.SourceAPI {
		a.table.finish(forget)
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
	if !a.table.drop(uid, e) {
		return
	}
	a.track(e, -1)
	a.allocs.forget(uid, a.cfg.log)
	delete(a.resizes.pending, uid)
	if f, ok := a.cfg.Events.(eventForgetter); ok {
		f.Forget(uid) // after the pod's last event: its actor has stopped
	}
	if e.respawn != nil {
		a.upsert(ctx, e.respawn, e.respawnSource)
	}
	a.retryResizes(ctx) // room was made
	a.reportDesired()
	a.compact()
}

func (a *Actor) handleStartSlot(ctx actor.Context, uid types.UID) {
	e, ok := a.table.get(uid)
	if !ok {
		return
	}
	if a.slots.ask(uid) {
		ctx.Send(e.pid, &messages.StartGranted{})
	}
}

// releaseSlot frees uid's slot (or its place in the queue) and grants the
// next pods waiting.
func (a *Actor) releaseSlot(ctx actor.Context, uid types.UID) {
	granted := a.slots.release(uid, func(next types.UID) bool {
		e, ok := a.table.get(next)
		return ok && e.killing == nil
	})
	for _, next := range granted {
		e, _ := a.table.get(next)
		ctx.Send(e.pid, &messages.StartGranted{})
	}
}

func (a *Actor) reportDesired() {
	a.cfg.reportDesired(a.admitted.nStatic, a.admitted.nAPI)
}
