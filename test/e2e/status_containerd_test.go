package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Pod status details on real containers, as the upstream kubelet shows them
// (NodeConformance: init containers, probes while a pod terminates).

// TestE2EContainerdInitContainerStatuses: while the first init container
// runs, the second and the app container wait in PodInitializing; once done,
// every init container is terminated with exit code 0 and ready, the app
// container never restarted.
func TestE2EContainerdInitContainerStatuses(t *testing.T) {
	dir := t.TempDir()
	a, image := startContainerdAgent(t, dir)
	writeManifest(t, dir, "init.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: init
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: init1
    image: `+image+`
    command: ["sh", "-c", "sleep 3"]
  - name: init2
    image: `+image+`
    command: ["true"]
  containers:
  - name: app
    image: `+image+`
    command: ["sleep", "3600"]
`)
	const name = "init-e2e-node"
	sawInitializing := false
	var bad string
	p := a.waitPod(2*time.Minute, name, "Running after its init containers", func(p *v1.Pod) bool {
		if len(p.Status.InitContainerStatuses) == 2 && p.Status.InitContainerStatuses[0].State.Running != nil {
			init2, app := p.Status.InitContainerStatuses[1], p.Status.ContainerStatuses[0]
			if w := init2.State.Waiting; w == nil || w.Reason != "PodInitializing" {
				bad = fmt.Sprintf("init2 while init1 runs: %+v", init2.State)
			}
			if w := app.State.Waiting; w == nil || w.Reason != "PodInitializing" {
				bad = fmt.Sprintf("app while init1 runs: %+v", app.State)
			}
			sawInitializing = true
		}
		return isRunning(p)
	})
	if bad != "" {
		t.Errorf("upstream shows PodInitializing: %s", bad)
	}
	if !sawInitializing {
		t.Errorf("never saw init1 running (it sleeps 3 s)")
	}
	for _, cs := range p.Status.InitContainerStatuses {
		if term := cs.State.Terminated; term == nil || term.ExitCode != 0 || term.Reason != "Completed" || !cs.Ready {
			t.Errorf("init container %s: state %+v ready %v, want terminated Completed (0) and ready", cs.Name, cs.State, cs.Ready)
		}
		if cs.Started == nil || *cs.Started {
			t.Errorf("init container %s: started %v, want false", cs.Name, cs.Started)
		}
	}
	if cs := p.Status.ContainerStatuses[0]; cs.RestartCount != 0 {
		t.Errorf("app restarted %d times", cs.RestartCount)
	}
	cleanupPods(t, a, dir, string(p.UID))
}

// TestE2EContainerdNotReadyWhileTerminating: a ready pod whose container
// takes its time to stop (it traps SIGTERM) is shown not ready as soon as
// it is being removed, while its container still runs.
func TestE2EContainerdNotReadyWhileTerminating(t *testing.T) {
	dir := t.TempDir()
	a, image := startContainerdAgent(t, dir)
	writeManifest(t, dir, "slow.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: slowstop
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - name: app
    image: `+image+`
    command: ["sh", "-c", "trap 'sleep 20; exit 0' TERM; touch /tmp/ready; while true; do sleep 1; done"]
    readinessProbe:
      exec: {command: ["test", "-f", "/tmp/ready"]}
      periodSeconds: 1
`)
	const name = "slowstop-e2e-node"
	p := a.waitPod(2*time.Minute, name, "Running and ready", func(p *v1.Pod) bool { return isRunning(p) && podReady(p) })
	// Removed: the pod is killed with its 30 s grace period.
	if err := os.Remove(filepath.Join(dir, "slow.yaml")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got := a.waitPod(15*time.Second, name, "not ready while its container stops", func(p *v1.Pod) bool {
		return !podReady(p) && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	if cs := got.Status.ContainerStatuses[0]; cs.Ready {
		t.Errorf("container %s still ready", cs.Name)
	}
	t.Logf("not ready %s after the removal", time.Since(start).Round(time.Millisecond))
	cleanupPods(t, a, dir, string(p.UID))
}
