// Package pod is the PodActor: one pod's lifecycle (sandbox, init containers,
// containers, restarts with back-off, kill) against a CRI runtime.
//
// The actor keeps no state that the runtime cannot give back: its view of the
// pod is rebuilt by inspecting the runtime (objects carry the pod UID label),
// restart counts are the containers' attempt numbers and back-off is computed
// from the last container's finish time. A restarted PodActor (or a restarted
// actorlet) therefore adopts what runs, never creates it twice and never
// counts a restart that did not happen.
package pod

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/actors/probe"
	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/messages"
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
	// ThrottleStarts: ask the parent for a start slot (StartSlot) before
	// starting a new pod, and give it back once the pod started or waits.
	ThrottleStarts bool
	// ProbeCheckpointDir keeps each pod's last probe results
	// (<dir>/<pod-uid>.json) so that readiness survives a restart of the
	// PodActor or of actorlet. Empty: no checkpoint.
	ProbeCheckpointDir string
	// PodsDir is the per-pod directory root (upstream <root-dir>/pods):
	// termination message files and the managed /etc/hosts live under
	// <PodsDir>/<pod-uid>/. Empty: neither is mounted.
	PodsDir string
	// NodeAllocatable is what the downward API reports for a limit the
	// container does not set (resourceFieldRef limits.*), as upstream. Read
	// only.
	NodeAllocatable v1.ResourceList
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
}

// Deps are a PodActor's collaborators.
type Deps struct {
	Runtime Runtime
	Images  *actor.PID
	Status  *actor.PID
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
	// Events records Kubernetes events about the pod (upstream reasons:
	// Pulling, Pulled, Created, Started, Killing, BackOff, Failed,
	// FailedMount, Unhealthy); nil: none.
	Events Recorder
}

// Recorder records events (client-go's record.EventRecorder satisfies it).
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// New returns the producer of the PodActor for uid. It refuses missing
// dependencies by panicking at wiring time, never at run time.
func New(uid types.UID, d Deps) actor.Producer {
	if d.Runtime == nil || d.Clock == nil || d.Status == nil || d.Images == nil {
		panic("pod.New: Runtime, Clock, Status and Images are required")
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	c := &d.Config
	if c.BackoffBase <= 0 {
		c.BackoffBase = 10 * time.Second
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 300 * time.Second
	}
	if c.SyncPeriod <= 0 {
		c.SyncPeriod = time.Minute
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = time.Second
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = 2 * time.Minute
	}
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
	return func() actor.Actor {
		return &Actor{uid: uid, d: d, log: d.Log.With("pod_uid", string(uid))}
	}
}

// Actor is the PodActor.
type Actor struct {
	uid types.UID
	d   Deps
	log *slog.Logger

	sys    *actor.ActorSystem
	self   *actor.PID
	parent *actor.PID
	gen    uint64 // this incarnation; results of an earlier one are dropped

	pod     *v1.Pod
	kill    *messages.KillPod
	snap    *snapshot
	sboxOf  map[string]string
	waits   map[string]waitInfo // image and runtime errors per container
	status  *v1.PodStatus       // last published
	started time.Time           // first time this incarnation saw the pod
	seenRun bool                // pod start observed (or adopted running)
	done    bool                // PodTerminated sent

	inspecting bool
	busy       bool   // a runtime operation is in flight
	opSeq      uint64 // operations started; an inspection older than the last one is stale
	dirty      bool   // inspect again when the current call returns
	pulling    map[uint64]pendingStart
	nextReq    uint64

	wake      clock.Timer
	wakeAt    time.Time
	wakeSeq   uint64
	resync    clock.Timer
	failures  int       // consecutive failed operations (retry back-off)
	holdUntil time.Time // no new operation before this (after a failure)

	probes        map[string]*probeChild // running ProbeActors by name
	probeStopping map[string]bool        // stopped, Terminated not yet seen
	results       map[string]*ctrResult  // probe results by container ID (checkpointed)
	kills         map[string]killReq     // containers to kill (probe failures), by ID

	deadlineExceeded bool // activeDeadlineSeconds passed: the pod failed

	slot     slotState         // start slot (Config.ThrottleStarts)
	volPaths map[string]string // host path of each volume, once set up
	volAsked bool              // EnsureVolumes sent, answer pending
	events   map[string]string // last event per key, to avoid repeating it
}

type slotState int

const (
	slotNone slotState = iota
	slotAsked
	slotHeld
	slotDone
)

type pendingStart struct {
	act action
}

// Messages the actor sends to itself.
type (
	opDone struct {
		gen  uint64
		kind actionKind
		name string
		err  error
	}
	wakeUp struct {
		gen, seq uint64
	}
)

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.handleStarted(ctx)
	case *actor.Restarting:
		a.stopTimers()
	case *actor.Stopping:
		a.stopTimers()
	case *actor.Stopped:
	case *messages.SyncPod:
		a.handleSyncPod(m)
	case *messages.KillPod:
		a.handleKillPod(m)
	case *messages.PodLifecycleEvent:
		if a.stale(m) {
			a.requestInspect()
		}
	case *messages.Resync:
		a.status = nil // publish again even if unchanged
		a.requestInspect()
	case *messages.ImageResult:
		a.handleImageResult(m)
	case *messages.VolumesReady:
		a.handleVolumesReady(m)
	case *messages.StartGranted:
		if a.slot == slotAsked {
			a.slot = slotHeld
			a.requestInspect()
		}
	case *messages.ProbeResult:
		a.handleProbeResult(ctx, m)
	case *actor.Terminated:
		if a.probeStopping[m.Who.Id] {
			delete(a.probeStopping, m.Who.Id)
			a.syncProbes(ctx)
		}
	case *messages.Tick:
		a.handleResync(m)
	case *inspected:
		a.handleInspected(ctx, m)
	case *opDone:
		a.handleOpDone(m)
	case *wakeUp:
		if m.gen == a.gen && m.seq == a.wakeSeq {
			a.wakeAt = time.Time{}
			a.requestInspect()
		}
	}
}

