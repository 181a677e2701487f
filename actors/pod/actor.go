// Package pod is the PodActor: one pod's lifecycle (sandbox, init containers,
// containers, restarts with back-off, kill) against a CRI runtime.
//
// The actor keeps no state that the runtime cannot give back: its view of the
// pod is rebuilt from the runtime (objects carry the pod UID label), restart
// counts are the containers' attempt numbers and back-off is computed from
// the last container's finish time. A restarted PodActor (or a restarted
// actorlet) therefore adopts what runs, never creates it twice and never
// counts a restart that did not happen.
//
// The view is kept without listing the runtime on every step: each
// incarnation lists once, then follows its own operations (each reads back
// the status of what it made or stopped) and the PLEG's runtime cache (the
// pod's slice of each relist that shows a change, or one asked for when
// the actor must look again). It lists again only when an operation cannot
// tell what it changed, or when the cache does not answer in time.
//
// The files: actor.go (the state machine: messages, reads, reconcile),
// ops.go (runtime operations off the mailbox), hooks.go (lifecycle hooks
// and stops), env.go (a container's environment), plan.go (the next step,
// a pure function), status.go (the pod status, a pure function),
// runtime.go (the snapshot and how it is read and updated), probes.go
// (ProbeActors, their checkpoint and their respawn), files.go (the host files it needs,
// behind interfaces), resize.go (in-place resize: the allocation the
// NodeActor sends applied to the running containers), and one small value
// type per concern: gate.go,
// retry.go, slot.go, images.go, volumes.go, events.go, deadline.go.
package pod

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/actors/probe"
	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// Metrics is what a PodActor reports. May be nil.
type Metrics interface {
	ObservePodStart(d time.Duration)
	IncStartedContainers(containerType string)
}

// Config holds the node-wide settings a PodActor needs.
type Config struct {
	RuntimeName    string // prefix of container IDs in status ("containerd", "sim")
	RuntimeHandler string
	HostIP         string
	PodLogsDir     string        // upstream default /var/log/pods
	BackoffBase    time.Duration // container restart back-off: 10 s upstream
	BackoffMax     time.Duration // 300 s upstream
	SyncPeriod     time.Duration // periodic re-inspection (upstream sync frequency, 1 m)
	RetryDelay     time.Duration // after a failed runtime call (default 1 s)
	// OpTimeout bounds one runtime operation (upstream runtime request
	// timeout, 2 m); a stop adds the grace period.
	OpTimeout time.Duration
	// CacheWait bounds the wait for the PLEG's runtime cache; past it the
	// actor lists the runtime itself (default 10 s).
	CacheWait time.Duration
	// ThrottleStarts: ask the parent for a start slot (StartSlot) before
	// starting a new pod, and give it back once the pod started or waits.
	ThrottleStarts bool
	// NodeAllocatable is what the downward API reports for a limit the
	// container does not set (resourceFieldRef limits.*), as upstream. Read
	// only.
	NodeAllocatable v1.ResourceList
	// MemoryCapacity is the machine's memory capacity in bytes (the node
	// status's capacity, not allocatable), from which a Burstable
	// container's OOM score adjustment is computed, as upstream; 0:
	// unknown (podspec.ContainerOOMScoreAdjust).
	MemoryCapacity int64
	// DNS is the pods' resolv.conf and managed /etc/hosts (--cluster-dns,
	// --cluster-domain, --resolv-conf, the node's /etc/hosts); nil: the
	// runtime's default resolv.conf, and host-network pods get no managed
	// /etc/hosts. Read only.
	DNS *DNS
	// CgroupDriver names the pods' cgroup parents ("" is cgroupfs).
	CgroupDriver podspec.CgroupDriver
	// NoCDI says why the runtime cannot inject CDI devices (its version
	// predates CDI); empty: it can. A container given CDI devices then
	// fails with CreateContainerConfigError rather than run without them.
	NoCDI string
}

// Probing is what the ProbeActors need. The zero value runs exec probes
// through the Runtime when it can exec; probes of a handler kind with no
// handler fail with "probe handler not configured".
type Probing struct {
	Handlers probe.Handlers
	Metrics  probe.Metrics
	// Props wraps a ProbeActor's producer (middlewares, supervisor); nil:
	// plain props.
	Props func(actor.Producer) *actor.Props
	// RespawnBackoff (default 1 m), doubling up to RespawnBackoffMax
	// (default 5 m), is how long a ProbeActor stopped by its supervisor
	// (it failed too often) stays down (probes.go).
	RespawnBackoff, RespawnBackoffMax time.Duration
}

