package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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

// Pods of every source are admitted against the node's allocatable: a
// pushed pod asking 100000000 cpus and a static pod asking 999Pi of memory
// are listed Failed with upstream's reasons and never start; a pod that
// fits runs. Before issue 9 both ran.
func TestE2ESimResourceAdmission(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "pods.yaml", manifests(
		busyboxPod("huge-mem", sleepForever, "resources: {requests: {memory: 999Pi}}"),
		busyboxPod("fits", sleepForever, "resources: {requests: {cpu: 10m, memory: 16Mi, ephemeral-storage: 1Mi}}")))
	a := startAgent(t, agentOpts{manifestDir: dir})
	a.waitPod(time.Minute, "fits-e2e-node", "Running", isRunning)

	resp, err := a.mainClient().Post(a.mainURL("/pods"), "application/yaml",
		strings.NewReader(busyboxPod("huge-cpu", sleepForever, "resources: {requests: {cpu: \"100000000\"}}")))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("push: %d, want 201 (admission happens on the node, as for API pods)", resp.StatusCode)
	}
	rejected := func(reason string) func(*v1.Pod) bool {
		return func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed && p.Status.Reason == reason }
	}
	cpu := a.waitPod(time.Minute, "huge-cpu-e2e-node", "Failed with OutOfcpu", rejected("OutOfcpu"))
	mem := a.waitPod(time.Minute, "huge-mem-e2e-node", "Failed with OutOfmemory", rejected("OutOfmemory"))
	for _, p := range []*v1.Pod{cpu, mem} {
		if !strings.HasPrefix(p.Status.Message, "Node didn't have enough resource: ") {
			t.Errorf("%s: message %q, want upstream's", p.Name, p.Status.Message)
		}
		if len(p.Status.ContainerStatuses) != 0 {
			t.Errorf("%s: %d container statuses, want none", p.Name, len(p.Status.ContainerStatuses))
		}
	}
	if !strings.Contains(cpu.Status.Message, "cpu, requested: 100000000000, used: 10,") {
		t.Errorf("huge-cpu: message %q, want the request and what fits uses, in millicores", cpu.Status.Message)
	}
	// Never started: the runtime has nothing of either.
	rt := a.runtime()
	for _, p := range []*v1.Pod{cpu, mem} {
		sbs, err := rt.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(p.UID)}})
		if err != nil {
			t.Fatal(err)
		}
		if len(sbs) != 0 || len(containersOf(t, rt, string(p.UID))) != 0 {
			t.Errorf("%s: %d sandboxes in the runtime, want none", p.Name, len(sbs))
		}
	}
}
