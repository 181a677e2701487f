package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// These tests run real containers: deploy/local/containerd.sh brings up
// containerd with busybox and pause images built locally (no registry).
// With CI=true they must run; elsewhere they skip where the machine cannot.

func startContainerdAgent(t *testing.T, dir string, extra ...string) (*agent, string) {
	t.Helper()
	env := containerdFor(t)
	a := startAgent(t, agentOpts{endpoint: env.Endpoint, manifestDir: dir, extra: extra})
	return a, env.BusyboxImage
}

// cleanupPods removes the test's manifests and waits until the runtime holds
// nothing of them, so tests sharing the containerd leave it clean.
func cleanupPods(t *testing.T, a *agent, dir string, uids ...string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		_ = os.Remove(filepath.Join(dir, e.Name()))
	}
	rt := a.runtime()
	testenv.WaitFor(t, 2*time.Minute, "pods removed from containerd", func() (bool, error) {
		for _, uid := range uids {
			if n := len(containersOf(t, rt, uid)); n > 0 {
				return false, fmt.Errorf("pod %s: %d containers left", uid, n)
			}
			sbs, err := rt.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{
				LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}})
			if err != nil || len(sbs) > 0 {
				return false, fmt.Errorf("pod %s: %d sandboxes left (%v)", uid, len(sbs), err)
			}
		}
		return true, nil
	})
}

func TestE2EContainerdHTTPDServesOnPodIP(t *testing.T) {
	dir := t.TempDir()
	a, image := startContainerdAgent(t, dir)
	writeManifest(t, dir, "web.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: httpd
    image: `+image+`
    command: ["httpd", "-f", "-p", "8080", "-h", "/www"]
    resources:
      limits: {cpu: 200m, memory: 64Mi}
`)
	p := a.waitPod(2*time.Minute, "web-e2e-node", "Running", isRunning)
	if p.Status.PodIP == "" || p.Status.PodIP == "127.0.0.1" {
		t.Fatalf("pod IP %q", p.Status.PodIP)
	}
	if p.Status.QOSClass != v1.PodQOSGuaranteed {
		t.Errorf("QoS %s, want Guaranteed (limits only: requests default to limits)", p.Status.QOSClass)
	}
	if !strings.HasPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://") {
		t.Errorf("containerID %q", p.Status.ContainerStatuses[0].ContainerID)
	}
	url := fmt.Sprintf("http://%s:8080/", p.Status.PodIP)
	if body := testenv.WaitGet(t, http.DefaultClient, url, 30*time.Second); !strings.Contains(body, "busybox") {
		t.Errorf("body %q", body)
	}
	// The cgroup parent and limits reached the runtime.
	rt := a.runtime()
	ctrs := containersOf(t, rt, string(p.UID))
	if len(ctrs) != 1 {
		t.Fatalf("%d containers", len(ctrs))
	}
	st, err := rt.ContainerStatus(context.Background(), ctrs[0].Id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Labels["io.kubernetes.container.name"] != "httpd" || st.Labels["io.kubernetes.pod.name"] != "web-e2e-node" {
		t.Errorf("labels %v", st.Labels)
	}
	cleanupPods(t, a, dir, string(p.UID))
}

func TestE2EContainerdCrashRestartsWithBackoff(t *testing.T) {
	dir := t.TempDir()
	a, image := startContainerdAgent(t, dir, "--crashloop-backoff-initial", "1s", "--crashloop-backoff-max", "4s")
	writeManifest(t, dir, "crasher.yaml", podYAML("crasher", image, "Always", `["sh", "-c", "echo failing; exit 3"]`))
	sawBackOff := false
	p := a.waitPod(3*time.Minute, "crasher-e2e-node", "restartCount 3 after CrashLoopBackOff", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			sawBackOff = true
		}
		return sawBackOff && cs.RestartCount >= 3 && cs.LastTerminationState.Terminated != nil
	})
	cs := p.Status.ContainerStatuses[0]
	if cs.LastTerminationState.Terminated.ExitCode != 3 {
		t.Fatalf("last exit code %d, want 3", cs.LastTerminationState.Terminated.ExitCode)
	}
	// Restarts keep at most the newest container and one dead one.
	rt := a.runtime()
	testenv.WaitFor(t, 30*time.Second, "old attempts garbage collected", func() (bool, error) {
		n := len(containersOf(t, rt, string(p.UID)))
		return n <= 2, fmt.Errorf("%d containers", n)
	})
	cleanupPods(t, a, dir, string(p.UID))
}

func TestE2EContainerdRemovalLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	a, image := startContainerdAgent(t, dir)
	writeManifest(t, dir, "pods.yaml", podYAML("sleepy", image, "", `["sleep", "3600"]`)+"---\n"+
		podYAML("hostnet", image, "", `["sleep", "3600"]`)+"  hostNetwork: true\n")
	p1 := a.waitPod(2*time.Minute, "sleepy-e2e-node", "Running", isRunning)
	p2 := a.waitPod(2*time.Minute, "hostnet-e2e-node", "Running", isRunning)
	if p2.Status.PodIP != "127.0.0.1" {
		t.Errorf("host-network pod IP %q, want the node IP", p2.Status.PodIP)
	}
	// sleep ignores SIGTERM as PID 1: removal waits the 2 s grace period, then kills.
	cleanupPods(t, a, dir, string(p1.UID), string(p2.UID))
	testenv.WaitFor(t, 30*time.Second, "pods gone from /pods", func() (bool, error) {
		pods, err := a.pods()
		return err == nil && len(pods) == 0, fmt.Errorf("%d pods listed (%v)", len(pods), err)
	})
}