// Deps are a PodActor's collaborators.
type Deps struct {
	Runtime Runtime
	Images  *actor.PID
	Status  *actor.PID
	// PLEG serves the runtime cache (GetRuntimePod); nil: the actor lists
	// the runtime whenever it looks again.
	PLEG    *actor.PID
	Clock   clock.WithDelayedExecution
	Log     *slog.Logger
	Metrics Metrics
	Config  Config
	// Probes run the containers' probes and the httpGet lifecycle hooks.
	Probes Probing
	// ConfigSource gives the ConfigMaps and Secrets env refers to; nil: a
	// non-optional reference fails with CreateContainerConfigError.
	ConfigSource ConfigSource
	// Volumes is the VolumeActor; nil: pods with volumes get none mounted.
	Volumes *actor.PID
	// Devices is the DevicesActor, asked for the devices of a pod that
	// requests extended resources (GPUs) before its containers are
	// created; nil: such pods get none.
	Devices *actor.PID
	// Claims is the ClaimsActor (Dynamic Resource Allocation), asked to
	// prepare the ResourceClaims of a pod that has any before its sandbox
	// is created; nil: such pods wait (a claim cannot be prepared).
	Claims *actor.PID
	// Cgroups is the CgroupActor, asked for the pod's cgroup before its
	// sandbox (its answer is the sandbox's cgroup parent) and to remove it
	// once the pod is gone (cgroup.go), and to ResizePodCgroup when a
	// resize changes the pod's limits (resize.go); nil: the parent is
	// named from Config.CgroupDriver and no cgroup is made or resized.
	Cgroups *actor.PID
	// Files keeps the pod's files on the host (managed /etc/hosts,
	// termination logs, probe checkpoints); nil: none.
	Files Files
	// Events records Kubernetes events about the pod (upstream reasons:
	// Pulling, Pulled, Created, Started, Killing, BackOff, Failed,
	// FailedMount, Unhealthy); nil: none.
	Events Recorder
}

// New returns the producer of the PodActor for uid. It refuses missing
// dependencies by panicking at wiring time, never at run time.
func New(uid types.UID, d Deps) actor.Producer {
	return producer(uid, prepare(d))
}

// Producers is New for every pod of a node: the Deps are checked and
// defaulted once and shared (read only) by all the PodActors, not copied
// into each (400 B per pod).
func Producers(d Deps) func(uid types.UID) actor.Producer {
	dp := prepare(d)
	return func(uid types.UID) actor.Producer { return producer(uid, dp) }
}

func producer(uid types.UID, d *Deps) actor.Producer {
	return func() actor.Actor {
		return &Actor{uid: uid, d: d, log: d.Log.With("pod_uid", string(uid))}
	}
}

