package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Kubernetes v1.37 node items on the wire, against the real agent on the
// simulated runtime (docs/KUBERNETES-1.37.md).

// TestE2ESimV137ReadOnlyMethods: the read-only port and the health port
// answer 405 Method Not Allowed with an Allow header to any method but
// GET (HEAD too on /pods, as upstream's GETOnlyRestfulFilter), and GET
// still works.
func TestE2ESimV137ReadOnlyMethods(t *testing.T) {
	a := startAgent(t, agentOpts{})
	client := &http.Client{Timeout: 10 * time.Second}
	tests := []struct {
		port      int
		method    string
		path      string
		wantCode  int
		wantAllow string
	}{
		{a.roPort, "GET", "/pods", 200, ""},
		{a.roPort, "POST", "/pods", 405, "GET"},
		{a.roPort, "HEAD", "/pods", 405, "GET"},
		{a.roPort, "DELETE", "/pods", 405, "GET"},
		{a.roPort, "POST", "/stats/summary", 405, "GET"},
		{a.roPort, "PUT", "/metrics", 405, "GET, HEAD"},
		{a.roPort, "POST", "/metrics/resource", 405, "GET, HEAD"},
		{a.roPort, "POST", "/healthz", 405, "GET, HEAD"},
		{a.hzPort, "POST", "/healthz", 405, "GET, HEAD"},
		{a.hzPort, "GET", "/healthz", 200, ""},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, fmt.Sprintf("http://127.0.0.1:%d%s", tt.port, tt.path), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.method, tt.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tt.wantCode {
			t.Errorf("port %d %s %s: %d, want %d (%s)", tt.port, tt.method, tt.path, resp.StatusCode, tt.wantCode, body)
		}
		if got := resp.Header.Get("Allow"); got != tt.wantAllow {
			t.Errorf("port %d %s %s: Allow %q, want %q", tt.port, tt.method, tt.path, got, tt.wantAllow)
		}
	}
}

// TestE2ESimV137StaticPodRefs: a static pod that references an API object
// (here a ConfigMap through env, a Secret through a volume) is refused as
// a whole with upstream's message, its file's other pods run, and the push
// API refuses such a pod with a 400 naming the reference.
func TestE2ESimV137StaticPodRefs(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "pods.yaml", manifests(
		busyboxPod("plain", sleepForever),
		busyboxPod("cmref", sleepForever, `env: [{name: X, valueFrom: {configMapKeyRef: {name: settings, key: k}}}]`)))
	writeManifest(t, dir, "secret.yaml", busyboxPod("secretvol", sleepForever, "spec.volumes: [{name: s, secret: {secretName: creds}}]"))
	a := startAgent(t, agentOpts{manifestDir: dir})
	a.waitPod(60*time.Second, "plain-e2e-node", "running", isRunning)
	pods, err := a.pods()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Name == "cmref-e2e-node" || p.Name == "secretvol-e2e-node" {
			t.Errorf("static pod %s referencing an API object was admitted: %s", p.Name, describe(&p))
		}
	}
	for _, want := range []string{
		"document 2: pod default/cmref-e2e-node: static pods may not reference configmaps",
		"secret.yaml: document 1: pod default/secretvol-e2e-node: static pods may not reference secrets",
	} {
		if !a.logContains(want) {
			t.Errorf("log lacks %q", want)
		}
	}
	code, body := a.postPod(t, busyboxPod("pushed-token", sleepForever, "spec.serviceAccountName: builder"))
	if code != http.StatusBadRequest || !strings.Contains(body, "static pods may not reference serviceaccounts") {
		t.Errorf("POST /pods of a pod with a service account: %d %s", code, body)
	}
}

// TestE2ESimV137NoRemovedCadvisorSurfaces: what v1.37 removed from the
// kubelet's cAdvisor surfaces is not served: no userDefinedMetrics in
// /stats/summary, none of container_cpu_load_average_10s,
// container_cpu_load_d_average_10s, container_tasks_state or
// container_application_* in /metrics, and no /metrics/cadvisor (actorlet
// never served it: its container figures come from the CRI).
func TestE2ESimV137NoRemovedCadvisorSurfaces(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "pod.yaml", busyboxPod("stats", sleepForever))
	a := startAgent(t, agentOpts{manifestDir: dir})
	a.waitPod(60*time.Second, "stats-e2e-node", "running", isRunning)
	client := &http.Client{Timeout: 30 * time.Second}
	get := func(path string) (int, string) {
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d%s", a.roPort, path))
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, summary := get("/stats/summary")
	if code != http.StatusOK || !strings.Contains(summary, `"podRef"`) {
		t.Fatalf("/stats/summary: %d %.300s", code, summary)
	}
	if strings.Contains(summary, "userDefinedMetrics") {
		t.Error("/stats/summary carries userDefinedMetrics, removed in v1.37")
	}
	code, metrics := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, gone := range []string{"container_cpu_load_average_10s", "container_cpu_load_d_average_10s", "container_tasks_state", "container_application_"} {
		if strings.Contains(metrics, gone) {
			t.Errorf("/metrics serves %s, removed in v1.37", gone)
		}
	}
	if code, _ := get("/metrics/cadvisor"); code != http.StatusNotFound {
		t.Errorf("/metrics/cadvisor: %d, want 404", code)
	}
}

// TestE2ESimV137ReadyToStartMessage: a pod that cannot get a sandbox (the
// sim runtime fails every RunPodSandbox) shows PodReadyToStartContainers
// False with v1.37's reason and message; a running pod shows it True.
func TestE2ESimV137ReadyToStartMessage(t *testing.T) {
	cond := func(p *v1.Pod) *v1.PodCondition {
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == v1.PodReadyToStartContainers {
				return &p.Status.Conditions[i]
			}
		}
		return nil
	}

	dir := t.TempDir()
	writeManifest(t, dir, "pods.yaml", manifests(busyboxPod("nosandbox", sleepForever)))
	a := startAgent(t, agentOpts{manifestDir: dir, endpoint: "sim://?fault-rate=1&fault-methods=RunPodSandbox&fault-seed=1"})
	a.waitPod(60*time.Second, "nosandbox-e2e-node", "PodReadyToStartContainers False with a message", func(p *v1.Pod) bool {
		c := cond(p)
		return c != nil && c.Status == v1.ConditionFalse && c.Reason == "PodSandboxNotReady" && c.Message == "no pod sandbox exists"
	})

	dir = t.TempDir()
	writeManifest(t, dir, "pods.yaml", manifests(busyboxPod("runs", sleepForever)))
	a = startAgent(t, agentOpts{manifestDir: dir})
	a.waitPod(60*time.Second, "runs-e2e-node", "PodReadyToStartContainers True", func(p *v1.Pod) bool {
		c := cond(p)
		return isRunning(p) && c != nil && c.Status == v1.ConditionTrue && c.Message == ""
	})
}
