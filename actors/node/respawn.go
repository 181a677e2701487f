package node

import (
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// A PodActor that fails more often than its supervisor allows is stopped
// by the supervisor (supervisors.StrategyConfig.Contained), never
// escalated: the failure stays inside its pod. The NodeActor sees it
// terminate without having asked, reports the pod (an event, and a status
// whose Ready condition is False with reason ReasonPodWorkerFailed) and
// spawns it again after a long back-off; the new PodActor adopts what runs,
// as after any restart. Meanwhile the pod's containers keep running,
// unmanaged. A kill that becomes pending meanwhile (the pod removed from
// its source, or deleted from the API server) spawns it at once, to kill.

// Respawn defaults.
const (
	// DefaultRespawnBackoff is the first delay before a PodActor stopped
	// for failing too often is spawned again; it doubles up to
	// DefaultRespawnBackoffMax.
	DefaultRespawnBackoff    = time.Minute
	DefaultRespawnBackoffMax = 5 * time.Minute
	// ReasonPodWorkerFailed is the event reason, the pod's status reason
	// and its Ready condition's reason while its PodActor is down.
	ReasonPodWorkerFailed = "PodWorkerFailed"
	// statusAskTimeout bounds the question to the StatusActor for the
	// pod's last status.
	statusAskTimeout = 10 * time.Second
)

// Recorder records events (client-go's record.EventRecorder satisfies it).
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// eventForgetter is a Recorder that keeps what it knows per object, to be
// told when a pod is gone (node.go, stopped).
type eventForgetter interface {
	Forget(uid types.UID)
}

// worker is what the NodeActor knows of an entry's PodActor beyond its PID:
// whether it is down (stopped by its supervisor) and the back-off.
type worker struct {
	// down: the PodActor was stopped by its supervisor; respawn fires
	// when it is spawned again.
	down    bool
	respawn actorkit.Timer
	// reported is the status published for the pod while it is down
	// (republished on Resync); nil until the StatusActor answered. msg
	// says what happened.
	reported *v1.Pod
	msg      string
	// stops in a row (the back-off's exponent) and when the PodActor was
	// last respawned: one that lived 2x the cap since starts over.
	stops     int
	respawned time.Time
	// seq tells the answers about one stop apart from a later one's.
	seq uint64
}

const respawnTimerPrefix = "respawn/"

// handleChildTerminated handles the end of a child. A PodActor the
// NodeActor stopped itself (stopping) or one of an incarnation replaced
// since is nothing new; one that ended unasked was stopped by its
// supervisor for failing too often.
func (a *Actor) handleChildTerminated(ctx actor.Context, who *actor.PID) {
	if a.closing || who == nil {
		return // the NodeActor itself stops or restarts: its children go with it
	}
	name := who.Id[strings.LastIndexByte(who.Id, '/')+1:]
	uid, ok := strings.CutPrefix(name, "pod-")
	if !ok {
		return
	}
	e, _ := a.table.get(types.UID(uid))
	// The same PID pointer: an incarnation spawned since has another one.
	if e == nil || e.pid != who || e.w.down {
		return
	}
	if e.stopping {
		a.stopped(ctx, types.UID(uid), e) // handleTerminated stopped it
		return
	}
	a.workerDown(ctx, types.UID(uid), e)
}

// workerDown reports the pod whose PodActor was stopped and arms its
// respawn.
func (a *Actor) workerDown(ctx actor.Context, uid types.UID, e *entry) {
	now := a.cfg.Clock.Now()
	maxDelay := a.cfg.RespawnBackoffMax
	if !e.w.respawned.IsZero() && now.Sub(e.w.respawned) >= 2*maxDelay {
		e.w.stops = 0 // it ran long enough: a new series
	}
	e.w.stops++
	e.w.seq++
	delay := actorkit.Backoff{Base: a.cfg.RespawnBackoff, Cap: maxDelay}.Delay(e.w.stops)
	e.w.down, e.w.reported = true, nil
	e.w.respawn = actorkit.NewTimer(respawnTimerPrefix + string(uid))
	a.releaseSlot(ctx, uid)
	if e.killing != nil {
		// Being killed (or a kill became pending while it died): the kill
		// goes on after the back-off.
		a.cfg.log.Warn("pod actor failed too often and was stopped while killing its pod; it kills it again after a back-off",
			"uid", uid, "stops", e.w.stops, "respawn_in", delay)
	}
	e.w.respawn.Arm(a.self, delay)
	if e.pod == nil || e.killing != nil {
		return
	}
	msg := fmt.Sprintf("The pod's worker (its actor) failed too often and was stopped (%d in a row); "+
		"the pod's containers keep running unmanaged and the worker is started again in %s", e.w.stops, delay)
	e.w.msg = msg
	a.cfg.log.Warn("pod actor failed too often and was stopped; spawning it again after a back-off",
		"pod", e.pod.Namespace+"/"+e.pod.Name, "uid", uid, "stops", e.w.stops, "respawn_in", delay)
	if a.cfg.Events != nil {
		a.cfg.Events.Eventf(e.pod, v1.EventTypeWarning, ReasonPodWorkerFailed, "%s", msg)
	}
	// The pod's last status is the StatusActor's; it is published again
	// with the failure, and kept for Resync (no PodActor answers one).
	seq := e.w.seq
	f := ctx.RequestFuture(a.cfg.status, &messages.GetPod{Namespace: e.pod.Namespace, Name: e.pod.Name}, statusAskTimeout)
	ctx.ReenterAfter(f, func(res any, err error) {
		if cur, _ := a.table.get(uid); a.closing || cur != e || !e.w.down || e.w.seq != seq || e.pod == nil || e.killing != nil {
			return
		}
		var last *v1.Pod
		known := false
		if found, ok := res.(*messages.PodFound); ok && err == nil {
			known = true
			if found.Pod != nil && found.Pod.UID == uid {
				last = found.Pod
			}
		}
		e.w.reported = workerFailedStatus(e.pod, last, known, msg, metav1.NewTime(a.cfg.Clock.Now()))
		ctx.Send(a.cfg.status, &messages.PodStatusUpdate{Pod: e.w.reported.DeepCopy()})
	})
}

// workerFailedStatus is the pod with its last status (last; nil when the
// StatusActor has none) marked as not managed: Ready False with
// ReasonPodWorkerFailed, the reason and message on the pod's status too.
// A pod never published is Pending; one whose status could not be read
// (known false) is Unknown.
func workerFailedStatus(pod, last *v1.Pod, known bool, msg string, now metav1.Time) *v1.Pod {
	out := pod.DeepCopy()
	switch {
	case last != nil:
		out.Status = *last.Status.DeepCopy()
	case known:
		out.Status = v1.PodStatus{Phase: v1.PodPending}
	default:
		out.Status = v1.PodStatus{Phase: v1.PodUnknown}
	}
	if out.Status.Phase == v1.PodSucceeded || out.Status.Phase == v1.PodFailed {
		return out // finished: nothing runs that would be unmanaged
	}
	out.Status.Reason, out.Status.Message = ReasonPodWorkerFailed, msg
	ready := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: ReasonPodWorkerFailed, Message: msg, LastTransitionTime: now}
	for i, c := range out.Status.Conditions {
		if c.Type == v1.PodReady {
			if c.Status == v1.ConditionFalse {
				ready.LastTransitionTime = c.LastTransitionTime
			}
			out.Status.Conditions[i] = ready
			return out
		}
	}
	out.Status.Conditions = append(out.Status.Conditions, ready)
	return out
}

