package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func u64p(v uint64) *uint64 { return &v }

func testSummary() *statsapi.Summary {
	at := metav1.NewTime(time.UnixMilli(1_700_000_000_000))
	return &statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "node-1", StartTime: at,
			CPU:    &statsapi.CPUStats{Time: at, UsageNanoCores: u64p(250e6), UsageCoreNanoSeconds: u64p(30e9)},
			Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: u64p(1 << 30), AvailableBytes: u64p(7 << 30)},
			Fs:     &statsapi.FsStats{Time: at, CapacityBytes: u64p(100 << 30), AvailableBytes: u64p(60 << 30)},
			SystemContainers: []statsapi.ContainerStats{{Name: "pods",
				Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: u64p(200 << 20)}, Rootfs: &statsapi.FsStats{}}},
		},
		Pods: []statsapi.PodStats{{
			PodRef:           statsapi.PodReference{Name: "web", Namespace: "default", UID: "u-web"},
			StartTime:        at,
			CPU:              &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: u64p(2e9)},
			Memory:           &statsapi.MemoryStats{Time: at, WorkingSetBytes: u64p(200 << 20)},
			EphemeralStorage: &statsapi.FsStats{Time: at, UsedBytes: u64p(12 << 20)},
			VolumeStats:      []statsapi.VolumeStats{{Name: "scratch"}},
			Containers: []statsapi.ContainerStats{{Name: "app", StartTime: at,
				CPU:    &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: u64p(2e9)},
				Memory: &statsapi.MemoryStats{Time: at, WorkingSetBytes: u64p(200 << 20)},
				Rootfs: &statsapi.FsStats{Time: at, UsedBytes: u64p(10 << 20)},
				Logs:   &statsapi.FsStats{Time: at, UsedBytes: u64p(2 << 20)}}},
		}},
	}
}

func TestStatsSummary(t *testing.T) {
	var fail error
	e := setup(t, func(c *Config) {
		c.StatsSummary = func(ctx context.Context) (*statsapi.Summary, error) {
			if fail != nil {
				return nil, fail
			}
			return testSummary(), nil
		}
	})
	tests := []struct {
		name  string
		path  string
		check func(t *testing.T, s *statsapi.Summary)
	}{
		{"full", "/stats/summary", func(t *testing.T, s *statsapi.Summary) {
			p := s.Pods[0]
			if s.Node.NodeName != "node-1" || s.Node.Fs == nil || *s.Node.CPU.UsageNanoCores != 250e6 ||
				p.PodRef.UID != "u-web" || p.EphemeralStorage == nil || len(p.VolumeStats) != 1 || p.Containers[0].Logs == nil {
				t.Fatalf("summary %+v", s)
			}
		}},
		{"only cpu and memory", "/stats/summary?only_cpu_and_memory=true", func(t *testing.T, s *statsapi.Summary) {
			p := s.Pods[0]
			if s.Node.Fs != nil || s.Node.CPU == nil || s.Node.SystemContainers[0].Rootfs != nil || s.Node.SystemContainers[0].Memory == nil ||
				p.EphemeralStorage != nil || p.VolumeStats != nil || p.Memory == nil ||
				p.Containers[0].Rootfs != nil || p.Containers[0].Logs != nil || p.Containers[0].CPU == nil || p.Containers[0].Name != "app" {
				t.Fatalf("summary %+v", s)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, h := range []http.Handler{e.srv.ReadOnly(), e.srv.Main()} {
				code, body, hdr := do(t, h, "GET", tt.path, "")
				if code != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
					t.Fatalf("GET %s: %d %s", tt.path, code, body)
				}
				var s statsapi.Summary
				if err := json.Unmarshal([]byte(body), &s); err != nil {
					t.Fatalf("decode %s: %v", body, err)
				}
				tt.check(t, &s)
			}
		})
	}
	t.Run("the summary fails", func(t *testing.T) {
		fail = errors.New("stats: list containers: runtime down")
		defer func() { fail = nil }()
		code, body, _ := do(t, e.srv.ReadOnly(), "GET", "/stats/summary", "")
		if code != http.StatusInternalServerError || !strings.Contains(body, "runtime down") {
			t.Fatalf("GET /stats/summary: %d %s", code, body)
		}
		code, body, _ = do(t, e.srv.ReadOnly(), "GET", "/metrics/resource", "")
		if code != http.StatusOK || !strings.Contains(body, "resource_scrape_error 1") {
			t.Fatalf("GET /metrics/resource: %d %s", code, body)
		}
	})
	t.Run("methods", func(t *testing.T) {
		if code, _, _ := do(t, e.srv.Main(), "POST", "/stats/summary", ""); code != http.StatusMethodNotAllowed {
			t.Fatalf("POST /stats/summary: %d", code)
		}
	})
}

func TestResourceMetricsRoute(t *testing.T) {
	e := setup(t, func(c *Config) {
		c.StatsSummary = func(context.Context) (*statsapi.Summary, error) { return testSummary(), nil }
	})
	for _, h := range []http.Handler{e.srv.ReadOnly(), e.srv.Main()} {
		code, body, _ := do(t, h, "GET", "/metrics/resource", "")
		if code != http.StatusOK {
			t.Fatalf("GET /metrics/resource: %d %s", code, body)
		}
		for _, want := range []string{
			"node_cpu_usage_seconds_total 30 1700000000000\n",
			"node_memory_working_set_bytes 1.073741824e+09 1700000000000\n",
			`container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 2 1700000000000`,
			`container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 2.097152e+08 1700000000000`,
			`container_start_time_seconds{container="app",namespace="default",pod="web"} 1.7e+09`,
			`pod_cpu_usage_seconds_total{namespace="default",pod="web"} 2 1700000000000`,
			`pod_memory_working_set_bytes{namespace="default",pod="web"} 2.097152e+08 1700000000000`,
			"resource_scrape_error 0\n",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("missing %q in\n%s", want, body)
			}
		}
		// /metrics is still the kubelet's own.
		if _, body, _ := do(t, h, "GET", "/metrics", ""); !strings.Contains(body, "kubelet_running_pods") {
			t.Fatalf("GET /metrics: %s", body)
		}
	}
}

func TestStatsUnservedWithoutSummary(t *testing.T) {
	e := setup(t, nil)
	for _, p := range []string{"/stats/summary", "/metrics/resource"} {
		if code, _, _ := do(t, e.srv.Main(), "GET", p, ""); code != http.StatusNotFound {
			t.Errorf("GET %s without a summary: %d", p, code)
		}
	}
}

func TestStatsAuthorizationAttributes(t *testing.T) {
	tests := []struct{ path, sub string }{
		{"/stats/summary", "stats"},
		{"/stats/summary?only_cpu_and_memory=true", "stats"},
		{"/metrics/resource", "metrics"},
		{"/metrics", "metrics"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			attrs := RequestAttributes("node-1", httptest.NewRequest("GET", tt.path, nil))
			if len(attrs) != 1 || attrs[0].Subresource != tt.sub || attrs[0].Verb != "get" || attrs[0].Name != "node-1" {
				t.Fatalf("attributes %+v, want get nodes/%s", attrs, tt.sub)
			}
		})
	}
}