func (a *Actor) handleStarted(ctx actor.Context) {
	a.sys, a.self, a.parent = ctx.ActorSystem(), ctx.Self(), ctx.Parent()
	a.gen = rand.Uint64()
	a.waits = map[string]waitInfo{}
	a.pulling = map[uint64]pendingStart{}
	a.probes, a.probeStopping, a.kills = map[string]*probeChild{}, map[string]bool{}, map[string]killReq{}
	a.results = a.loadCheckpoint()
	if p := ctx.Parent(); p != nil {
		ctx.Send(p, &messages.NeedPod{UID: a.uid})
		if a.d.Config.ThrottleStarts {
			// A slot an earlier incarnation held is given back; this one
			// asks again if it still has to start the pod.
			ctx.Send(p, &messages.StartDone{UID: a.uid})
		}
	}
	a.armResync()
	// No inspection yet: the parent's SyncPod or KillPod (sent with the
	// spawn, and again for NeedPod) starts the first one.
}

func (a *Actor) handleSyncPod(m *messages.SyncPod) {
	if m.Pod == nil || a.kill != nil {
		return
	}
	if a.pod == nil {
		a.started = a.d.Clock.Now()
	} else if apiequality.Semantic.DeepEqual(a.pod.Spec, m.Pod.Spec) && apiequality.Semantic.DeepEqual(a.pod.ObjectMeta, m.Pod.ObjectMeta) {
		return // the same pod again (the answer to NeedPod): nothing to look at
	}
	a.pod = m.Pod
	a.requestInspect()
}

// stale reports whether a runtime event says something this actor's view
// does not already show (its own operations are seen by its own
// inspections; the PLEG reports them again a moment later).
func (a *Actor) stale(ev *messages.PodLifecycleEvent) bool {
	if a.snap == nil {
		return true
	}
	var have *runtimeapi.ContainerStatus
	for _, cs := range a.snap.containers {
		for _, c := range cs {
			if c.Id == ev.ID {
				have = c
			}
		}
	}
	switch ev.Type {
	case messages.ContainerStarted:
		return have == nil || have.State != runtimeapi.ContainerState_CONTAINER_RUNNING
	case messages.ContainerDied:
		return have == nil || have.State != runtimeapi.ContainerState_CONTAINER_EXITED
	case messages.ContainerRemoved:
		return have != nil
	}
	return true
}

