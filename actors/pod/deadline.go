package pod

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// deadline is the pod's activeDeadlineSeconds: past it the pod fails
// (DeadlineExceeded) and its containers are stopped.
type deadline struct {
	exceeded bool
}

// check returns whether the deadline has just passed, else when it will
// (zero when there is none to wait for).
func (d *deadline) check(pod *v1.Pod, phase v1.PodPhase, start, now time.Time) (passed bool, at time.Time) {
	ads := pod.Spec.ActiveDeadlineSeconds
	if ads == nil || d.exceeded || phase == v1.PodSucceeded || phase == v1.PodFailed {
		return false, time.Time{}
	}
	at = start.Add(time.Duration(*ads) * time.Second)
	if now.Before(at) {
		return false, at
	}
	d.exceeded = true
	return true, time.Time{}
}
