package node

import (
	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actorlet/actorlet/messages"
)

// Eviction, the NodeActor's part (the EvictionActor decides):
//
//   - EvictPod kills the pod with the given grace period as an eviction
//     (KillPod.Evicted): its PodActor publishes it Failed/Evicted once
//     nothing of it runs. The pod is then kept as a refused pod is (it
//     stays Failed and is never run again while its source wants it; a
//     restarted StatusActor gets its final status again), until its
//     source drops it or the API server deletes it.
//   - Admission under pressure, as upstream's eviction admit handler:
//     under MemoryPressure alone, BestEffort pods are refused (unless they
//     tolerate the memory-pressure taint); under DiskPressure or
//     PIDPressure every pod is; critical pods (static, mirror, priority
//     2000000000 and above) are always admitted. The reason is "Evicted",
//     the message "The node had condition: [MemoryPressure]. ".

// startPressure asks the EvictionActor for the node's pressure (a
// restarted NodeActor is not told again otherwise).
func (a *Actor) startPressure(ctx actor.Context) {
	if a.cfg.Eviction != nil {
		ctx.Send(a.cfg.Eviction, &messages.GetNodePressure{ReplyTo: ctx.Self()})
	}
}

func (a *Actor) handleNodePressure(m *messages.NodePressure) {
	if a.node.setPressure(m) {
		a.cfg.log.Info("node pressure changed: admission follows", "memory", m.Memory, "disk", m.Disk, "pid", m.PID)
	}
}

// handleEvictPod kills a pod for the EvictionActor.
func (a *Actor) handleEvictPod(ctx actor.Context, m *messages.EvictPod) {
	e, ok := a.table.get(m.UID)
	if !ok || e.pod == nil || e.stopping {
		a.cfg.log.Info("eviction of a pod not running here: ignored", "uid", m.UID)
		return
	}
	if e.killing != nil {
		if !e.killing.Evicted {
			a.cfg.log.Info("eviction of a pod already being killed: ignored", "pod", e.pod.Namespace+"/"+e.pod.Name, "reason", e.killing.Reason)
		}
		return
	}
	a.cfg.log.Warn("evicting pod", "pod", e.pod.Namespace+"/"+e.pod.Name, "signal", m.Signal, "message", m.Message)
	a.track(e, -1)
	a.releaseSlot(ctx, m.UID)
	e.killing = &messages.KillPod{UID: m.UID, GracePeriod: m.GracePeriod, Reason: "evicted (" + m.Signal + ")",
		Evicted: true, Message: m.Message}
	e.respawn, e.respawnSource = nil, ""
	a.sendKill(ctx, m.UID, e)
}

// keepEvicted keeps an evicted pod that ended as refused pods are kept
// (Failed, republished on Resync, never run again) while its source still
// wants it; false when it is to be forgotten as usual.
func (a *Actor) keepEvicted(ctx actor.Context, e *entry, m *messages.PodTerminated) bool {
	if e.killing == nil || !e.killing.Evicted || e.deleting || e.pod == nil {
		return false
	}
	if _, wanted := a.sources.wants(e.source, m.UID); !wanted {
		return false
	}
	out := e.pod.DeepCopy()
	if m.Status != nil {
		out.Status = *m.Status.DeepCopy()
	} else {
		// The PodActor could not say (it had no pod): built here.
		out.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: messages.ReasonEvicted, Message: e.killing.Message,
			Conditions: []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
				Reason: v1.PodReasonTerminationByKubelet, Message: e.killing.Message,
				LastTransitionTime: metav1.NewTime(a.cfg.Clock.Now())}}}
		ctx.Send(a.cfg.status, &messages.PodStatusUpdate{Pod: out.DeepCopy()})
	}
	a.table.refuse(out, e.source)
	return true
}

// evictedSyncFirst: a restarted PodActor of an evicted pod gets its pod
// before the kill, to publish the evicted status of it.
func (a *Actor) evictedSyncFirst(ctx actor.Context, e *entry) {
	if e.killing != nil && e.killing.Evicted && e.pod != nil {
		ctx.Send(e.pid, &messages.SyncPod{Pod: e.pod})
	}
}

// keepEviction carries an eviction over to a kill that replaces it (a
// deletion from the API server): the pod still ends Evicted.
func keepEviction(prev, next *messages.KillPod) {
	if prev != nil && prev.Evicted && !next.Evicted {
		next.Evicted, next.Message = true, prev.Message
	}
}

// toleratesMemoryPressure: the pod tolerates the
// node.kubernetes.io/memory-pressure:NoSchedule taint.
func toleratesMemoryPressure(p *v1.Pod) bool {
	for _, t := range p.Spec.Tolerations {
		if t.Effect != "" && t.Effect != v1.TaintEffectNoSchedule {
			continue
		}
		switch {
		case t.Key == "" && t.Operator == v1.TolerationOpExists:
			return true
		case t.Key == v1.TaintNodeMemoryPressure && t.Operator == v1.TolerationOpExists:
			return true
		case t.Key == v1.TaintNodeMemoryPressure && (t.Operator == v1.TolerationOpEqual || t.Operator == "") && t.Value == "":
			return true
		}
	}
	return false
}
