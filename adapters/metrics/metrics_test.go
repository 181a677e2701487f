package metrics

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func scrape(t *testing.T, r *Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func TestExposition(t *testing.T) {
	tests := []struct {
		name string
		call func(r *Registry)
		want []string
	}{
		{name: "running pods", call: func(r *Registry) { r.SetRunningPods(7) }, want: []string{
			"# HELP kubelet_running_pods [ALPHA] Number of pods that have a running pod sandbox",
			"# TYPE kubelet_running_pods gauge", "kubelet_running_pods 7"}},
		{name: "running containers", call: func(r *Registry) { r.SetRunningContainers("running", 3); r.SetRunningContainers("exited", 1) }, want: []string{
			`kubelet_running_containers{container_state="running"} 3`, `kubelet_running_containers{container_state="exited"} 1`}},
		{name: "desired pods", call: func(r *Registry) { r.SetDesiredPods(true, 2); r.SetDesiredPods(false, 5) }, want: []string{
			`kubelet_desired_pods{static="true"} 2`, `kubelet_desired_pods{static="false"} 5`}},
		{name: "pod start", call: func(r *Registry) { r.ObservePodStart(1500 * time.Millisecond) }, want: []string{
			"# TYPE kubelet_pod_start_duration_seconds histogram",
			`kubelet_pod_start_duration_seconds_bucket{le="1"} 0`, `kubelet_pod_start_duration_seconds_bucket{le="2"} 1`,
			`kubelet_pod_start_duration_seconds_bucket{le="3600"} 1`,
			"kubelet_pod_start_duration_seconds_sum 1.5", "kubelet_pod_start_duration_seconds_count 1"}},
		{name: "pod start sli", call: func(r *Registry) { r.ObservePodStartSLI(4 * time.Second) }, want: []string{
			`kubelet_pod_start_sli_duration_seconds_bucket{le="4"} 1`, "kubelet_pod_start_sli_duration_seconds_count 1"}},
		{name: "pod start total", call: func(r *Registry) { r.ObservePodStartTotal(45 * time.Second) }, want: []string{
			`kubelet_pod_start_total_duration_seconds_bucket{le="30"} 0`, `kubelet_pod_start_total_duration_seconds_bucket{le="45"} 1`}},
		{name: "pod worker", call: func(r *Registry) { r.ObservePodWorker("sync", 20*time.Millisecond) }, want: []string{
			`kubelet_pod_worker_duration_seconds_bucket{operation_type="sync",le="0.025"} 1`,
			`kubelet_pod_worker_duration_seconds_count{operation_type="sync"} 1`}},
		{name: "pleg relist", call: func(r *Registry) {
			r.ObservePLEGRelist(3*time.Millisecond, time.Second)
			r.ObservePLEGRelist(time.Millisecond, 0)
		}, want: []string{
			"kubelet_pleg_relist_duration_seconds_count 2", `kubelet_pleg_relist_duration_seconds_bucket{le="0.005"} 2`,
			"kubelet_pleg_relist_interval_seconds_count 1", "kubelet_pleg_relist_interval_seconds_sum 1"}},
		{name: "pleg last seen", call: func(r *Registry) { r.SetPLEGLastSeen(time.Unix(1700000000, 500_000_000)) }, want: []string{
			"kubelet_pleg_last_seen_seconds 1.7000000005e+09"}},
		{name: "started pods", call: func(r *Registry) { r.IncStartedPods(); r.IncStartedPods(); r.IncStartedPodsErrors() }, want: []string{
			"# TYPE kubelet_started_pods_total counter", "kubelet_started_pods_total 2", "kubelet_started_pods_errors_total 1"}},
		{name: "started containers", call: func(r *Registry) {
			r.IncStartedContainers(ContainerTypeInit)
			r.IncStartedContainersErrors(ContainerTypeContainer, "Unknown")
		}, want: []string{
			`kubelet_started_containers_total{container_type="init_container"} 1`,
			`kubelet_started_containers_errors_total{code="Unknown",container_type="container"} 1`}},
		{name: "restarted pods", call: func(r *Registry) { r.IncRestartedPods(true) }, want: []string{
			`kubelet_restarted_pods_total{static="true"} 1`}},
		{name: "runtime ops", call: func(r *Registry) {
			r.ObserveRuntimeOp("create_container", 10*time.Millisecond, nil)
			r.ObserveRuntimeOp("create_container", 20*time.Millisecond, errors.New("boom"))
		}, want: []string{
			`kubelet_runtime_operations_total{operation_type="create_container"} 2`,
			`kubelet_runtime_operations_errors_total{operation_type="create_container"} 1`,
			`kubelet_runtime_operations_duration_seconds_bucket{operation_type="create_container",le="0.005"} 0`,
			`kubelet_runtime_operations_duration_seconds_bucket{operation_type="create_container",le="0.0125"} 1`,
			`kubelet_runtime_operations_duration_seconds_bucket{operation_type="create_container",le="0.03125"} 2`,
			`kubelet_runtime_operations_duration_seconds_bucket{operation_type="create_container",le="745.0580596923828"} 2`}},
		{name: "evictions", call: func(r *Registry) { r.IncEvictions("memory.available") }, want: []string{
			`kubelet_evictions{eviction_signal="memory.available"} 1`}},
		{name: "image pull", call: func(r *Registry) {
			r.ObserveImagePull(3*time.Second, 200*1024*1024)
			r.ObserveImagePull(time.Second, 0)
		}, want: []string{
			`kubelet_image_pull_duration_seconds_bucket{image_size_in_bytes="100MB-500MB",le="5"} 1`,
			`kubelet_image_pull_duration_seconds_count{image_size_in_bytes="N/A"} 1`}},
		{name: "image gc", call: func(r *Registry) { r.IncImageGC(ImageGCReasonAge, 3) }, want: []string{
			`kubelet_image_garbage_collected_total{reason="age"} 3`}},
		{name: "probes", call: func(r *Registry) {
			r.ObserveProbe(ProbeLiveness, ProbeResultSuccessful, "web", "p", "ns", "u1", 30*time.Millisecond)
			r.ObserveProbe(ProbeLiveness, ProbeResultFailed, "web", "p", "ns", "u1", 0)
		}, want: []string{
			"# HELP prober_probe_total [BETA] Cumulative number of a liveness, readiness or startup probe for a container by result.",
			`prober_probe_total{container="web",namespace="ns",pod="p",pod_uid="u1",probe_type="Liveness",result="successful"} 1`,
			`prober_probe_total{container="web",namespace="ns",pod="p",pod_uid="u1",probe_type="Liveness",result="failed"} 1`,
			`prober_probe_duration_seconds_count{container="web",namespace="ns",pod="p",probe_type="Liveness"} 1`}},
		{name: "actors", call: func(r *Registry) {
			r.IncActorRestart("pod")
			r.IncActorPanic("pod")
			r.IncActorPanic("pod")
			r.SetActors("probe", 12)
			r.AddActorMessages("pod", 40)
			r.ActorMessages("pod").Inc()
		}, want: []string{
			`actorlet_actor_restarts_total{kind="pod"} 1`, `actorlet_actor_panics_total{kind="pod"} 2`,
			"# TYPE actorlet_actors gauge", `actorlet_actors{kind="probe"} 12`, `actorlet_actor_messages_total{kind="pod"} 41`}},
		{name: "actor counts replace", call: func(r *Registry) {
			r.SetActors("image", 1)
			r.SetActorCounts(map[string]int{"pod": 4})
		}, want: []string{`actorlet_actors{kind="pod"} 4`}},
		{name: "go and process collectors", call: func(*Registry) {}, want: []string{"go_goroutines ", "process_start_time_seconds "}},
		{name: "events dropped, read at each scrape", call: func(r *Registry) {
			n := uint64(3)
			if err := r.SetEventsDropped(func() uint64 { return n }); err != nil {
				panic(err)
			}
			n = 5
		}, want: []string{"# TYPE actorlet_events_dropped_total counter", "actorlet_events_dropped_total 5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New()
			tt.call(r)
			out := scrape(t, r)
			lines := strings.Split(out, "\n")
			for _, w := range tt.want {
				if !hasLine(lines, w) {
					t.Errorf("exposition lacks line %q", w)
				}
			}
			if tt.name == "actor counts replace" && strings.Contains(out, `actorlet_actors{kind="image"}`) {
				t.Error("stale kind kept")
			}
		})
	}
}

func TestForgetProbe(t *testing.T) {
	r := New()
	r.ObserveProbe(ProbeReadiness, ProbeResultSuccessful, "c", "p", "ns", "u", time.Millisecond)
	r.ForgetProbe(ProbeReadiness, "c", "p", "ns", "u")
	if out := scrape(t, r); strings.Contains(out, `pod_uid="u"`) || strings.Contains(out, `prober_probe_duration_seconds_count{`) {
		t.Fatalf("probe series kept:\n%s", out)
	}
}

func TestImageSizeBucket(t *testing.T) {
	tests := []struct {
		size uint64
		want string
	}{
		{0, "N/A"}, {1, "0-10MB"}, {10 * mib, "0-10MB"}, {10*mib + 1, "10MB-100MB"},
		{2 * gib, "1GB-5GB"}, {200 * gib, "GT100GB"},
	}
	for _, tt := range tests {
		if got := ImageSizeBucket(tt.size); got != tt.want {
			t.Errorf("ImageSizeBucket(%d) = %q, want %q", tt.size, got, tt.want)
		}
	}
}

// hasLine reports whether a line equals want, or starts with it when want
// ends with a space (value left open).
func hasLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want || (strings.HasSuffix(want, " ") && strings.HasPrefix(l, want)) {
			return true
		}
	}
	return false
}

func TestRunningPodsReadsBackTheGauge(t *testing.T) {
	r := New()
	for _, n := range []int{0, 1000, 3} {
		r.SetRunningPods(n)
		if got := r.RunningPods(); got != n {
			t.Errorf("RunningPods %d after SetRunningPods(%d)", got, n)
		}
	}
}
