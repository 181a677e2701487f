package stats

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// SummaryFunc returns a Summary: (*Provider).Summary.
type SummaryFunc func(ctx context.Context) (*statsapi.Summary, error)

// Upstream's resource metrics (pkg/kubelet/metrics/collectors/
// resource_metrics.go): names, labels, and help with the stability level
// prefix component-base writes. The deprecated scrape_error (hidden since
// 1.31) is left out, as upstream v1.36 serves it.
var (
	containerLabels = []string{"container", "pod", "namespace"}
	podLabels       = []string{"pod", "namespace"}

	nodeCPUUsageDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	nodeMemoryUsageDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"[STABLE] Current working set of the node in bytes", nil, nil)
	nodeSwapUsageDesc = prometheus.NewDesc("node_swap_usage_bytes",
		"[ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems", nil, nil)
	containerCPUUsageDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the container in core-seconds", containerLabels, nil)
	containerMemoryUsageDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"[STABLE] Current working set of the container in bytes", containerLabels, nil)
	containerSwapUsageDesc = prometheus.NewDesc("container_swap_usage_bytes",
		"[ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems", containerLabels, nil)
	containerSwapLimitDesc = prometheus.NewDesc("container_swap_limit_bytes",
		"[ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems", containerLabels, nil)
	containerStartTimeDesc = prometheus.NewDesc("container_start_time_seconds",
		"[STABLE] Start time of the container since unix epoch in seconds", containerLabels, nil)
	podCPUUsageDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the pod in core-seconds", podLabels, nil)
	podMemoryUsageDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"[STABLE] Current working set of the pod in bytes", podLabels, nil)
	podSwapUsageDesc = prometheus.NewDesc("pod_swap_usage_bytes",
		"[ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems", podLabels, nil)
	resourceScrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// scrapeTimeout bounds the Summary of a collector registered in a
// long-lived registry (its Collect has no request context).
const scrapeTimeout = 30 * time.Second

// NewResourceCollector returns a collector of upstream's resource metrics,
// asking summary for a Summary at every collection (bounded by 30 s). For
// serving /metrics/resource, ResourceMetricsHandler passes the request's
// context instead.
func NewResourceCollector(summary SummaryFunc) prometheus.Collector {
	return &resourceCollector{summary: summary}
}

type resourceCollector struct {
	summary SummaryFunc
	ctx     context.Context // the scrape's; nil: a bounded background one
	log     *slog.Logger
}

// Describe sends every descriptor.
func (c *resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUUsageDesc, nodeMemoryUsageDesc, nodeSwapUsageDesc,
		containerStartTimeDesc, containerCPUUsageDesc, containerMemoryUsageDesc, containerSwapUsageDesc,
		containerSwapLimitDesc, podCPUUsageDesc, podMemoryUsageDesc, podSwapUsageDesc, resourceScrapeErrorDesc} {
		ch <- d
	}
}

// Collect sends the metrics of one Summary: only what is known, each
// sample with the time it was measured, and resource_scrape_error.
func (c *resourceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx := c.ctx
	if ctx == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), scrapeTimeout)
		defer cancel()
	}
	s, err := c.summary(ctx)
	if err != nil || s == nil {
		if c.log != nil {
			c.log.Warn("resource metrics: no summary", "err", err)
		}
		ch <- prometheus.MustNewConstMetric(resourceScrapeErrorDesc, prometheus.GaugeValue, 1)
		return
	}
	collectSummary(ch, s)
	ch <- prometheus.MustNewConstMetric(resourceScrapeErrorDesc, prometheus.GaugeValue, 0)
}

// at stamps m with t (unstamped when t is unknown).
func at(t time.Time, m prometheus.Metric) prometheus.Metric {
	if t.IsZero() {
		return m
	}
	return prometheus.NewMetricWithTimestamp(t, m)
}

func seconds(ns uint64) float64 { return float64(ns) / float64(time.Second) }