func (a *Actor) handleKillPod(m *messages.KillPod) {
	if a.kill == nil {
		a.log.Info("killing pod", "reason", m.Reason)
	}
	a.kill = m
	a.pulling = map[uint64]pendingStart{} // image results no longer matter
	a.releaseSlot()
	a.requestInspect()
}

func (a *Actor) handleResync(m *messages.Tick) {
	if m.Gen != a.gen {
		return
	}
	a.armResync()
	a.requestInspect()
}

// requestInspect starts an inspection unless a call is in flight, in which
// case one more inspection follows it.
func (a *Actor) requestInspect() {
	if a.done || a.self == nil {
		return
	}
	if a.inspecting || a.busy {
		a.dirty = true
		return
	}
	a.inspecting, a.dirty = true, false
	rt, uid, gen, sys, self, timeout, seq, prev := a.d.Runtime, a.uid, a.gen, a.sys, a.self, a.d.Config.OpTimeout, a.opSeq, a.snap
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		snap, sboxOf, err := inspect(ctx, rt, uid, prev)
		sys.Root.Send(self, &inspected{gen: gen, opSeq: seq, snap: snap, sandboxOf: sboxOf, err: err})
	}()
}

func (a *Actor) handleInspected(ctx actor.Context, m *inspected) {
	if m.gen != a.gen {
		return
	}
	a.inspecting = false
	if m.opSeq != a.opSeq || a.busy {
		// An operation started while the runtime was read: the view is
		// stale. Look again once the operation is done.
		if a.busy {
			a.dirty = true
		} else {
			a.requestInspect()
		}
		return
	}
	if m.err != nil {
		a.log.Warn("inspect pod", "err", m.err)
		a.failures++
		a.schedule(a.d.Clock.Now().Add(a.retryDelay()))
		return
	}
	a.snap, a.sboxOf = m.snap, m.sandboxOf
	if a.dirty {
		a.requestInspect()
		return
	}
	a.reconcile(ctx)
}

// reconcile publishes the status and takes the next step.
func (a *Actor) reconcile(ctx actor.Context) {
	now := a.d.Clock.Now()
	a.syncProbes(ctx)
	if a.kill != nil {
		if a.snap.empty() {
			if !a.done {
				a.done = true
				a.removeCheckpoint()
				if a.d.Volumes != nil {
					ctx.Send(a.d.Volumes, &messages.TearDownVolumes{UID: a.uid})
				}
				a.log.Info("pod terminated")
				ctx.Send(ctx.Parent(), &messages.PodTerminated{UID: a.uid})
			}
			return
		}
		if !now.Before(a.holdUntil) {
			a.run(action{kind: actStopContainers, reason: a.kill.Reason}, true)
		}
		return
	}
	if a.pod == nil {
		return // wait for the parent's SyncPod or KillPod
	}
	if len(a.pulling) > 0 || now.Before(a.holdUntil) {
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
		base: a.d.Config.BackoffBase, max: a.d.Config.BackoffMax}.plan()
	waits := p.waits
	for name, w := range waits {
		if w.reason == ReasonCrashLoopBackOff {
			a.event(v1.EventTypeWarning, "BackOff", name+"/"+w.message, "Back-off restarting failed container %s in pod %s_%s(%s)",
				name, a.pod.Name, a.pod.Namespace, a.pod.UID)
		}
	}
	for name, w := range a.waits {
		if _, ok := waits[name]; !ok {
			waits[name] = w
		}
	}
	a.publish(waits, now)
	if !p.wakeAt.IsZero() {
		a.schedule(p.wakeAt)
	}
	if p.act.kind == actNone {
		return
	}
	if p.act.kind == actRunSandbox && p.act.attempt == 0 && a.d.Config.ThrottleStarts && a.slot != slotHeld && a.slot != slotDone {
		if a.slot == slotNone {
			a.slot = slotAsked
			ctx.Send(ctx.Parent(), &messages.StartSlot{UID: a.uid})
		}
		return // StartGranted continues
	}
	if p.act.kind == actStartContainer && p.act.createdID == "" {
		if !a.volumesReady(ctx) {
			return // VolumesReady continues
		}
		a.ensureImage(ctx, p.act)
		return
	}
	a.run(p.act, false)
}