// prepare checks d and fills in the defaults.
func prepare(d Deps) *Deps {
	if d.Runtime == nil || d.Clock == nil || d.Status == nil || d.Images == nil {
		panic("pod.New: Runtime, Clock, Status and Images are required")
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	c := &d.Config
	c.BackoffBase = orDefault(c.BackoffBase, 10*time.Second)
	c.BackoffMax = orDefault(c.BackoffMax, 300*time.Second)
	c.SyncPeriod = orDefault(c.SyncPeriod, time.Minute)
	c.RetryDelay = orDefault(c.RetryDelay, time.Second)
	c.OpTimeout = orDefault(c.OpTimeout, 2*time.Minute)
	c.CacheWait = orDefault(c.CacheWait, 10*time.Second)
	if c.PodLogsDir == "" {
		c.PodLogsDir = "/var/log/pods"
	}
	if c.RuntimeName == "" {
		c.RuntimeName = "cri"
	}
	if d.Probes.Handlers.Exec == nil {
		if ex, ok := d.Runtime.(probe.Execer); ok {
			d.Probes.Handlers.Exec = ex
		}
	}
	if d.Probes.Props == nil {
		d.Probes.Props = func(p actor.Producer) *actor.Props { return actor.PropsFromProducer(p) }
	}
	return &d
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Actor is the PodActor: the pod's state machine. It reads the runtime
// (inspect), plans one step (plan), takes it (run) and publishes the status
// whenever it changes.
type Actor struct {
	uid types.UID
	d   *Deps // shared by the node's PodActors: read only
	log *slog.Logger

	self   actorkit.Self
	parent *actor.PID

	// What is wanted.
	pod  *v1.Pod
	kill *messages.KillPod

	// What the runtime holds, and what was published.
	snap        *snapshot
	sboxOf      map[string]string
	backoffFrom map[string]int32     // restart count where a changed spec's back-off began (planner)
	pending     *messages.RuntimePod // newest cache slice seen while busy
	status      *v1.PodStatus        // last published
	waits       map[string]waitInfo  // image and runtime errors per container
	started     time.Time            // first time this incarnation saw the pod
	seenRun     bool                 // pod start observed (or adopted running)
	done        bool                 // PodTerminated sent
	final       *delta               // what the kill read before removing the pod (final.go)

	// How the next step is taken.
	gate     gate
	retry    retry
	wake     actorkit.Timer // a back-off, hold or deadline ends
	resync   actorkit.Timer // periodic look (SyncPeriod)
	cacheTTL actorkit.Timer // the runtime cache did not answer in time
	asked    bool           // a GetRuntimePod is pending
	askedFor time.Time      // its NotBefore
	// newSince is the first SyncPod's NewSince: until the first read,
	// a relist that started after it shows all the runtime holds of the
	// pod (zero: the first read lists).
	newSince time.Time

	// Collaborations.
	slot     startSlot
	images   imageWaits
	volumes  volumeState
	devices  deviceState
	claims   claimState
	cgroup   cgroupState
	probes   probeSet
	deadline deadline
	events   eventLog
	resize   resizeState // resize.go
}

// Messages the actor sends to itself.
type (
	opDone struct {
		actorkit.Tag
		kind actionKind
		name string
		d    *delta
		err  error
	}
	checkpointLoaded struct {
		actorkit.Tag
		results map[string]*ctrResult
		err     error
	}
)

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.handleStarted(ctx)
	case *actor.Restarting, *actor.Stopping:
		a.stopTimers()
		a.probes.closing = true // the ProbeActors end with it
	case *actor.Stopped:
	case *messages.SyncPod:
		a.handleSyncPod(ctx, m)
	case *messages.KillPod:
		a.handleKillPod(ctx, m)
	case *messages.PodLifecycleEvent:
		a.handleEvent(ctx, m)
	case *messages.RuntimePod:
		a.handleCached(m)
	case *messages.Resync:
		a.status = nil // publish again even if unchanged
		a.kick(ctx)
	case *messages.ImageResult:
		a.handleImageResult(ctx, m)
	case *messages.VolumesReady:
		a.handleVolumesReady(ctx, m)
	case *messages.DevicesAllocated:
		a.handleDevicesAllocated(ctx, m)
	case *messages.ClaimsPrepared:
		a.handleClaimsPrepared(ctx, m)
	case *messages.PodCgroup:
		a.handlePodCgroup(ctx, m) // a ResizePodCgroup's answer goes to its future
	case *messages.ClaimsHealth:
		a.handleClaimsHealth(ctx, m)
	case *messages.ClaimsUnprepared:
		a.handleClaimsUnprepared(ctx, m)
	case *messages.PodResizePending:
		a.handleResizePending(ctx, m)
	case *messages.StartGranted:
		if a.slot.grant() {
			a.kick(ctx)
		}
	case *messages.ProbeResult:
		a.handleProbeResult(ctx, m)
	case *messages.ProbeWarning:
		a.handleProbeWarning(m)
	case *actor.Terminated:
		actorkit.ForgetStoppedChildren(ctx) // else the stopped ProbeActor stays reachable
		a.handleProbeTerminated(ctx, m.Who)
	case *actorkit.Fired:
		a.handleFired(ctx, m)
	case *checkpointLoaded:
		if a.self.Mine(m) {
			a.handleCheckpointLoaded(ctx, m)
		}
	case *inspected:
		if a.self.Mine(m) {
			a.handleInspected(ctx, m)
		}
	case *opDone:
		if a.self.Mine(m) {
			a.handleOpDone(ctx, m)
		}
	}
}

func (a *Actor) handleStarted(ctx actor.Context) {
	a.self, a.parent = actorkit.Start(ctx, a.d.Clock), ctx.Parent()
	a.wake, a.resync, a.cacheTTL = actorkit.NewTimer("wake"), actorkit.NewTimer("resync"), actorkit.NewTimer("cache")
	a.gate = newGate(a.d.Clock.Now())
	a.retry = newRetry(a.d.Config.RetryDelay)
	a.waits = map[string]waitInfo{}
	a.probes = newProbeSet()
	a.events = eventLog{rec: a.d.Events}
	a.resize.sys = ctx.ActorSystem()
	a.loadCheckpoint()
	if p := ctx.Parent(); p != nil {
		ctx.Send(p, &messages.NeedPod{UID: a.uid})
		if a.d.Config.ThrottleStarts {
			// A slot an earlier incarnation held is given back; this one
			// asks again if it still has to start the pod.
			ctx.Send(p, &messages.StartDone{UID: a.uid})
		}
	}
	a.resync.Arm(a.self, a.d.Config.SyncPeriod)
	// No read yet: the parent's SyncPod or KillPod (sent with the spawn,
	// and again for NeedPod) starts the first one.
}

func (a *Actor) stopTimers() {
	a.wake.Stop()
	a.resync.Stop()
	a.cacheTTL.Stop()
}

