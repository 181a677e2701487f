package e2e

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Pods the node's labels or host ports cannot take are rejected at
// admission with upstream's reasons; the others run.
func TestE2ESimPredicateAdmission(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "pods.yaml", manifests(
		busyboxPod("on-ssd", "spec.nodeSelector: {disk: ssd}", sleepForever),
		busyboxPod("on-gpu", "spec.affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: gpu, operator: Exists}]}]}}}", sleepForever),
		busyboxPod("port-a", sleepForever, "ports: [{containerPort: 80, hostPort: 18080}]")))
	a := startAgent(t, agentOpts{manifestDir: dir, extra: []string{"--node-labels", "disk=ssd"}})
	a.waitPod(time.Minute, "on-ssd-e2e-node", "Running (the node has disk=ssd)", isRunning)
	a.waitPod(time.Minute, "port-a-e2e-node", "Running", isRunning)
	rejected := func(reason string) func(*v1.Pod) bool {
		return func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed && p.Status.Reason == reason }
	}
	p := a.waitPod(time.Minute, "on-gpu-e2e-node", "Failed with NodeAffinity", rejected("NodeAffinity"))
	if p.Status.Message == "" || len(p.Status.ContainerStatuses) != 0 {
		t.Errorf("rejected pod: message %q, %d container statuses (want a message and none run)", p.Status.Message, len(p.Status.ContainerStatuses))
	}
	// A second pod asking for the same host port is rejected; the first
	// keeps running.
	writeManifest(t, dir, "port-b.yaml", busyboxPod("port-b", sleepForever, "ports: [{containerPort: 81, hostPort: 18080}]"))
	a.waitPod(time.Minute, "port-b-e2e-node", "Failed with NodePorts", rejected("NodePorts"))
	p, err := a.pod("port-a-e2e-node")
	if err != nil {
		t.Fatal(err)
	}
	if !isRunning(p) {
		t.Fatalf("port-a after the conflict: %s", describe(p))
	}
}
