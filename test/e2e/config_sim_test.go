package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
)

// actorlet started with --config (a KubeletConfiguration, issue 11) on the
// simulated runtime: the file's staticPodPath runs pods, its maxPods
// admits as many and no more, /configz serves the effective configuration
// (flags given on the command line beat the file), and a field actorlet
// does not implement is named in one warning line at start.
func TestE2EConfigFileSim(t *testing.T) {
	manifestDir := t.TempDir()
	writeManifest(t, manifestDir, "pods.yaml", manifests(
		busyboxPod("first", sleepForever, "resources: {requests: {cpu: 10m}}"),
		busyboxPod("second", sleepForever, "resources: {requests: {cpu: 20m}}")))
	cfgDir := t.TempDir()
	cfg := filepath.Join(cfgDir, "kubelet-config.yaml")
	// Standalone: v1beta1's defaults (webhook authentication and
	// authorization) need an API server, so the file turns them off.
	if err := os.WriteFile(cfg, []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: `+manifestDir+`
fileCheckFrequency: 1h
maxPods: 2
clusterDomain: cluster.local
clusterDNS: [10.96.0.10]
nodeStatusMaxImages: 7
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
cpuManagerPolicy: static
`), 0o600); err != nil {
		t.Fatal(err)
	}
	// startAgent gives --file-check-frequency 200ms and the ports as flags:
	// they beat the file.
	a := startAgent(t, agentOpts{extra: []string{"--config", cfg}})

	a.waitPod(time.Minute, "first-e2e-node", "Running (from the file's staticPodPath)", isRunning)
	a.waitPod(time.Minute, "second-e2e-node", "Running", isRunning)
	writeManifest(t, manifestDir, "third.yaml", busyboxPod("third", sleepForever))
	p := a.waitPod(time.Minute, "third-e2e-node", "Failed with OutOfpods (the file's maxPods: 2)", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == "OutOfpods"
	})
	if len(p.Status.ContainerStatuses) != 0 {
		t.Errorf("the pod over maxPods ran containers: %s", describe(p))
	}

	resp, err := a.mainClient().Get(a.mainURL("/configz"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /configz: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var cz struct {
		KubeletConfig *kubeletconfig.KubeletConfiguration `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(body, &cz); err != nil || cz.KubeletConfig == nil {
		t.Fatalf("/configz: %v\n%s", err, body)
	}
	c := cz.KubeletConfig
	checks := []struct {
		name      string
		got, want any
	}{
		{"kind", c.Kind, "KubeletConfiguration"},
		{"apiVersion", c.APIVersion, "kubelet.config.k8s.io/v1beta1"},
		{"staticPodPath (file)", c.StaticPodPath, manifestDir},
		{"maxPods (file)", c.MaxPods, int32(2)},
		{"clusterDomain (file)", c.ClusterDomain, "cluster.local"},
		{"clusterDNS (file)", strings.Join(c.ClusterDNS, ","), "10.96.0.10"},
		{"nodeStatusMaxImages (file)", *c.NodeStatusMaxImages, int32(7)},
		{"authorization.mode (file)", string(c.Authorization.Mode), "AlwaysAllow"},
		{"cpuManagerPolicy (file, not implemented)", c.CPUManagerPolicy, "static"},
		{"fileCheckFrequency (flag beats file)", c.FileCheckFrequency.Duration, 200 * time.Millisecond},
		{"port (flag)", c.Port, int32(a.port)},
		{"readOnlyPort (flag)", c.ReadOnlyPort, int32(a.roPort)},
		{"address (flag)", c.Address, "127.0.0.1"},
		{"authentication.webhook.cacheTTL (v1beta1 default)", c.Authentication.Webhook.CacheTTL.Duration, 2 * time.Minute},
		{"syncFrequency (v1beta1 default)", c.SyncFrequency.Duration, time.Minute},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("/configz %s: %v, want %v", ck.name, ck.got, ck.want)
		}
	}
	// The read-only port does not serve it (upstream serves it on the
	// main port only).
	roResp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/configz", a.roPort))
	if err != nil {
		t.Fatal(err)
	}
	_ = roResp.Body.Close()
	if roResp.StatusCode != http.StatusNotFound {
		t.Errorf("/configz on the read-only port: %d, want 404", roResp.StatusCode)
	}

	b, _ := os.ReadFile(a.logPath)
	var warnings []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "not implemented by actorlet") {
			warnings = append(warnings, l)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "level=WARN") || !strings.Contains(warnings[0], "fields=cpuManagerPolicy") ||
		!strings.Contains(warnings[0], cfg) {
		t.Errorf("want one warning line naming cpuManagerPolicy and the file, got %q", warnings)
	}
}

// A bad config file stops actorlet before it starts anything: exit 2 and
// an error naming the file and the field.
func TestE2EConfigFileErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{name: "unknown field", body: "maxPods: 3\nmaxPod: 4\n", want: `unknown field "maxPod"`},
		{name: "bad value", body: "maxPods: -1\nauthentication: {webhook: {enabled: false}}\nauthorization: {mode: AlwaysAllow}\n",
			want: "maxPods of "},
		{name: "webhook without an API server (v1beta1's defaults, standalone)", body: "maxPods: 3\n",
			want: "authorization.mode of "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "kubelet-config.yaml")
			if err := os.WriteFile(cfg, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(actorletBin(t), "--config", cfg, "--container-runtime-endpoint", "sim://", "--root-dir", t.TempDir())
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit: %v, want status 2\n%s", err, out)
			}
			if !strings.Contains(string(out), tt.want) || !strings.Contains(string(out), cfg) {
				t.Fatalf("output does not name %q and the file:\n%s", tt.want, out)
			}
		})
	}
}