func (a *Actor) handleFired(ctx actor.Context, m *actorkit.Fired) {
	if a.probeRespawnFired(ctx, m) {
		return
	}
	switch {
	case a.wake.Fired(a.self, m):
		a.kick(ctx)
	case a.resync.Fired(a.self, m):
		a.resync.Arm(a.self, a.d.Config.SyncPeriod)
		// A volume answer pending for a whole period is lost (the
		// VolumeActor restarted): ask again.
		a.volumes.asked = false
		a.devices.asked = false
		a.claims.asked = false
		a.claims.unprepAsked = false
		a.cgroup.asked = false
		a.look(ctx, false)
	case a.cacheTTL.Fired(a.self, m):
		if a.asked {
			// The PLEG did not answer (restarting, or the runtime fails
			// its relists): list the runtime directly.
			a.asked = false
			a.log.Debug("runtime cache did not answer, listing")
			a.inspect(nil)
		}
	}
}

func (a *Actor) handleSyncPod(ctx actor.Context, m *messages.SyncPod) {
	if m.Pod == nil || a.kill != nil || m.Pod == a.pod {
		return // the same pointer is the same pod: senders share it read only
	}
	if a.pod == nil {
		a.started = a.d.Clock.Now()
		if a.snap == nil {
			a.newSince = m.NewSince
		}
	} else if apiequality.Semantic.DeepEqual(a.pod.Spec, m.Pod.Spec) && apiequality.Semantic.DeepEqual(a.pod.ObjectMeta, m.Pod.ObjectMeta) {
		return // the same pod again (the answer to NeedPod): nothing to look at
	}
	if a.volumes.paths != nil && a.d.Volumes != nil && metadataChanged(a.pod, m.Pod) {
		ctx.Send(a.d.Volumes, &messages.EnsureVolumes{Pod: m.Pod, Refresh: true})
	}
	a.pod = m.Pod
	a.kick(ctx)
}

func (a *Actor) handleKillPod(ctx actor.Context, m *messages.KillPod) {
	if a.kill == nil {
		a.log.Info("killing pod", "reason", m.Reason)
	}
	a.kill = evictedKill(a.kill, m)
	a.images.drop() // image results no longer matter
	a.releaseSlot()
	a.kick(ctx)
}

// handleEvent takes a change the PLEG saw. A slice that shows what the
// actor already knows is dropped (its own operations come back this way);
// a fresh one is read as it is; anything else makes the actor look again.
func (a *Actor) handleEvent(ctx actor.Context, ev *messages.PodLifecycleEvent) {
	if a.snap.matches(ev.Pod) {
		return
	}
	if !a.gate.idle() {
		if ev.Pod != nil {
			a.pending = ev.Pod
		}
		a.gate.later(false)
		return
	}
	if ev.Pod != nil && a.gate.fresh(ev.Pod.Relisted) && a.snap != nil {
		a.inspect(ev.Pod)
		return
	}
	a.look(ctx, false)
}

// kick plans again from the current view, reading the runtime first if
// there is no view yet; when a read or an operation is in flight, the plan
// follows it.
func (a *Actor) kick(ctx actor.Context) {
	if a.done || !a.self.Started() {
		return
	}
	if !a.gate.idle() {
		a.gate.replan = true // the read or operation in flight continues
		return
	}
	if a.snap == nil {
		a.look(ctx, false) // a list, unless the pod is new to the node
		return
	}
	a.afterIdle(ctx)
}

// look reads the runtime again: through the PLEG's cache (a relist newer
// than the last operation) or, when mustList or when there is no cache,
// by listing it. The first read lists too, unless the pod is new to the
// node (newSince): then a relist newer than that shows all there is, and
// a new pod costs no list.
func (a *Actor) look(_ actor.Context, mustList bool) {
	if a.done || !a.self.Started() {
		return
	}
	if !a.gate.idle() {
		a.gate.later(mustList)
		return
	}
	if mustList || a.d.PLEG == nil || (a.snap == nil && a.newSince.IsZero()) {
		a.inspect(nil)
		return
	}
	notBefore := a.gate.quiet
	if a.snap == nil {
		notBefore = a.newSince
	}
	a.gate.beginRead()
	a.asked, a.askedFor = true, notBefore
	a.self.SendTo(a.d.PLEG, &messages.GetRuntimePod{UID: a.uid, NotBefore: notBefore, ReplyTo: a.self.PID()})
	a.cacheTTL.Arm(a.self, a.d.Config.CacheWait)
}

// handleCached takes the PLEG's answer to GetRuntimePod.
func (a *Actor) handleCached(m *messages.RuntimePod) {
	if !a.asked || m.UID != a.uid || !m.Relisted.After(a.askedFor) {
		return // an answer the actor no longer waits for
	}
	a.asked = false
	a.cacheTTL.Stop()
	a.gate.reading = false
	a.inspect(m)
}