// volumesReady asks the VolumeActor for the pod's volumes once; containers
// are created only when they are set up.
func (a *Actor) volumesReady(ctx actor.Context) bool {
	if a.d.Volumes == nil || len(a.pod.Spec.Volumes) == 0 || a.volPaths != nil {
		return true
	}
	if !a.volAsked {
		a.volAsked = true
		ctx.Send(a.d.Volumes, &messages.EnsureVolumes{Pod: a.pod.DeepCopy(), ReplyTo: a.self})
	}
	return false
}

func (a *Actor) handleVolumesReady(m *messages.VolumesReady) {
	if !a.volAsked || a.kill != nil {
		return
	}
	a.volAsked = false
	if m.Reason != "" {
		a.event(v1.EventTypeWarning, m.Reason, "volumes", "Unable to attach or mount volumes: %s", m.Message)
		for _, c := range append(append([]v1.Container{}, a.pod.Spec.InitContainers...), a.pod.Spec.Containers...) {
			a.waits[c.Name] = waitInfo{reason: ReasonContainerCreating, message: m.Reason + ": " + m.Message}
		}
		a.hold(a.retryDelay())
		a.failures++
		a.requestInspect()
		return
	}
	for name, w := range a.waits {
		if w.reason == ReasonContainerCreating {
			delete(a.waits, name)
		}
	}
	a.volPaths = m.Paths
	a.requestInspect()
}