func collectSummary(ch chan<- prometheus.Metric, s *statsapi.Summary) {
	n := s.Node
	if n.CPU != nil && n.CPU.UsageCoreNanoSeconds != nil {
		ch <- at(n.CPU.Time.Time, prometheus.MustNewConstMetric(nodeCPUUsageDesc, prometheus.CounterValue, seconds(*n.CPU.UsageCoreNanoSeconds)))
	}
	if n.Memory != nil && n.Memory.WorkingSetBytes != nil {
		ch <- at(n.Memory.Time.Time, prometheus.MustNewConstMetric(nodeMemoryUsageDesc, prometheus.GaugeValue, float64(*n.Memory.WorkingSetBytes)))
	}
	if n.Swap != nil && n.Swap.SwapUsageBytes != nil {
		ch <- at(n.Swap.Time.Time, prometheus.MustNewConstMetric(nodeSwapUsageDesc, prometheus.GaugeValue, float64(*n.Swap.SwapUsageBytes)))
	}
	for i := range s.Pods {
		pod := &s.Pods[i]
		name, ns := pod.PodRef.Name, pod.PodRef.Namespace
		for j := range pod.Containers {
			c := &pod.Containers[j]
			if c.StartTime.Unix() > 0 {
				ch <- prometheus.MustNewConstMetric(containerStartTimeDesc, prometheus.GaugeValue,
					float64(c.StartTime.UnixNano())/float64(time.Second), c.Name, name, ns)
			}
			if c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil {
				ch <- at(c.CPU.Time.Time, prometheus.MustNewConstMetric(containerCPUUsageDesc, prometheus.CounterValue,
					seconds(*c.CPU.UsageCoreNanoSeconds), c.Name, name, ns))
			}
			if c.Memory != nil && c.Memory.WorkingSetBytes != nil {
				ch <- at(c.Memory.Time.Time, prometheus.MustNewConstMetric(containerMemoryUsageDesc, prometheus.GaugeValue,
					float64(*c.Memory.WorkingSetBytes), c.Name, name, ns))
			}
			if sw := c.Swap; sw != nil {
				if sw.SwapUsageBytes != nil {
					ch <- at(sw.Time.Time, prometheus.MustNewConstMetric(containerSwapUsageDesc, prometheus.GaugeValue,
						float64(*sw.SwapUsageBytes), c.Name, name, ns))
				}
				if sw.SwapAvailableBytes != nil {
					var used uint64
					if sw.SwapUsageBytes != nil {
						used = *sw.SwapUsageBytes
					}
					ch <- at(sw.Time.Time, prometheus.MustNewConstMetric(containerSwapLimitDesc, prometheus.GaugeValue,
						float64(*sw.SwapAvailableBytes+used), c.Name, name, ns))
				}
			}
		}
		if pod.CPU != nil && pod.CPU.UsageCoreNanoSeconds != nil {
			ch <- at(pod.CPU.Time.Time, prometheus.MustNewConstMetric(podCPUUsageDesc, prometheus.CounterValue,
				seconds(*pod.CPU.UsageCoreNanoSeconds), name, ns))
		}
		if pod.Memory != nil && pod.Memory.WorkingSetBytes != nil {
			ch <- at(pod.Memory.Time.Time, prometheus.MustNewConstMetric(podMemoryUsageDesc, prometheus.GaugeValue,
				float64(*pod.Memory.WorkingSetBytes), name, ns))
		}
		if pod.Swap != nil && pod.Swap.SwapUsageBytes != nil {
			ch <- at(pod.Swap.Time.Time, prometheus.MustNewConstMetric(podSwapUsageDesc, prometheus.GaugeValue,
				float64(*pod.Swap.SwapUsageBytes), name, ns))
		}
	}
}

// ResourceMetricsHandler serves upstream's /metrics/resource: one Summary
// per scrape, asked with the request's context. log (may be nil) records a
// failing summary (the scrape still answers, with resource_scrape_error 1).
func ResourceMetricsHandler(summary SummaryFunc, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(&resourceCollector{summary: summary, ctx: r.Context(), log: log})
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
	})
}