// handleRespawnFired spawns a PodActor whose back-off ended; false when m
// is no respawn timer's.
func (a *Actor) handleRespawnFired(ctx actor.Context, m *actorkit.Fired) bool {
	uid, ok := strings.CutPrefix(m.Name, respawnTimerPrefix)
	if !ok {
		return false
	}
	if e, _ := a.table.get(types.UID(uid)); e != nil && e.w.down && e.w.respawn.Fired(a.self, m) {
		a.respawnWorker(ctx, types.UID(uid), e)
	}
	return true
}

// respawnWorker spawns the PodActor of a down entry again, with the kill
// pending or else the newest pod; it adopts what runs.
func (a *Actor) respawnWorker(ctx actor.Context, uid types.UID, e *entry) {
	e.w.respawn.Stop()
	pid, err := ctx.SpawnNamed(a.cfg.podProps(uid), "pod-"+string(uid))
	if err != nil {
		// The name is free once Terminated arrived; logged loudly if not.
		a.cfg.log.Error("respawn pod actor", "uid", uid, "err", err)
		e.w.respawn.Arm(a.self, a.cfg.RespawnBackoff)
		return
	}
	a.cfg.log.Info("pod actor spawned again after its back-off", "uid", uid, "killing", e.killing != nil)
	e.pid, e.w.down, e.w.reported, e.w.respawned = pid, false, nil, a.cfg.Clock.Now()
	if e.killing != nil {
		a.evictedSyncFirst(ctx, e)
		ctx.Send(pid, e.killing)
		return
	}
	ctx.Send(pid, &messages.SyncPod{Pod: e.pod})
}

// sendKill tells e's PodActor to kill its pod; a PodActor that is down is
// spawned at once to do it (a pod removed or deleted is not left running
// until the back-off ends).
func (a *Actor) sendKill(ctx actor.Context, uid types.UID, e *entry) {
	if e.w.down {
		a.respawnWorker(ctx, uid, e)
		return
	}
	ctx.Send(e.pid, e.killing)
}

// resyncDown republishes the status of a pod whose PodActor is down (a
// restarted StatusActor asks for every pod); true when e is down.
func (a *Actor) resyncDown(ctx actor.Context, e *entry) bool {
	if !e.w.down {
		return false
	}
	if e.pod == nil || e.killing != nil {
		return true // nothing to report (the StatusActor does not wait for it)
	}
	p := e.w.reported
	if p == nil {
		// Asked before the last status was read: unknown, not guessed.
		p = workerFailedStatus(e.pod, nil, false, e.w.msg, metav1.NewTime(a.cfg.Clock.Now()))
	}
	ctx.Send(a.cfg.status, &messages.PodStatusUpdate{Pod: p.DeepCopy()})
	return true
}
