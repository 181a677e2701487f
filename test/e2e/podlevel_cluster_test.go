package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/testenv"
)

// TestE2EClusterContainerdLateNodeLabel is issue 38's user: a label added
// to the Node after the agent started (kubectl label node) is honoured.
// Before it, a pod bound to the node whose nodeSelector names it is
// refused with upstream's NodeAffinity; once the Node has it, a pod the
// scheduler places by it runs within seconds, as upstream admits against
// its node lister.
func TestE2EClusterContainerdLateNodeLabel(t *testing.T) {
	const node = "e2e-latelabel"
	c := newCluster(t)
	env := testenv.ContainerdInfo(t)
	c.startNode(t, node, agentOpts{endpoint: env.Endpoint})
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	pods := c.cs.CoreV1().Pods("default")
	zero := int64(0)
	selecting := func(name, nodeName string) *v1.Pod {
		p := apiPod(name, nodeName, env.BusyboxImage, "sleep", "3600")
		p.Spec.NodeSelector = map[string]string{"team": "a-" + node}
		return p
	}
	for _, name := range []string{"latelabel-early", "latelabel-late"} {
		t.Cleanup(func() { _ = pods.Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}) })
	}

	// Bound by nodeName before the label exists: refused as upstream.
	if _, err := pods.Create(ctx, selecting("latelabel-early", node), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	early := c.waitPod(t, "default", "latelabel-early", "refused with NodeAffinity", time.Minute, func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed
	})
	if early.Status.Reason != "NodeAffinity" || !strings.Contains(early.Status.Message, "Predicate NodeAffinity failed") {
		t.Fatalf("refused with %q %q, want upstream's NodeAffinity", early.Status.Reason, early.Status.Message)
	}
	testenv.WaitFor(t, 30*time.Second, "the rejection's Warning event", func() (bool, error) {
		evs, err := c.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=latelabel-early"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Type == v1.EventTypeWarning && e.Reason == "NodeAffinity" && strings.Contains(e.Message, "Predicate NodeAffinity failed") {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d events, none NodeAffinity", len(evs.Items))
	})

	// kubectl label node <node> team=a-<node>
	patch := fmt.Sprintf(`{"metadata":{"labels":{"team":"a-%s"}}}`, node)
	if _, err := c.cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	labelled := time.Now()
	// Placed by the scheduler on the label, as a ReplicationController's pod.
	if _, err := pods.Create(ctx, selecting("latelabel-late", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	late := c.waitPod(t, "default", "latelabel-late", "Running on the late label", 30*time.Second, func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed || isRunning(p)
	})
	if late.Status.Phase == v1.PodFailed || late.Spec.NodeName != node {
		t.Fatalf("the pod after the label: node %q, %s %s %q", late.Spec.NodeName, late.Status.Phase, late.Status.Reason, late.Status.Message)
	}
	t.Logf("Running %s after the label", time.Since(labelled).Round(time.Millisecond))
}

// TestE2EClusterContainerdPodLevelResources is issue 38's pod-level
// resources pod: requests = limits (cpu 100m, memory 64Mi) at pod level,
// a container without resources. It runs and its status is in the API
// (Running, Ready) with the API server's qosClass Guaranteed; the
// container's downward API limits and its own cgroup's memory limit and
// CFS quota are the pod-level ones. (The pod cgroup's values are the
// cgroup tests'.)
func TestE2EClusterContainerdPodLevelResources(t *testing.T) {
	const node, name = "e2e-podlevel", "podlevel-guaranteed"
	c := newCluster(t)
	env := testenv.ContainerdInfo(t)
	a := c.startNode(t, node, agentOpts{endpoint: env.Endpoint})
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	pods := c.cs.CoreV1().Pods("default")
	// The container's own cgroup (v1 here; v2's files as a fallback) has
	// the pod-level limits, as upstream sets a container without its own.
	script := `lim=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max)
quota=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/cpu.max)
echo MEM=$MEM CPU=$CPU CGMEM=$lim CGCPU=$quota; sleep 3600`
	p := apiPod(name, node, env.BusyboxImage, "sh", "-c", script)
	p.Spec.Resources = &v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	p.Spec.Containers[0].Env = []v1.EnvVar{
		{Name: "MEM", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory"}}},
		{Name: "CPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1m")}}},
	}
	created, err := pods.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = pods.Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	if created.Status.QOSClass != v1.PodQOSGuaranteed {
		t.Fatalf("the API server computed %q, want Guaranteed", created.Status.QOSClass)
	}
	got := c.waitPod(t, "default", name, "Running and Ready in the API", 2*time.Minute, func(p *v1.Pod) bool {
		return isRunning(p) && podReady(p)
	})
	if got.Status.QOSClass != v1.PodQOSGuaranteed {
		t.Fatalf("qosClass %q in the API, want Guaranteed", got.Status.QOSClass)
	}
	a.waitLog(t, name, "main", "the downward API's and the container cgroup's limits are the pod-level ones", func(log string) bool {
		return strings.Contains(log, "MEM=67108864 CPU=100 CGMEM=67108864 CGCPU=10000")
	})
}
