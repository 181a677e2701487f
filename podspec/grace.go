package podspec

import v1 "k8s.io/api/core/v1"

const (
	// DefaultTerminationGracePeriodSeconds is the grace period of a pod
	// that sets none, as upstream.
	DefaultTerminationGracePeriodSeconds = int64(30)
	// MinimumGracePeriodSeconds is the least grace period a container is
	// stopped with, as upstream.
	MinimumGracePeriodSeconds = int64(2)
)

// GracePeriod is the termination grace period in seconds: the override if
// given, else the pod's (pod may be nil), else 30; raised to 2 s at least,
// as upstream does when it stops a container.
func GracePeriod(pod *v1.Pod, override *int64) int64 {
	g := DefaultTerminationGracePeriodSeconds
	if pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil {
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	if override != nil {
		g = *override
	}
	if g < MinimumGracePeriodSeconds {
		g = MinimumGracePeriodSeconds
	}
	return g
}
