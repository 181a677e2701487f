package pod

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/messages"
)

const evictMsg = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "

func podCondition(st *v1.PodStatus, t v1.PodConditionType) *v1.PodCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

func TestEvictedPodEndsFailedEvicted(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	grace := int64(30)
	p.Spec.TerminationGracePeriodSeconds = &grace
	h := newHarness(t, p)
	h.waitStatus("Running", running)
	zero := int64(0)
	h.send(&messages.KillPod{UID: p.UID, GracePeriod: &zero, Reason: "evicted", Evicted: true, Message: evictMsg})
	h.waitFor("terminated", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.terminated
	})
	st := h.latest()
	if st.Phase != v1.PodFailed || st.Reason != messages.ReasonEvicted || st.Message != evictMsg {
		t.Fatalf("final status %s/%s %q, want Failed/Evicted with the eviction's message", st.Phase, st.Reason, st.Message)
	}
	dt := podCondition(st, v1.DisruptionTarget)
	if dt == nil || dt.Status != v1.ConditionTrue || dt.Reason != v1.PodReasonTerminationByKubelet || dt.Message != evictMsg {
		t.Errorf("DisruptionTarget %+v, want True/TerminationByKubelet with the message", dt)
	}
	if r := podCondition(st, v1.PodReady); r == nil || r.Status != v1.ConditionFalse || r.Reason != ReasonPodCompleted {
		t.Errorf("Ready %+v, want False/PodCompleted", r)
	}
	cs := st.ContainerStatuses[0]
	if term := cs.State.Terminated; term == nil || term.ExitCode != 137 || term.Reason != ReasonContainerStatusUnknown || cs.Ready {
		t.Errorf("container status %+v, want terminated 137 ContainerStatusUnknown, not ready", cs)
	}
	if cs.ContainerID == "" || cs.State.Terminated.StartedAt.IsZero() || st.StartTime == nil {
		t.Errorf("container status %+v (pod start %v) lost its ID or start", cs, st.StartTime)
	}
	// While it stopped, the pod kept its phase and gained the condition.
	var during bool
	h.mu.Lock()
	for i := range h.statuses {
		if s := &h.statuses[i]; s.Phase == v1.PodRunning && podCondition(s, v1.DisruptionTarget) != nil {
			during = true
		}
	}
	h.mu.Unlock()
	if !during {
		t.Error("no status with the DisruptionTarget condition while the containers stopped")
	}
	if stops := h.rt.Stops(); len(stops) == 0 || stops[0].Timeout != 2 {
		t.Errorf("stops %+v, want the least grace period (2 s) for a hard eviction", stops)
	}
	if n := h.rt.Count("CreateContainer"); n != 1 || len(h.rt.Containers()) != 0 {
		t.Errorf("%d creates, %d containers left: an evicted pod is not run again", n, len(h.rt.Containers()))
	}
}

func TestEvictionSurvivesALaterKill(t *testing.T) {
	ev := &messages.KillPod{UID: "u", Evicted: true, Message: evictMsg}
	del := &messages.KillPod{UID: "u", Reason: "deleted from the API server"}
	got := evictedKill(ev, del)
	if !got.Evicted || got.Message != evictMsg || got.Reason != del.Reason {
		t.Errorf("kill after an eviction = %+v, want the deletion's, still evicted", got)
	}
	if got := evictedKill(nil, del); got != del {
		t.Errorf("no eviction before: %+v, want the kill as is", got)
	}
}

func TestEvictedStatusOfAPodThatNeverRan(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	st := computeStatus(statusInput{pod: p, snap: &snapshot{}})
	got := evictedStatus(st, &messages.KillPod{Evicted: true, Message: evictMsg}, true, nil, time.Unix(1000, 0))
	if got.Phase != v1.PodFailed || got.Reason != messages.ReasonEvicted {
		t.Fatalf("phase %s reason %s, want Failed/Evicted", got.Phase, got.Reason)
	}
	if term := got.ContainerStatuses[0].State.Terminated; term == nil || term.Reason != ReasonContainerStatusUnknown {
		t.Errorf("container %+v, want terminated ContainerStatusUnknown", got.ContainerStatuses[0])
	}
}
