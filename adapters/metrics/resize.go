package metrics

import "github.com/prometheus/client_golang/prometheus"

// Resize results counted by IncPodResize.
const (
	ResizeAllocated  = "allocated"  // the NodeActor allocated a resize
	ResizeDeferred   = "deferred"   // it did not fit beside the other pods
	ResizeInfeasible = "infeasible" // it can never be done on this node
	ResizeCompleted  = "completed"  // the PodActor applied it
	ResizeError      = "error"      // applying it failed (runtime, cgroup, memory usage)
)

func newPodResizes() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: prometheus.BuildFQName(actorletNamespace, "", "pod_resizes_total"),
		Help: "In-place pod resizes, by result: allocated, deferred, infeasible, completed, error."}, []string{"result"})
}

// IncPodResize counts a resize decided or applied (actors/node and
// actors/pod ResizeMetrics).
func (r *Registry) IncPodResize(result string) { r.podResizes.WithLabelValues(result).Inc() }