// inspect reads the pod's statuses off the mailbox, from the cache slice
// (nil: listing the runtime).
func (a *Actor) inspect(cached *messages.RuntimePod) {
	seq := a.gate.beginRead()
	rt, files, uid, prev := a.d.Runtime, a.termReader(), a.uid, a.snap
	actorkit.Go(a.self, a.d.Config.OpTimeout, func(ctx context.Context) *inspected {
		snap, sboxOf, err := inspect(ctx, rt, files, uid, prev, cached)
		return &inspected{opSeq: seq, snap: snap, sandboxOf: sboxOf, err: err}
	})
}

func (a *Actor) termReader() TerminationReader {
	if a.d.Files == nil {
		return nil
	}
	return a.d.Files
}

func (a *Actor) handleInspected(ctx actor.Context, m *inspected) {
	if !a.gate.endRead(m.opSeq) {
		// An operation started while the runtime was read: the view is
		// stale. Look again once the operation is done.
		a.gate.later(true)
		a.afterIdle(ctx)
		return
	}
	if m.err != nil {
		a.log.Warn("inspect pod", "err", m.err)
		a.wake.ArmAt(a.self, a.d.Clock.Now().Add(a.retry.fail()))
		a.gate.later(true)
		return
	}
	a.snap, a.sboxOf = m.snap, m.sandboxOf
	if a.gate.reread {
		// Seen during the read: afterIdle reads again unless the newest
		// slice seen (pending) shows no more than this view.
		a.afterIdle(ctx)
		return
	}
	a.pending = nil
	a.gate.replan = false
	a.reconcile(ctx)
}

// afterIdle does what waited for the gate: a read, else a plan.
func (a *Actor) afterIdle(ctx actor.Context) {
	if !a.gate.idle() {
		return
	}
	if a.gate.reread {
		if !a.gate.list && a.snap.matches(a.pending) {
			a.gate.reread = false // the change seen meanwhile was the actor's own
		} else {
			a.pending = nil
			a.look(ctx, a.gate.list)
			return
		}
	}
	a.pending = nil
	a.gate.replan = false
	a.reconcile(ctx)
}

// reconcile publishes the status and takes the next step.
func (a *Actor) reconcile(ctx actor.Context) {
	if a.snap == nil || !a.probes.loaded {
		return // the first read, or the probe checkpoint, continues
	}
	now := a.d.Clock.Now()
	a.syncProbes(ctx)
	if a.kill != nil {
		a.reconcileKill(ctx, now)
		return
	}
	if a.pod == nil {
		return // wait for the parent's SyncPod or KillPod
	}
	if a.images.any() || a.retry.held(now) {
		// An image is being made present (its result continues), or a
		// failed operation waits for its retry.
		a.publish(a.waits, now)
		return
	}
	if a.checkDeadline(now) {
		a.publish(a.waits, now)
	}
	if act, ok := a.pendingKill(); ok {
		a.publish(a.waits, now)
		a.run(act, false)
		return
	}
	// Plan with the phase of the status as it stands.
	st := a.statusWith(a.waits, now)
	p := planner{pod: a.pod, snap: a.snap, sandboxOf: a.sboxOf, phase: st.Phase, now: now,
		base: a.d.Config.BackoffBase, max: a.d.Config.BackoffMax, probe: a.probeState, backoffFrom: a.backoffFrom,
		resizeRestarted: a.resize.restarted, resources: a.actualResources, legacyOK: a.noteLegacyHashes()}.plan()
	a.markResizeRestart(p.act)
	for name, from := range p.backoffFrom {
		if a.backoffFrom == nil {
			a.backoffFrom = map[string]int32{}
		}
		a.backoffFrom[name] = from
	}
	waits := p.waits
	for name, w := range waits {
		if w.reason == ReasonCrashLoopBackOff {
			a.event(v1.EventTypeWarning, "BackOff", name+"/"+w.message, "Back-off restarting failed container %s in pod %s_%s(%s)",
				name, a.pod.Name, a.pod.Namespace, a.pod.UID)
		}
	}
	if len(waits) == 0 {
		// Nothing new waits: the status is the one the plan began with.
		a.publishStatus(st, a.waits, now)
	} else {
		for name, w := range a.waits {
			if _, ok := waits[name]; !ok {
				waits[name] = w
			}
		}
		a.publish(waits, now)
	}
	if !p.wakeAt.IsZero() {
		a.wake.ArmAt(a.self, p.wakeAt)
	}
	if op, ok := a.resizeWanted(st.Phase); ok && p.act.kind == actNone {
		// Nothing else to do now: the running containers are made to
		// match their allocation (resize.go).
		a.startResize(op)
		return
	}
	a.take(ctx, p.act)
}

