package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actorlet/actorlet/adapters/cri"
	"github.com/actorlet/actorlet/internal/testenv"
)

// runtimeOutage is how long the runtime is down in the fault scenarios: the
// scenario's duration (issue 9), not a wait for anything.
const runtimeOutage = 30 * time.Second

// faultPods are the pods of the runtime outage: a plain one, one with an
// exec readiness probe, one with an exec liveness probe (probes that go
// through the runtime) and a web server with an HTTP readiness probe.
func faultPods(image string) string {
	pod := func(name, command, probe string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: %s
    command: %s
%s`, name, image, command, probe)
	}
	return manifests(
		pod("plain", `["sleep", "infinity"]`, ""),
		pod("ready", `["sh", "-c", "touch /tmp/ready; sleep infinity"]`,
			`    readinessProbe: {exec: {command: ["test", "-f", "/tmp/ready"]}, periodSeconds: 1, failureThreshold: 3}
`),
		pod("live", `["sh", "-c", "touch /tmp/ok; sleep infinity"]`,
			`    livenessProbe: {exec: {command: ["test", "-f", "/tmp/ok"]}, periodSeconds: 1, failureThreshold: 3}
`),
		pod("web", `["httpd", "-f", "-p", "8080", "-h", "/www"]`,
			`    readinessProbe: {httpGet: {port: 8080, path: /}, periodSeconds: 1}
`),
	)
}

// healthz returns /healthz's status code and body.
func (a *agent) healthz() (int, string, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", a.hzPort))
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// containerIDs are the pods' container IDs and restart counts as /pods
// shows them ("name=id/restarts", sorted).
func containerIDs(pods []v1.Pod) []string {
	var out []string
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			out = append(out, fmt.Sprintf("%s=%s/%d", p.Name, cs.ContainerID, cs.RestartCount))
		}
	}
	sort.Strings(out)
	return out
}

// TestE2EFaultContainerdOutage stops containerd (the daemon only: shims and
// containers keep running, as in a runtime upgrade or crash) for 30 s and
// starts it again. While it is down /healthz says the runtime is down and
// every pod stays Running and Ready (a probe the runtime cannot run is
// thrown away, as upstream); after, every container is adopted as it was:
// the same IDs in the runtime and in /pods, restartCount 0, nothing created
// again; and the liveness probe still works (a real failure restarts the
// container). On the old code the exec probes failed during the outage:
// the readiness pod went unready and the liveness probe stopped for good.
func TestE2EFaultContainerdOutage(t *testing.T) {
	rtm := testenv.NewPrivateContainerd(t, "alfaultc0", "10.244.179.0/24")
	dir := t.TempDir()
	a := startAgent(t, agentOpts{endpoint: rtm.Endpoint, manifestDir: dir})
	writeManifest(t, dir, "pods.yaml", faultPods(rtm.BusyboxImage))
	names := []string{"plain-e2e-node", "ready-e2e-node", "live-e2e-node", "web-e2e-node"}
	for _, n := range names {
		a.waitPod(2*time.Minute, n, "Running and Ready", func(p *v1.Pod) bool { return isRunning(p) && podReady(p) })
	}
	before, err := a.pods()
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := containerIDs(before)
	rt := a.runtime()
	runtimeBefore := runtimeIDs(t, rt)

	rtm.StopRuntime(t)
	outage := time.NewTimer(runtimeOutage)
	defer outage.Stop()
	testenv.WaitFor(t, runtimeOutage, "/healthz failing with the runtime down", func() (bool, error) {
		code, body, err := a.healthz()
		return code == http.StatusInternalServerError && strings.Contains(body, "runtime"), fmt.Errorf("%d %q %v", code, body, err)
	})
	// Until the runtime is back every pod stays Running and Ready, with
	// its containers: nothing is lost, restarted or failed because CRI
	// calls fail.
	polls := 0
	for waiting := true; waiting; {
		select {
		case <-outage.C:
			waiting = false
		case <-time.After(500 * time.Millisecond):
			pods, err := a.pods()
			if err != nil {
				t.Fatalf("/pods during the outage: %v", err)
			}
			polls++
			for _, p := range pods {
				if !isRunning(&p) || !podReady(&p) {
					t.Fatalf("during the outage %s: phase %s ready %v (%s)", p.Name, p.Status.Phase, podReady(&p), describe(&p))
				}
			}
			if got := containerIDs(pods); strings.Join(got, " ") != strings.Join(wantIDs, " ") {
				t.Fatalf("during the outage the containers changed:\n got %v\nwant %v", got, wantIDs)
			}
		}
	}
	if code, body, _ := a.healthz(); code != http.StatusInternalServerError {
		t.Fatalf("/healthz at the end of the outage: %d %q, want 500", code, body)
	}
	rtm.StartRuntime(t)

	testenv.WaitFor(t, time.Minute, "/healthz ok after the runtime is back", func() (bool, error) {
		code, body, err := a.healthz()
		return code == http.StatusOK, fmt.Errorf("%d %q %v", code, body, err)
	})
	// Everything adopted as it was: the runtime holds the same sandboxes
	// and containers (none made again), all still running.
	if got := runtimeIDs(t, rt); strings.Join(got, " ") != strings.Join(runtimeBefore, " ") {
		t.Fatalf("runtime after the outage:\n got %v\nwant %v", got, runtimeBefore)
	}
	for _, n := range names {
		a.waitPod(30*time.Second, n, "Running and Ready", func(p *v1.Pod) bool { return isRunning(p) && podReady(p) })
	}
	after, err := a.pods()
	if err != nil {
		t.Fatal(err)
	}
	if got := containerIDs(after); strings.Join(got, " ") != strings.Join(wantIDs, " ") {
		t.Fatalf("/pods after the outage:\n got %v\nwant %v (same IDs, restartCount 0)", got, wantIDs)
	}
	t.Logf("%d polls of /pods during the %s outage: all pods Running and Ready, same containers", polls, runtimeOutage)

	// The liveness probe still runs: make it fail for real, and the
	// container is restarted once.
	live := a.waitPod(time.Second, "live-e2e-node", "listed", func(*v1.Pod) bool { return true })
	id := strings.TrimPrefix(live.Status.ContainerStatuses[0].ContainerID, "containerd://")
	if _, stderr, code, err := rt.ExecSync(context.Background(), id, []string{"rm", "/tmp/ok"}, 10*time.Second); err != nil || code != 0 {
		t.Fatalf("rm /tmp/ok in %s: exit %d %q %v", id, code, stderr, err)
	}
	a.waitPod(time.Minute, "live-e2e-node", "restarted once by its liveness probe", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount == 1 && cs.State.Running != nil
	})
}

// runtimeIDs lists the runtime's sandboxes and containers with their
// states, sorted: what the runtime itself holds, not actorlet's view.
func runtimeIDs(t *testing.T, rt *cri.Client) []string {
	t.Helper()
	var out []string
	for _, s := range allSandboxes(t, rt) {
		out = append(out, "sandbox "+s.Id+" "+s.State.String())
	}
	for _, c := range allContainers(t, rt) {
		out = append(out, "container "+c.Id+" "+c.State.String())
	}
	sort.Strings(out)
	return out
}

// TestE2EFaultContainerdOutageCluster: the runtime outage in cluster mode.
// While containerd is down the Node turns NotReady with upstream's reason
// and message ("container runtime is down"), and the NodeNotReady event is
// recorded; when it is back the Node is Ready again (event NodeReady) and
// the API pod runs on with the same container, restartCount 0.
func TestE2EFaultContainerdOutageCluster(t *testing.T) {
	rtm := testenv.NewPrivateContainerd(t, "alfaultc1", "10.244.181.0/24")
	c, cp := privateCluster(t)
	const node = "e2e-faults-rt"
	kubeconfig := cp.NodeKubeconfig(t, node)
	startAgent(t, agentOpts{endpoint: rtm.Endpoint, extra: []string{
		"--kubeconfig", kubeconfig, "--hostname-override", node,
		"--node-status-update-frequency", "1s", "--node-lease-duration-seconds", "8", "--sync-frequency", "5s",
	}})
	t.Cleanup(func() { c.cleanupNode(t, node) })
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	if _, err := c.cs.CoreV1().Pods("default").Create(ctx, apiPod("steady", node, rtm.BusyboxImage, "sleep", "infinity"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := c.waitPod(t, "default", "steady", "Running", 2*time.Minute, isRunning)
	var base map[string]int32
	testenv.WaitFor(t, 30*time.Second, "the NodeReady event of the node's start", func() (bool, error) {
		var err error
		base, err = nodeEvents(c, node)
		return err == nil && base["NodeReady"] >= 1, fmt.Errorf("events %v (%v)", base, err)
	})

	rtm.StopRuntime(t)
	outage := time.NewTimer(runtimeOutage)
	defer outage.Stop()
	n := c.waitNodeReady(t, node, v1.ConditionFalse, runtimeOutage)
	for _, cond := range n.Status.Conditions {
		if cond.Type == v1.NodeReady && (cond.Reason != "KubeletNotReady" || !strings.HasPrefix(cond.Message, "container runtime is down")) {
			t.Errorf("Ready condition while the runtime is down: %s %q, want KubeletNotReady \"container runtime is down: ...\"", cond.Reason, cond.Message)
		}
	}
	<-outage.C
	rtm.StartRuntime(t)

	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	after := c.waitPod(t, "default", "steady", "Running", 30*time.Second, isRunning)
	if got, want := apiContainers([]*v1.Pod{after}), apiContainers([]*v1.Pod{before}); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("after the outage %v, want %v (same container, no restart)", got, want)
	}
	testenv.WaitFor(t, 30*time.Second, "a NodeNotReady and a NodeReady event more than before the outage", func() (bool, error) {
		now, err := nodeEvents(c, node)
		return err == nil && now["NodeNotReady"] > base["NodeNotReady"] && now["NodeReady"] > base["NodeReady"],
			fmt.Errorf("events %v, before the outage %v (%v)", now, base, err)
	})
}

// nodeEvents counts the Node's events by reason (an event repeated is one
// Event object with a count).
func nodeEvents(c *cluster, node string) (map[string]int32, error) {
	evs, err := c.cs.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node})
	if err != nil {
		return nil, err
	}
	out := map[string]int32{}
	for _, e := range evs.Items {
		out[e.Reason] += max(e.Count, 1)
	}
	return out, nil
}
