package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// gRPC probes over the standard health service, against the sim runtime's
// agnhost-style grpc-health-checking server on the pod's own address.
func TestE2ESimGRPCProbes(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "grpc.yaml", manifests(
		busyboxPod("grpc-ready", grace2, `command: ["agnhost", "grpc-health-checking", "--port", "5000", "--service", "db"]`,
			`readinessProbe: {grpc: {port: 5000, service: db}, periodSeconds: 1}`, `livenessProbe: {grpc: {port: 5000}, periodSeconds: 1}`),
		busyboxPod("grpc-unknown-service", grace2, `command: ["agnhost", "grpc-health-checking", "--port", "5000"]`,
			`readinessProbe: {grpc: {port: 5000, service: cache}, periodSeconds: 1}`),
		busyboxPod("grpc-dead", grace2, sleepForever, `livenessProbe: {grpc: {port: 5000}, periodSeconds: 1, failureThreshold: 1}`)))
	a := startAgent(t, agentOpts{manifestDir: dir})
	a.waitPod(30*time.Second, "grpc-ready-e2e-node", "Ready through a gRPC health check of service db", isReady)
	a.waitPod(30*time.Second, "grpc-dead-e2e-node", "restarted by a failing gRPC liveness probe", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	// The unknown service's readiness probes run and fail (NOT_FOUND is a
	// failure, as upstream): the pod runs and is not ready.
	testenv.WaitFor(t, 30*time.Second, "a failed readiness probe of grpc-unknown-service", func() (bool, error) {
		n, err := a.probeResults("grpc-unknown-service-e2e-node", "Readiness", "failed")
		return n >= 2, err
	})
	p, err := a.pod("grpc-unknown-service-e2e-node")
	if err != nil {
		t.Fatal(err)
	}
	if !isRunning(p) || isReady(p) {
		t.Fatalf("grpc-unknown-service: %s ready=%v, want running and not ready (NOT_FOUND is a failure)", describe(p), isReady(p))
	}
	p, err = a.pod("grpc-ready-e2e-node")
	if err != nil {
		t.Fatal(err)
	}
	if n := p.Status.ContainerStatuses[0].RestartCount; n != 0 {
		t.Fatalf("grpc-ready restarted %d times: its liveness probe of the server must pass", n)
	}
}

// metricSum sums the series of a metric on the read-only port whose labels
// include each of labels (`key="value"`).
func (a *agent) metricSum(name string, labels ...string) (float64, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", a.roPort))
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(line, l)
		}
		if i := strings.LastIndexByte(line, ' '); match && i > 0 {
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err != nil {
				return 0, fmt.Errorf("metrics line %q: %w", line, err)
			}
			sum += v
		}
	}
	return sum, sc.Err()
}

// probeResults is prober_probe_total of one pod's probes of a type with a
// result (successful, failed, unknown).
func (a *agent) probeResults(pod, probeType, result string) (float64, error) {
	return a.metricSum("prober_probe_total", `pod="`+pod+`"`, `probe_type="`+probeType+`"`, `result="`+result+`"`)
}