// reconcileKill stops everything of the pod, then reports it terminated.
func (a *Actor) reconcileKill(ctx actor.Context, now time.Time) {
	if a.pod != nil && (a.kill.Evicted || len(a.snap.runningIDs()) > 0) {
		// Evicted: DisruptionTarget, then Failed/Evicted once gone. Any
		// kill: the containers turn not ready while they stop (upstream's
		// readiness probes fail, or stop, as a pod terminates).
		a.publish(a.waits, now)
	}
	if !a.snap.empty() {
		if !a.retry.held(now) {
			a.run(action{kind: actStopContainers, reason: a.kill.Reason}, true)
		}
		return
	}
	if a.done || !a.claimsReleased(ctx) {
		return // ClaimsUnprepared continues
	}
	a.done = true
	a.removeCgroup(ctx)
	a.publishFinal(now)
	if a.d.Files != nil {
		a.d.Files.RemoveCheckpoint(a.uid)
	}
	if a.d.Volumes != nil {
		ctx.Send(a.d.Volumes, &messages.TearDownVolumes{UID: a.uid})
	}
	a.log.Info("pod terminated")
	done := &messages.PodTerminated{UID: a.uid}
	if a.kill.Evicted && a.status != nil {
		done.Status = a.status.DeepCopy()
	}
	ctx.Send(ctx.Parent(), done)
}

// take starts the planned action, or what it waits for first: a start
// slot, the pod's volumes, the container's image.
func (a *Actor) take(ctx actor.Context, act action) {
	if act.kind == actRunSandbox || (act.kind == actStartContainer && act.createdID == "") {
		// The pod's ResourceClaims are prepared before its sandbox, as
		// upstream (and asked again, answered from the record, by a
		// restarted PodActor before its next container).
		ready, ask := a.claims.ready(true, usesClaims(a.pod))
		switch {
		case ask && a.d.Claims != nil:
			ctx.Send(a.d.Claims, &messages.PrepareClaims{Pod: a.pod, ReplyTo: a.self.PID()})
		case ask: // no ClaimsActor: the answer is a failure, and a retry
			a.self.Send(&messages.ClaimsPrepared{UID: a.uid, Reason: messages.ReasonFailedPrepareDynamicResources,
				Message: "prepare dynamic resources: DRA is off on this node (no claims actor)"})
		}
		if !ready {
			return // ClaimsPrepared continues
		}
		if !a.ensureCgroup(ctx) {
			return // PodCgroup continues
		}
	}
	switch {
	case act.kind == actNone:
	case act.kind == actRunSandbox && act.attempt == 0 && a.d.Config.ThrottleStarts:
		wait, ask := a.slot.needed()
		if ask {
			ctx.Send(ctx.Parent(), &messages.StartSlot{UID: a.uid})
		}
		if !wait {
			a.run(act, false)
		} // else StartGranted continues
	case act.kind == actStartContainer && act.createdID == "":
		ready, ask := a.volumes.ready(a.d.Volumes != nil, len(a.pod.Spec.Volumes))
		if ask {
			ctx.Send(a.d.Volumes, &messages.EnsureVolumes{Pod: a.pod, ReplyTo: a.self.PID()})
		}
		if !ready {
			return // VolumesReady continues
		}
		devPod := podspec.WithoutDRAExtended(a.pod) // DRA-backed extended resources are claims
		ready, ask = a.devices.ready(a.d.Devices != nil, len(podspec.ExtendedResources(devPod)) > 0)
		if ask {
			ctx.Send(a.d.Devices, &messages.AllocateDevices{Pod: devPod, ReplyTo: a.self.PID()})
		}
		if !ready {
			return // DevicesAllocated continues
		}
		id := a.images.add(act)
		ctx.Send(a.d.Images, &messages.EnsureImage{
			RequestID: id, Image: act.container.Image, Policy: act.container.ImagePullPolicy, ReplyTo: a.self.PID(),
		})
	default:
		a.run(act, false)
	}
}

func (a *Actor) handleVolumesReady(ctx actor.Context, m *messages.VolumesReady) {
	if a.kill != nil || !a.volumes.answered(m.Paths, m.Reason != "") {
		return
	}
	if m.Reason != "" {
		a.event(v1.EventTypeWarning, m.Reason, "volumes", "Unable to attach or mount volumes: %s", m.Message)
		a.setupFailed(ctx, m.Reason, m.Message)
		return
	}
	a.setupDone(ctx)
}

// setupFailed shows every container waiting in ContainerCreating with why
// the pod's setup (volumes, devices) failed, and retries after back-off.
func (a *Actor) setupFailed(ctx actor.Context, reason, message string) {
	for _, c := range append(append([]v1.Container{}, a.pod.Spec.InitContainers...), a.pod.Spec.Containers...) {
		a.waits[c.Name] = waitInfo{reason: ReasonContainerCreating, message: reason + ": " + message}
	}
	a.hold(a.retry.fail())
	a.kick(ctx)
}

