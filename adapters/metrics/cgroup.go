package metrics

import "github.com/prometheus/client_golang/prometheus"

// newCgroupErrors is actorlet_cgroup_errors_total: cgroup operations of
// the CgroupActor that failed (a write the kernel refused, a cgroup
// missing), by operation (ensure, resize, read, remove, sweep, qos, node).
func newCgroupErrors() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: prometheus.BuildFQName(actorletNamespace, "", "cgroup_errors_total"),
		Help: "Cgroup operations that failed (a write the kernel refused, a cgroup missing), by operation.",
	}, []string{"operation"})
}

// IncCgroupError counts a failed cgroup operation.
func (r *Registry) IncCgroupError(op string) { r.cgroupErrors.WithLabelValues(op).Inc() }
