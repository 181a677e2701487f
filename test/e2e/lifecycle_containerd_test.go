package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Container lifecycle on real containers (busybox on containerd): exec,
// httpGet and tcpSocket probes, hooks, termination messages.
func TestE2EContainerdLifecycle(t *testing.T) {
	dir := t.TempDir()
	a, image := startContainerdAgent(t, dir)
	manifest := strings.ReplaceAll(`apiVersion: v1
kind: Pod
metadata: {name: cd-probes}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: web
    image: IMAGE
    command: ["sh", "-c", "mkdir -p /www && echo ok > /www/healthz && exec httpd -f -p 8080 -h /www"]
    ports: [{name: http, containerPort: 8080}]
    readinessProbe:
      httpGet: {path: /healthz, port: http}
      periodSeconds: 1
    livenessProbe:
      tcpSocket: {port: 8080}
      periodSeconds: 1
    lifecycle:
      postStart:
        exec: {command: ["sh", "-c", "touch /tmp/poststart"]}
  - name: worker
    image: IMAGE
    command: ["sleep", "3600"]
    readinessProbe:
      exec: {command: ["test", "-f", "/tmp/poststart"]}
      periodSeconds: 1
    lifecycle:
      postStart:
        exec: {command: ["touch", "/tmp/poststart"]}
---
apiVersion: v1
kind: Pod
metadata: {name: cd-live}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: IMAGE
    command: ["sleep", "3600"]
    livenessProbe:
      exec: {command: ["cat", "/tmp/healthy"]}
      periodSeconds: 1
      failureThreshold: 2
---
apiVersion: v1
kind: Pod
metadata: {name: cd-term}
spec:
  restartPolicy: Never
  containers:
  - name: file
    image: IMAGE
    command: ["sh", "-c", "echo bye from busybox > /dev/termination-log"]
  - name: logs
    image: IMAGE
    command: ["sh", "-c", "echo it broke; exit 4"]
    terminationMessagePolicy: FallbackToLogsOnError
`, "IMAGE", image)
	writeManifest(t, dir, "lifecycle.yaml", manifest)

	a.waitPod(2*time.Minute, "cd-probes-e2e-node", "Ready (httpGet on a named port, exec after postStart)", isReady)
	p2 := a.waitPod(2*time.Minute, "cd-live-e2e-node", "restarted by its liveness probe", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount >= 1 && cs[0].LastTerminationState.Terminated != nil
	})
	p3 := a.waitPod(2*time.Minute, "cd-term-e2e-node", "Failed", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && len(p.Status.ContainerStatuses) == 2 &&
			p.Status.ContainerStatuses[0].State.Terminated != nil && p.Status.ContainerStatuses[1].State.Terminated != nil
	})
	for _, cs := range p3.Status.ContainerStatuses {
		want := map[string]string{"file": "bye from busybox\n", "logs": "it broke\n"}[cs.Name]
		if got := cs.State.Terminated.Message; got != want {
			t.Errorf("%s: termination message %q, want %q", cs.Name, got, want)
		}
	}
	p1, _ := a.pod("cd-probes-e2e-node")
	if n := p1.Status.ContainerStatuses[0].RestartCount; n != 0 {
		t.Errorf("web restarted %d times: its tcpSocket liveness probe should pass", n)
	}
	cleanupPods(t, a, dir, string(p1.UID), string(p2.UID), string(p3.UID))
}
