package pod

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actorlet/actorlet/messages"
)

// An evicted pod's status, as upstream's eviction: while its containers
// stop, the status gains a DisruptionTarget condition (reason
// TerminationByKubelet, the eviction's message), its phase unchanged (the
// upstream status manager never makes a pod terminal while containers may
// run); once nothing of it runs, it is Failed with Reason "Evicted" and
// the message, and each container not terminated before is terminated
// with ContainerStatusUnknown (the runtime removed it), as upstream
// reports a container it cannot find in a terminal pod.

// ReasonContainerStatusUnknown is a container's terminated reason when
// the pod ended without its exit being seen, as upstream.
const ReasonContainerStatusUnknown = "ContainerStatusUnknown"

// containerGoneMessage and containerGoneExitCode are upstream's.
const (
	containerGoneMessage  = "The container could not be located when the pod was terminated"
	containerGoneExitCode = 137
)

// evictedKill keeps an eviction when a later kill (a deletion from the
// API server) replaces it: the pod still ends Evicted.
func evictedKill(prev, next *messages.KillPod) *messages.KillPod {
	if prev == nil || !prev.Evicted || next.Evicted {
		return next
	}
	out := *next
	out.Evicted, out.Message = true, prev.Message
	return &out
}

// evictedStatus is st (computed from the runtime) as an evicted pod's:
// with the DisruptionTarget condition; when gone (nothing runs any more),
// Failed/Evicted with the containers terminated. prev is the status
// published last: a pod gone has no containers to compute statuses from,
// its last known ones are kept.
func evictedStatus(st v1.PodStatus, kill *messages.KillPod, gone bool, prev *v1.PodStatus, now time.Time) v1.PodStatus {
	if gone {
		if prev != nil {
			st.InitContainerStatuses = prev.DeepCopy().InitContainerStatuses
			st.ContainerStatuses = prev.DeepCopy().ContainerStatuses
			st.PodIP, st.PodIPs = prev.PodIP, prev.PodIPs
			if prev.StartTime != nil {
				st.StartTime = prev.StartTime.DeepCopy()
			}
		}
		for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
			for i := range list {
				endContainer(&list[i])
			}
		}
		st.Phase = v1.PodFailed
		st.Reason = messages.ReasonEvicted
		st.Message = kill.Message
		conds := st.Conditions[:0:0]
		for _, c := range st.Conditions {
			switch c.Type {
			case v1.PodReady, v1.ContainersReady:
				c.Status, c.Reason, c.Message = v1.ConditionFalse, ReasonPodCompleted, ""
			case v1.PodReadyToStartContainers:
				c.Status, c.Reason, c.Message = v1.ConditionFalse, "", ""
			}
			conds = append(conds, c)
		}
		st.Conditions = conds
	}
	st.Conditions = append(st.Conditions, v1.PodCondition{
		Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
		Reason: v1.PodReasonTerminationByKubelet, Message: kill.Message,
	})
	st.Conditions = keepTransitionTimes(st.Conditions, prev, now)
	return st
}

// endContainer marks a container that was not seen terminated as ended
// with ContainerStatusUnknown.
func endContainer(cs *v1.ContainerStatus) {
	cs.Ready = false
	started := false
	cs.Started = &started
	if cs.State.Terminated != nil {
		return
	}
	startedAt := metav1.Time{}
	if cs.State.Running != nil {
		startedAt = cs.State.Running.StartedAt
	}
	cs.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		ExitCode: containerGoneExitCode, Reason: ReasonContainerStatusUnknown, Message: containerGoneMessage,
		StartedAt: startedAt, ContainerID: cs.ContainerID,
	}}
}