// event records an event about the pod, once per key and message.
func (a *Actor) event(eventtype, reason, key, format string, args ...any) {
	if a.d.Events == nil || a.pod == nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	k := reason + "/" + key
	if a.events[k] == msg {
		return
	}
	if a.events == nil {
		a.events = map[string]string{}
	}
	a.events[k] = msg
	a.d.Events.Eventf(a.pod, eventtype, reason, "%s", msg)
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

// checkDeadline applies activeDeadlineSeconds: past it the pod fails
// (DeadlineExceeded) and its containers are stopped; before it a wake-up is
// scheduled. It reports whether the deadline has just passed.
func (a *Actor) checkDeadline(now time.Time) bool {
	ads := a.pod.Spec.ActiveDeadlineSeconds
	if ads == nil || a.deadlineExceeded {
		return false
	}
	if a.status != nil && (a.status.Phase == v1.PodSucceeded || a.status.Phase == v1.PodFailed) {
		return false
	}
	deadline := a.startTime().Add(time.Duration(*ads) * time.Second)
	if now.Before(deadline) {
		a.schedule(deadline)
		return false
	}
	a.deadlineExceeded = true
	a.log.Info("pod exceeded its active deadline", "reason", ReasonDeadlineExceeded, "activeDeadlineSeconds", *ads)
	return true
}

func (a *Actor) statusWith(waits map[string]waitInfo, now time.Time) v1.PodStatus {
	start := a.startTime()
	return computeStatus(statusInput{
		pod: a.pod, snap: a.snap, waits: waits, runtimeName: a.d.Config.RuntimeName,
		hostIP: a.d.Config.HostIP, startTime: start, prev: a.status, now: now,
		probe: a.probeState, deadlineExceeded: a.deadlineExceeded,
	})
}

// publish sends the status to the StatusActor when it changed.
func (a *Actor) publish(waits map[string]waitInfo, now time.Time) {
	st := a.statusWith(waits, now)
	if a.status != nil && apiequality.Semantic.DeepEqual(*a.status, st) {
		return
	}
	if !a.seenRun && st.Phase == v1.PodRunning && allRunning(st) {
		a.seenRun = true
		if a.status != nil && a.d.Metrics != nil { // started by this incarnation
			a.d.Metrics.ObservePodStart(now.Sub(a.started))
		}
	}
	if a.slot == slotHeld && (anyStarted(st) || st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed || len(waits) > 0) {
		a.releaseSlot() // started, or waiting on something: the next pod may start
	}
	a.status = &st
	out := a.pod.DeepCopy()
	out.Status = *st.DeepCopy()
	a.sys.Root.Send(a.d.Status, &messages.PodStatusUpdate{Pod: out})
}

// releaseSlot gives a start slot back to the parent.
func (a *Actor) releaseSlot() {
	if a.slot == slotAsked || a.slot == slotHeld {
		a.slot = slotDone
		a.sys.Root.Send(a.parent, &messages.StartDone{UID: a.uid})
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

func (a *Actor) ensureImage(ctx actor.Context, act action) {
	a.nextReq++
	a.pulling[a.nextReq] = pendingStart{act: act}
	ctx.Send(a.d.Images, &messages.EnsureImage{
		RequestID: a.nextReq,
		Image:     act.container.Image,
		Policy:    act.container.ImagePullPolicy,
		ReplyTo:   a.self,
	})
}

func (a *Actor) handleImageResult(m *messages.ImageResult) {
	ps, ok := a.pulling[m.RequestID]
	if !ok {
		return
	}
	delete(a.pulling, m.RequestID)
	name := ps.act.container.Name
	if m.Reason != "" {
		a.waits[name] = waitInfo{reason: m.Reason, message: m.Message}
		a.log.Info("image not ready", "container", name, "image", m.Image, "reason", m.Reason, "message", m.Message)
		if m.Reason == messages.ReasonImagePullBackOff {
			a.event(v1.EventTypeNormal, "BackOff", name, "Back-off pulling image %q", m.Image)
		} else {
			a.event(v1.EventTypeWarning, "Failed", name, "%s", m.Message)
		}
		a.hold(a.d.Config.BackoffBase)
		a.requestInspect() // publishes the waiting reason
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
	act := ps.act
	act.imageRef = m.ImageRef
	if a.kill != nil {
		return
	}
	a.run(act, false)
}

// hold defers the next operation by d and wakes the actor then.
func (a *Actor) hold(d time.Duration) {
	a.holdUntil = a.d.Clock.Now().Add(d)
	a.schedule(a.holdUntil)
}

func (a *Actor) retryDelay() time.Duration {
	d := a.d.Config.RetryDelay
	for i := 0; i < a.failures && d < 30*time.Second; i++ {
		d *= 2
	}
	return d
}

// schedule arms the wake-up timer for t unless an earlier one is armed.
func (a *Actor) schedule(t time.Time) {
	if !a.wakeAt.IsZero() && !t.Before(a.wakeAt) {
		return
	}
	if a.wake != nil {
		a.wake.Stop()
	}
	a.wakeSeq++
	a.wakeAt = t
	sys, self, msg := a.sys, a.self, &wakeUp{gen: a.gen, seq: a.wakeSeq}
	d := t.Sub(a.d.Clock.Now())
	if d < 0 {
		d = 0
	}
	a.wake = a.d.Clock.AfterFunc(d, func() { sys.Root.Send(self, msg) })
}

func (a *Actor) armResync() {
	if a.resync != nil {
		a.resync.Stop()
	}
	sys, self, msg := a.sys, a.self, &messages.Tick{Gen: a.gen}
	a.resync = a.d.Clock.AfterFunc(a.d.Config.SyncPeriod, func() { sys.Root.Send(self, msg) })
}

func (a *Actor) stopTimers() {
	if a.wake != nil {
		a.wake.Stop()
	}
	if a.resync != nil {
		a.resync.Stop()
	}
}

func (a *Actor) handleOpDone(m *opDone) {
	if m.gen != a.gen {
		return
	}
	a.busy = false
	switch {
	case m.err == nil:
		a.failures = 0
		if m.kind == actStartContainer {
			delete(a.waits, m.name)
			a.event(v1.EventTypeNormal, "Created", m.name+"/"+strconv.FormatUint(a.opSeq, 10), "Created container %s", m.name)
			a.event(v1.EventTypeNormal, "Started", m.name+"/"+strconv.FormatUint(a.opSeq, 10), "Started container %s", m.name)
		}
		a.requestInspect()
	case errdefs.IsAlreadyExists(m.err):
		// Another incarnation's call holds the name: look again shortly and
		// adopt what it made.
		a.log.Info("runtime object exists, adopting", "op", m.kind.String(), "err", m.err)
		a.hold(a.d.Config.RetryDelay)
		a.requestInspect()
	default:
		a.failures++
		a.log.Warn("runtime operation failed", "op", m.kind.String(), "container", m.name, "err", m.err)
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
				a.failures = 0
				a.requestInspect()
				return
			}
			a.waits[m.name] = waitInfo{reason: reason, message: m.err.Error()}
			a.event(v1.EventTypeWarning, "Failed", m.name, "Error: %v", m.err)
		}
		a.hold(a.retryDelay())
		a.requestInspect()
	}
}
