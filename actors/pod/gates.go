package pod

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// ReasonReadinessGatesNotReady is the reason of a Ready condition held
// False by a readiness gate, as upstream.
const ReasonReadinessGatesNotReady = "ReadinessGatesNotReady"

// gatedReady is the pod's Ready condition once its readiness gates are
// counted, as upstream's GeneratePodReadyCondition: a Ready condition that
// is not True stays as it is; else every gate's condition (in the pod's
// status as the API server holds it, set by someone else) must be True.
func gatedReady(pod *v1.Pod, ready v1.PodCondition) v1.PodCondition {
	if ready.Status != v1.ConditionTrue || pod == nil {
		return ready
	}
	var unready []string
	for _, g := range pod.Spec.ReadinessGates {
		var found *v1.PodCondition
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == g.ConditionType {
				found = &pod.Status.Conditions[i]
				break
			}
		}
		switch {
		case found == nil:
			unready = append(unready, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType)))
		case found.Status != v1.ConditionTrue:
			unready = append(unready, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(g.ConditionType), found.Status))
		}
	}
	if len(unready) == 0 {
		return ready
	}
	return cond(v1.PodReady, false, ReasonReadinessGatesNotReady, strings.Join(unready, ", "))
}