// setupDone clears what setupFailed showed and goes on.
func (a *Actor) setupDone(ctx actor.Context) {
	for name, w := range a.waits {
		if w.reason == ReasonContainerCreating {
			delete(a.waits, name)
		}
	}
	a.kick(ctx)
}

// handleDevicesAllocated continues a start that waited for the pod's
// devices; a refusal (a device turned unhealthy since admission, a plugin
// failing) is an event and a retry with back-off, as a failed mount.
func (a *Actor) handleDevicesAllocated(ctx actor.Context, m *messages.DevicesAllocated) {
	if a.kill != nil || m.UID != a.uid || !a.devices.answered(m) {
		return
	}
	if m.Reason != "" {
		a.event(v1.EventTypeWarning, m.Reason, "devices", "%s", m.Message)
		a.setupFailed(ctx, m.Reason, m.Message)
		return
	}
	a.setupDone(ctx)
}

func (a *Actor) handleImageResult(ctx actor.Context, m *messages.ImageResult) {
	act, ok := a.images.take(m.RequestID)
	if !ok {
		return
	}
	name := act.container.Name
	if m.Reason != "" {
		a.waits[name] = waitInfo{reason: m.Reason, message: m.Message}
		a.log.Info("image not ready", "container", name, "image", m.Image, "reason", m.Reason, "message", m.Message)
		if m.Reason == messages.ReasonImagePullBackOff {
			a.event(v1.EventTypeNormal, "BackOff", name, "Back-off pulling image %q", m.Image)
		} else {
			a.event(v1.EventTypeWarning, "Failed", name, "%s", m.Message)
		}
		a.hold(a.d.Config.BackoffBase)
		a.kick(ctx) // publishes the waiting reason
		return
	}
	delete(a.waits, name)
	if m.Pulled {
		// The ImageActor pulls for many pods at once and answers when done:
		// Pulling and Pulled come together, in upstream's order.
		a.event(v1.EventTypeNormal, "Pulling", name, "Pulling image %q", m.Image)
		a.event(v1.EventTypeNormal, "Pulled", name, "Successfully pulled image %q", m.Image)
	} else {
		a.event(v1.EventTypeNormal, "Pulled", name, "Container image %q already present on machine", m.Image)
	}
	if a.kill != nil {
		return
	}
	act.imageRef = m.ImageRef
	if !a.gate.idle() {
		a.gate.replan = true // the plan will ask for the image again
		return
	}
	a.run(act, false)
}

// event records an event about the pod, once per key and message.
func (a *Actor) event(eventtype, reason, key, format string, args ...any) {
	a.events.record(a.pod, eventtype, reason, key, format, args...)
}

// startTime is the pod's start: the first sandbox's creation (it survives
// actor restarts), else when this incarnation first saw the pod.
func (a *Actor) startTime() time.Time {
	if sb := a.snap.latestSandbox(); sb != nil && sb.CreatedAt > 0 {
		first := a.snap.sandboxes[len(a.snap.sandboxes)-1]
		return time.Unix(0, first.CreatedAt)
	}
	return a.started
}

// checkDeadline applies activeDeadlineSeconds; it reports whether the
// deadline has just passed, and wakes the actor when it will.
func (a *Actor) checkDeadline(now time.Time) bool {
	var phase v1.PodPhase
	if a.status != nil {
		phase = a.status.Phase
	}
	passed, at := a.deadline.check(a.pod, phase, a.startTime(), now)
	if !at.IsZero() {
		a.wake.ArmAt(a.self, at)
	}
	if passed {
		a.log.Info("pod exceeded its active deadline", "reason", ReasonDeadlineExceeded, "activeDeadlineSeconds", *a.pod.Spec.ActiveDeadlineSeconds)
	}
	return passed
}

func (a *Actor) statusWith(waits map[string]waitInfo, now time.Time) v1.PodStatus {
	st := computeStatus(statusInput{
		pod: a.pod, snap: a.snap, waits: waits, runtimeName: a.d.Config.RuntimeName,
		hostIP: a.d.Config.HostIP, startTime: a.startTime(), prev: a.status, now: now,
		probe: a.probeState, deadlineExceeded: a.deadline.exceeded, resources: a.actualResources,
	})
	if a.pod != nil {
		// The generation of the spec this status is of (upstream's
		// PodObservedGenerationTracking, GA since v1.35): a resize is seen
		// done once it catches up.
		st.ObservedGeneration = a.pod.Generation
		if a.kill == nil {
			st.Conditions = append(st.Conditions, keepTransitionTimes(a.resizeConditions(st.Phase), a.status, now)...)
		}
	}
	if a.kill != nil && a.kill.Evicted {
		st = evictedStatus(st, a.kill, a.snap != nil && a.snap.empty(), a.status, now)
	}
	a.claims.applyHealth(&st)
	return st
}

