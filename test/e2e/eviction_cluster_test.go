package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// evWaitNodeCondition waits until the Node's condition of type typ has
// status want and returns it.
func (c *cluster) evWaitNodeCondition(t *testing.T, node string, typ v1.NodeConditionType, want v1.ConditionStatus, timeout time.Duration) v1.NodeCondition {
	t.Helper()
	var got v1.NodeCondition
	testenv.WaitFor(t, timeout, fmt.Sprintf("node %s %s=%s", node, typ, want), func() (bool, error) {
		n, err := c.cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == typ {
				got = cond
				return cond.Status == want, fmt.Errorf("%s=%s %s", typ, cond.Status, cond.Reason)
			}
		}
		return false, fmt.Errorf("no %s condition", typ)
	})
	return got
}

// evNodeCondition is the Node's condition of type typ now.
func (c *cluster) evNodeCondition(t *testing.T, node string, typ v1.NodeConditionType) v1.NodeCondition {
	t.Helper()
	n, err := c.cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == typ {
			return cond
		}
	}
	t.Fatalf("node %s has no %s condition: %v", node, typ, n.Status.Conditions)
	return v1.NodeCondition{}
}

// In cluster mode, as a user sees it through the API server: a pod that
// takes the node (sim://?node-memory=2Gi) under memory.available<1Gi
// turns the Node's MemoryPressure True and is evicted (kubectl get pod
// shows it Evicted; a Warning event "Evicted" with the status' message);
// a BestEffort pod created under MemoryPressure is refused with reason
// Evicted; MemoryPressure stays True after the hog is gone until
// --eviction-pressure-transition-period (15 s) has passed since the
// threshold was last met, then turns False; the Node's events record
// both changes.
func TestE2EClusterMemoryPressureTransition(t *testing.T) {
	const node = "e2e-evict"
	const transition = 15 * time.Second
	c := newCluster(t)
	c.startNode(t, node, agentOpts{endpoint: "sim://?node-memory=2Gi", extra: []string{
		"--eviction-hard", "memory.available<1Gi",
		"--eviction-pressure-transition-period", transition.String(),
	}})
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	start := c.evWaitNodeCondition(t, node, v1.NodeMemoryPressure, v1.ConditionFalse, time.Minute)
	if start.Reason != "KubeletHasSufficientMemory" {
		t.Errorf("MemoryPressure False with reason %q, want KubeletHasSufficientMemory", start.Reason)
	}
	ctx := context.Background()

	hog := apiPod("ev-hog", node, simImage, "sh", "-c", "alloc 900Mi; sleep infinity")
	hog.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}
	hog, err := c.cs.CoreV1().Pods("default").Create(ctx, hog, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	under := c.evWaitNodeCondition(t, node, v1.NodeMemoryPressure, v1.ConditionTrue, time.Minute)
	if under.Reason != "KubeletHasInsufficientMemory" {
		t.Errorf("MemoryPressure True with reason %q, want KubeletHasInsufficientMemory", under.Reason)
	}
	got := c.waitPod(t, "default", "ev-hog", "Failed/Evicted", time.Minute, evicted)
	if !strings.HasPrefix(got.Status.Message, "The node was low on resource: memory. Threshold quantity: 1Gi, available: ") ||
		!strings.HasSuffix(got.Status.Message, "Container main was using 904Mi, request is 64Mi, has larger consumption of memory. ") {
		t.Errorf("ev-hog's message %q, want upstream's", got.Status.Message)
	}
	evictedAt := evConditionTime(got, v1.DisruptionTarget)
	if evictedAt.IsZero() {
		t.Errorf("ev-hog's conditions %v: want DisruptionTarget", got.Status.Conditions)
	}

	// The hog is gone, the threshold no longer met: the condition holds
	// for the transition period, and admission still follows it.
	if cond := c.evNodeCondition(t, node, v1.NodeMemoryPressure); cond.Status != v1.ConditionTrue {
		t.Fatalf("MemoryPressure %s right after the eviction: want True for %s", cond.Status, transition)
	}
	be, err := c.cs.CoreV1().Pods("default").Create(ctx, apiPod("ev-besteffort", node, simImage, "sleep", "infinity"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refused := c.waitPod(t, "default", be.Name, "refused with reason Evicted", time.Minute, evicted)
	if refused.Status.Message != "The node had condition: [MemoryPressure]. " || len(refused.Status.ContainerStatuses) != 0 {
		t.Errorf("ev-besteffort: message %q, %d container statuses; want upstream's message and none run",
			refused.Status.Message, len(refused.Status.ContainerStatuses))
	}

	// What kubectl describe shows (kubectl get's STATUS column shows the
	// last container's terminated reason over the pod's, as upstream).
	out, err := evKubectl(c, "describe", "pod", "ev-hog", "-n", "default")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`(?m)^Status:\s+Failed$`, `(?m)^Reason:\s+Evicted$`, `(?m)^Message:\s+The node was low on resource: memory\. `} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("kubectl describe pod ev-hog lacks %s:\n%s", want, out)
		}
	}
	if get, err := evKubectl(c, "get", "pod", "ev-hog", "-n", "default", "--no-headers"); err == nil {
		t.Logf("kubectl get pod: %s", get)
	}
	testenv.WaitFor(t, 30*time.Second, "a Warning event Evicted for ev-hog", func() (bool, error) {
		evs, err := c.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=ev-hog,involvedObject.uid=" + string(hog.UID) + ",reason=Evicted"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Type == v1.EventTypeWarning && e.Message == got.Status.Message {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d Evicted events, none a Warning with the pod's message", len(evs.Items))
	})

	// Then False, not before the transition period.
	cleared := c.evWaitNodeCondition(t, node, v1.NodeMemoryPressure, v1.ConditionFalse, 2*time.Minute)
	held := cleared.LastTransitionTime.Sub(evictedAt)
	t.Logf("MemoryPressure True at %s, hog evicted at %s, False at %s (%s after the eviction; transition period %s)",
		under.LastTransitionTime.Format(time.RFC3339), evictedAt.Format(time.RFC3339), cleared.LastTransitionTime.Format(time.RFC3339), held, transition)
	if held < transition-time.Second { // times in whole seconds
		t.Errorf("MemoryPressure cleared %s after the eviction (the threshold's last time met): before the transition period %s", held, transition)
	}
	if cleared.Reason != "KubeletHasSufficientMemory" {
		t.Errorf("MemoryPressure False with reason %q, want KubeletHasSufficientMemory", cleared.Reason)
	}
	testenv.WaitFor(t, 30*time.Second, "the Node's events NodeHasInsufficientMemory and NodeHasSufficientMemory", func() (bool, error) {
		evs, err := c.cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node})
		if err != nil {
			return false, err
		}
		// The latest time of each reason (a repeated event is one Event
		// with a count), whole seconds.
		seen := map[string]time.Time{}
		for _, e := range evs.Items {
			at := e.LastTimestamp.Time
			if e.EventTime.After(at) {
				at = e.EventTime.Time
			}
			if at.After(seen[e.Reason]) {
				seen[e.Reason] = at
			}
		}
		insufficient, sufficient := seen["NodeHasInsufficientMemory"], seen["NodeHasSufficientMemory"]
		return !insufficient.Before(under.LastTransitionTime.Add(-time.Second)) && !sufficient.Before(cleared.LastTransitionTime.Add(-time.Second)),
			fmt.Errorf("NodeHasInsufficientMemory last at %s, NodeHasSufficientMemory last at %s", insufficient, sufficient)
	})
}

// evKubectl runs kubectl args as the admin and returns its stdout.
func evKubectl(c *cluster, args ...string) (string, error) {
	cmd := exec.Command(c.env.Kubectl, append([]string{"--kubeconfig", c.env.AdminKubeconfig, "--request-timeout", "20s"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}
