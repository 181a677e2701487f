package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// apiOutage is how long the API server is down in the fault scenario: the
// scenario's duration (issue 9), not a wait for anything.
const apiOutage = 60 * time.Second

// privateCluster is a control plane of the test's own (its API server is
// stopped and started again, which must disturb no other test) with an
// admin client.
func privateCluster(t *testing.T) (*cluster, *testenv.PrivateControlPlane) {
	t.Helper()
	cp := testenv.NewPrivateControlPlane(t, 63443, 63379)
	return clusterOf(t, cp.ControlPlaneEnv), cp
}

// apiContainers are the API's container IDs and restart counts of pods
// ("pod/container=id/restarts", sorted).
func apiContainers(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			out = append(out, fmt.Sprintf("%s/%s=%s/%d", p.Name, cs.Name, cs.ContainerID, cs.RestartCount))
		}
	}
	sort.Strings(out)
	return out
}

// TestE2EFaultAPIServerOutage: a node joined with API pods and a static pod
// running; kube-apiserver is stopped for 60 s (etcd, the controller manager
// and the scheduler keep running) and started again. During the outage
// every pod keeps running (the broken pod watch kills nothing), an API pod
// completes, a static pod completes and another is added. After it: the
// Node is Ready again and its Lease renewed, no pod was restarted, the
// statuses that changed during the outage are in the API (the completed
// pod Succeeded, the static pods' mirror pods with their status), the pods
// are Ready in the API again (the node lifecycle controller may have
// marked them not ready when the node's lease ran out), and the events of
// the outage (the new static pod's Started) are recorded.
func TestE2EFaultAPIServerOutage(t *testing.T) {
	c, cp := privateCluster(t)
	const node = "e2e-faults"
	dir := t.TempDir()
	writeManifest(t, dir, "staticrun.yaml", busyboxPod("staticrun", sleepForever))
	kubeconfig := cp.NodeKubeconfig(t, node)
	a := startAgent(t, agentOpts{manifestDir: dir, extra: []string{
		"--kubeconfig", kubeconfig, "--hostname-override", node,
		"--node-status-update-frequency", "1s", "--node-lease-duration-seconds", "8", "--sync-frequency", "5s",
	}})
	t.Cleanup(func() { c.cleanupNode(t, node) })
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	ctx := context.Background()

	steady := apiPod("steady", node, simImage, "sh", "-c", "touch /tmp/ready; sleep infinity")
	steady.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{
		Exec: &v1.ExecAction{Command: []string{"test", "-f", "/tmp/ready"}}}, PeriodSeconds: 1}
	// job completes during the outage: it runs 25 s from its start, and the
	// outage starts as soon as it runs.
	job := apiPod("job", node, simImage, "sh", "-c", "sleep 25; exit 0")
	job.Spec.RestartPolicy = v1.RestartPolicyNever
	for _, p := range []*v1.Pod{steady, job} {
		if _, err := c.cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	running := map[string]*v1.Pod{}
	for _, name := range []string{"steady", "job", "staticrun-" + node} {
		running[name] = c.waitPod(t, "default", name, "Running and Ready", time.Minute, func(p *v1.Pod) bool { return isRunning(p) && podReady(p) })
	}
	before := apiContainers([]*v1.Pod{running["steady"], running["staticrun-"+node]})

	cp.StopAPIServer(t)
	stopped := time.Now()
	outage := time.NewTimer(apiOutage)
	defer outage.Stop()
	// During the outage a static pod completes and another is added.
	writeManifest(t, dir, "oneshot.yaml", busyboxPod("oneshot", neverRestart, `command: ["sh", "-c", "sleep 1; exit 0"]`))
	writeManifest(t, dir, "latestatic.yaml", busyboxPod("latestatic", sleepForever))
	// Until the API server is back every pod keeps running on the node;
	// job and oneshot complete there.
	sawJobDone := false
	for waiting := true; waiting; {
		select {
		case <-outage.C:
			waiting = false
		case <-time.After(time.Second):
			pods, err := a.pods()
			if err != nil {
				t.Fatalf("/pods during the outage: %v", err)
			}
			seen := map[string]v1.Pod{}
			for _, p := range pods {
				seen[p.Name] = p
			}
			for _, name := range []string{"steady", "staticrun-" + node} {
				p, ok := seen[name]
				if !ok || !isRunning(&p) {
					t.Fatalf("during the outage %s is not running on the node (listed %v): %s", name, ok, describe(&p))
				}
			}
			if p, ok := seen["job"]; !ok {
				t.Fatalf("during the outage job is gone from the node")
			} else if p.Status.Phase == v1.PodSucceeded {
				sawJobDone = true
			}
		}
	}
	if !sawJobDone {
		t.Fatalf("job did not complete on the node during the outage (the scenario needs it to)")
	}
	cp.StartAPIServer(t)
	back := time.Now()
	t.Logf("API server down for %s", back.Sub(stopped).Round(time.Second))

	// The Node is Ready again and its Lease renewed after the outage.
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	testenv.WaitFor(t, 30*time.Second, "the Lease renewed after the outage", func() (bool, error) {
		l, err := c.cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return renewTime(l).After(back), fmt.Errorf("renewTime %s", renewTime(l))
	})
	// What changed during the outage reaches the API server.
	c.waitPod(t, "default", "job", "Succeeded", 30*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	c.waitPod(t, "default", "oneshot-"+node, "a mirror pod, Succeeded", 30*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	c.waitPod(t, "default", "latestatic-"+node, "a mirror pod, Running", 30*time.Second, isRunning)
	// Nothing was restarted, and the running pods are Ready in the API.
	var after []*v1.Pod
	for _, name := range []string{"steady", "staticrun-" + node} {
		after = append(after, c.waitPod(t, "default", name, "Running and Ready", 30*time.Second, func(p *v1.Pod) bool { return isRunning(p) && podReady(p) }))
	}
	if got := apiContainers(after); strings.Join(got, " ") != strings.Join(before, " ") {
		t.Fatalf("containers after the outage:\n got %v\nwant %v (same IDs, no restart)", got, before)
	}
	// The events of the outage: the new static pod started while the API
	// server was down, and its events are recorded once it is back.
	testenv.WaitFor(t, time.Minute, "the Started event of latestatic", func() (bool, error) {
		evs, err := c.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=latestatic-" + node})
		if err != nil {
			return false, err
		}
		var reasons []string
		for _, e := range evs.Items {
			if e.Reason == "Started" && e.Source.Host == node && !e.FirstTimestamp.After(back) {
				return true, nil
			}
			reasons = append(reasons, e.Reason)
		}
		return false, fmt.Errorf("events %v", reasons)
	})
}
