package httpapi

import (
	"net/http"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/actorlet/actorlet/adapters/stats"
)

// handleStatsSummary serves GET /stats/summary: upstream's Summary API
// (k8s.io/kubelet/pkg/apis/stats/v1alpha1) as JSON. With
// ?only_cpu_and_memory=true only CPU, memory and swap are kept, as
// upstream (metrics-server's older scrape).
func (s *Server) handleStatsSummary(w http.ResponseWriter, r *http.Request) {
	sum, err := s.cfg.StatsSummary(r.Context())
	if err != nil {
		s.log.Warn("stats summary failed", "err", err)
		httpError(w, http.StatusInternalServerError, "Internal Error: failed to get summary stats: %v", err)
		return
	}
	if sum == nil {
		httpError(w, http.StatusInternalServerError, "Internal Error: failed to get summary stats: no summary")
		return
	}
	if r.URL.Query().Get("only_cpu_and_memory") == "true" {
		sum = cpuAndMemory(sum)
	}
	writeJSON(w, http.StatusOK, sum)
}

// resourceMetrics serves GET /metrics/resource from a Summary per scrape.
func (s *Server) resourceMetrics() http.Handler {
	return stats.ResourceMetricsHandler(s.cfg.StatsSummary, s.log)
}

// cpuAndMemory keeps what upstream's GetCPUAndMemoryStats gives: names,
// start times, CPU, memory and swap of the node, its system containers,
// the pods and their containers.
func cpuAndMemory(in *statsapi.Summary) *statsapi.Summary {
	ctr := func(cs []statsapi.ContainerStats) []statsapi.ContainerStats {
		if cs == nil {
			return nil
		}
		out := make([]statsapi.ContainerStats, len(cs))
		for i, c := range cs {
			out[i] = statsapi.ContainerStats{Name: c.Name, StartTime: c.StartTime, CPU: c.CPU, Memory: c.Memory, Swap: c.Swap}
		}
		return out
	}
	n := in.Node
	out := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: n.NodeName, StartTime: n.StartTime,
		SystemContainers: ctr(n.SystemContainers), CPU: n.CPU, Memory: n.Memory, Swap: n.Swap}}
	out.Pods = make([]statsapi.PodStats, len(in.Pods))
	for i, p := range in.Pods {
		out.Pods[i] = statsapi.PodStats{PodRef: p.PodRef, StartTime: p.StartTime, Containers: ctr(p.Containers),
			CPU: p.CPU, Memory: p.Memory, Swap: p.Swap}
	}
	return out
}