// publish sends the status to the StatusActor when it changed.
func (a *Actor) publish(waits map[string]waitInfo, now time.Time) {
	a.publishStatus(a.statusWith(waits, now), waits, now)
}

// publishStatus is publish of st, the status with waits at now.
func (a *Actor) publishStatus(st v1.PodStatus, waits map[string]waitInfo, now time.Time) {
	if a.status != nil && apiequality.Semantic.DeepEqual(*a.status, st) {
		return
	}
	if !a.seenRun && st.Phase == v1.PodRunning && allRunning(st) {
		a.seenRun = true
		if a.status != nil && a.d.Metrics != nil { // started by this incarnation
			a.d.Metrics.ObservePodStart(now.Sub(a.started))
		}
	}
	if a.slot.held() && (anyStarted(st) || st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed || len(waits) > 0) {
		a.releaseSlot() // started, or waiting on something: the next pod may start
	}
	a.sendStatus(st)
}

// sendStatus sends st to the StatusActor and keeps it as the last published:
// the status inside the pod sent (read only from here on, as the pod), not
// a copy of it.
func (a *Actor) sendStatus(st v1.PodStatus) {
	out := withStatus(a.pod, &st)
	a.status = &out.Status
	a.self.SendTo(a.d.Status, &messages.PodStatusUpdate{Pod: out})
}

// withStatus is pod with st, for the StatusActor: a shallow copy, since
// the metadata and spec are read only and so is a status once published
// (each is computed anew, never changed after).
func withStatus(pod *v1.Pod, st *v1.PodStatus) *v1.Pod {
	out := *pod
	out.Status = *st
	return &out
}

// releaseSlot gives a start slot back to the parent.
func (a *Actor) releaseSlot() {
	if a.slot.release() {
		a.self.SendTo(a.parent, &messages.StartDone{UID: a.uid})
	}
}

// anyStarted: a container of the pod has run (the costly part of a start,
// sandbox and first container, is over).
func anyStarted(st v1.PodStatus) bool {
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, cs := range list {
			if cs.State.Running != nil || cs.State.Terminated != nil {
				return true
			}
		}
	}
	return false
}

func allRunning(st v1.PodStatus) bool {
	for _, cs := range st.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return true
}

// hold defers the next operation by d and wakes the actor then.
func (a *Actor) hold(d time.Duration) {
	a.wake.ArmAt(a.self, a.retry.hold(a.d.Clock.Now(), d))
}

func (a *Actor) handleOpDone(ctx actor.Context, m *opDone) {
	if m.kind == actResize {
		a.resizeDone(ctx, m)
		return
	}
	a.gate.endOp(a.d.Clock.Now())
	switch {
	case m.err == nil:
		a.retry.ok()
		a.sandboxEvents(m)
		if m.kind == actStartContainer {
			delete(a.waits, m.name)
			seq := strconv.FormatUint(a.gate.ops, 10)
			a.event(v1.EventTypeNormal, "Created", m.name+"/"+seq, "Created container %s", m.name)
			a.event(v1.EventTypeNormal, "Started", m.name+"/"+seq, "Started container %s", m.name)
		}
		a.keepFinal(m.d)
		if m.d == nil || m.d.reread {
			a.look(ctx, true)
			return
		}
		a.snap, a.sboxOf = a.snap.apply(a.sboxOf, m.d)
		a.afterIdle(ctx)
	case errdefs.IsAlreadyExists(m.err):
		// Another incarnation's call holds the name: look again shortly and
		// adopt what it made.
		a.log.Info("runtime object exists, adopting", "op", m.kind.String(), "err", m.err)
		a.hold(a.d.Config.RetryDelay)
		a.look(ctx, true)
	default:
		delay := a.retry.fail()
		a.log.Warn("runtime operation failed", "op", m.kind.String(), "container", m.name, "err", m.err)
		a.sandboxEvents(m)
		if m.kind == actStartContainer && m.name != "" {
			reason := ReasonCreateContainerError
			var se *startError
			if errors.As(m.err, &se) && se.started {
				reason = ReasonRunContainerError
			}
			if se != nil && se.config {
				reason = ReasonCreateContainerConfigError
			}
			if se != nil && se.hook {
				// The container was killed: its exit and restartPolicy
				// decide what follows, as for any other exit.
				a.retry.ok()
				a.look(ctx, true)
				return
			}
			a.waits[m.name] = waitInfo{reason: reason, message: m.err.Error()}
			a.event(v1.EventTypeWarning, "Failed", m.name, "Error: %v", m.err)
		}
		a.hold(delay)
		a.look(ctx, true)
	}
}
