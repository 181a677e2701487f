package stats

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics/resource", nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	b, err := io.ReadAll(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestResourceMetrics(t *testing.T) {
	at := metav1.NewTime(time.UnixMilli(1_700_000_000_123))
	started := metav1.NewTime(time.Unix(1_699_999_000, 500_000_000))
	summary := &statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "n",
			CPU:    &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: ptr(12_500_000_000)},
			Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: ptr(1 << 30)},
			Swap:   &statsapi.SwapStats{Time: at, SwapUsageBytes: ptr(4096)},
		},
		Pods: []statsapi.PodStats{{
			PodRef: statsapi.PodReference{Name: "web", Namespace: "default", UID: "u"},
			CPU:    &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: ptr(2_000_000_000)},
			Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: ptr(300 << 20)},
			Containers: []statsapi.ContainerStats{
				{Name: "app", StartTime: started,
					CPU:    &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: ptr(1_500_000_000)},
					Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: ptr(200 << 20)},
					Swap:   &statsapi.SwapStats{Time: at, SwapUsageBytes: ptr(10), SwapAvailableBytes: ptr(90)}},
				{Name: "no-figures"},
			},
		}},
	}
	out := scrape(t, ResourceMetricsHandler(func(context.Context) (*statsapi.Summary, error) { return summary, nil }, nil))
	for _, want := range []string{
		"# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds\n# TYPE node_cpu_usage_seconds_total counter\nnode_cpu_usage_seconds_total 12.5 1700000000123\n",
		"# TYPE node_memory_working_set_bytes gauge\nnode_memory_working_set_bytes 1.073741824e+09 1700000000123\n",
		"node_swap_usage_bytes 4096 1700000000123\n",
		`container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 1.5 1700000000123` + "\n",
		`container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 2.097152e+08 1700000000123` + "\n",
		`container_start_time_seconds{container="app",namespace="default",pod="web"} 1.6999990005e+09` + "\n",
		`container_swap_usage_bytes{container="app",namespace="default",pod="web"} 10 1700000000123` + "\n",
		`container_swap_limit_bytes{container="app",namespace="default",pod="web"} 100 1700000000123` + "\n",
		`pod_cpu_usage_seconds_total{namespace="default",pod="web"} 2 1700000000123` + "\n",
		`pod_memory_working_set_bytes{namespace="default",pod="web"} 3.145728e+08 1700000000123` + "\n",
		"# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise\n# TYPE resource_scrape_error gauge\nresource_scrape_error 0\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "no-figures") {
		t.Errorf("a container without figures is reported:\n%s", out)
	}
}

func TestResourceMetricsScrapeError(t *testing.T) {
	out := scrape(t, ResourceMetricsHandler(func(context.Context) (*statsapi.Summary, error) {
		return nil, errors.New("runtime down")
	}, nil))
	if !strings.Contains(out, "resource_scrape_error 1\n") || strings.Contains(out, "node_cpu_usage_seconds_total ") {
		t.Fatalf("scrape of a failing summary:\n%s", out)
	}
}

func TestResourceCollectorInARegistry(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewResourceCollector(func(ctx context.Context) (*statsapi.Summary, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("a collection without a deadline")
		}
		return &statsapi.Summary{}, nil
	}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "resource_scrape_error" {
		t.Fatalf("families %v", mfs)
	}
}
