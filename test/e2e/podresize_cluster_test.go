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
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// In-place pod resize through the real API server (the pods/resize
// subresource, as kubectl patch --subresource resize and VPA use it) on the
// sim runtime: the container is resized without a restart, the status
// reports it, a resize that does not fit beside another pod is Deferred
// until that pod goes, a RestartContainer policy restarts the container
// once, and a killed and restarted agent neither applies a resize again
// nor loses it.

// ipPatch is the strategic merge patch of container main's cpu and
// memory.
func ipPatch(cpuReq, cpuLim, memReq, memLim string) []byte {
	return fmt.Appendf(nil, `{"spec":{"containers":[{"name":"main","resources":{"requests":{"cpu":%q,"memory":%q},"limits":{"cpu":%q,"memory":%q}}}]}}`,
		cpuReq, memReq, cpuLim, memLim)
}

func (c *cluster) ipResize(t *testing.T, name string, patch []byte) *v1.Pod {
	t.Helper()
	p, err := c.cs.CoreV1().Pods("default").Patch(context.Background(), name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize")
	if err != nil {
		t.Fatalf("resize %s: %v", name, err)
	}
	return p
}

// ipWait is cluster.waitPod with the resize's part of the status in the
// error: the generations, the resize conditions and the container's
// resources.
func (c *cluster) ipWait(t *testing.T, name, what string, timeout time.Duration, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var got *v1.Pod
	testenv.WaitFor(t, timeout, name+": "+what, func() (bool, error) {
		p, err := c.cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = p
		var cs v1.ContainerStatus
		if len(p.Status.ContainerStatuses) > 0 {
			cs = p.Status.ContainerStatuses[0]
		}
		return cond(p), fmt.Errorf("%s; generation %d observed %d; pending %+v; in progress %+v; spec %v; status resources %v allocated %v",
			describe(p), p.Generation, p.Status.ObservedGeneration, ipCondition(p, v1.PodResizePending), ipCondition(p, v1.PodResizeInProgress),
			p.Spec.Containers[0].Resources, cs.Resources, cs.AllocatedResources)
	})
	return got
}

func ipCondition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// ipResizeDone: the status has caught up with the spec's generation, the
// container's resources and allocated requests are the spec's, and no
// resize is pending or in progress (upstream's "resize done").
func ipResizeDone(p *v1.Pod) bool {
	if !isRunning(p) || p.Status.ObservedGeneration < p.Generation ||
		ipCondition(p, v1.PodResizePending) != nil || ipCondition(p, v1.PodResizeInProgress) != nil {
		return false
	}
	want := p.Spec.Containers[0].Resources
	cs := p.Status.ContainerStatuses[0]
	return cs.Resources != nil && ipSameList(cs.Resources.Requests, want.Requests) && ipSameList(cs.Resources.Limits, want.Limits) &&
		ipSameList(cs.AllocatedResources, want.Requests)
}

func ipSameList(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for n, q := range a {
		if o, ok := b[n]; !ok || q.Cmp(o) != 0 {
			return false
		}
	}
	return true
}

func ipPod(name, node, cpuReq, cpuLim, memReq, memLim string, policy ...v1.ContainerResizePolicy) *v1.Pod {
	p := apiPod(name, node, simImage, "sleep", "infinity")
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpuReq), v1.ResourceMemory: resource.MustParse(memReq)},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpuLim), v1.ResourceMemory: resource.MustParse(memLim)},
	}
	p.Spec.Containers[0].ResizePolicy = policy
	return p
}

// ipRuntimeResources is what the runtime holds for the pod's running main
// container.
func ipRuntimeResources(t *testing.T, a *agent, uid types.UID) (string, *runtimeapi.LinuxContainerResources) {
	t.Helper()
	rt := a.runtime()
	for _, c := range containersOf(t, rt, string(uid)) {
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		st, err := rt.ContainerStatus(context.Background(), c.Id)
		if err != nil {
			t.Fatal(err)
		}
		return c.Id, st.GetResources().GetLinux()
	}
	t.Fatalf("pod %s has no running container", uid)
	return "", nil
}

func TestE2EClusterSimPodResize(t *testing.T) {
	c := newCluster(t)
	const node = "e2e-resize"
	// The runtime is a process of its own: it outlives the agent's kill.
	_, endpoint, _ := simProcess(t)
	a := c.startNode(t, node, agentOpts{endpoint: endpoint})
	n := c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	ctx := context.Background()

	web := ipPod("resize-web", node, "100m", "200m", "64Mi", "128Mi")
	created, err := c.cs.CoreV1().Pods("default").Create(ctx, web, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.ipWait(t, web.Name, "running with its resources", time.Minute, ipResizeDone)
	id, _ := ipRuntimeResources(t, a, created.UID)

	t.Run("cpu and memory up in place", func(t *testing.T) {
		c.ipResize(t, web.Name, ipPatch("200m", "400m", "64Mi", "256Mi"))
		p := c.ipWait(t, web.Name, "resized", time.Minute, ipResizeDone)
		if cs := p.Status.ContainerStatuses[0]; cs.RestartCount != 0 || !strings.HasSuffix(cs.ContainerID, "://"+id) {
			t.Fatalf("container restarted: %s", describe(p))
		}
		gotID, r := ipRuntimeResources(t, a, created.UID)
		if gotID != id || r.GetCpuQuota() != 40000 || r.GetCpuShares() != 204 || r.GetMemoryLimitInBytes() != 256<<20 {
			t.Fatalf("runtime holds %s %+v, want %s with quota 40000, shares 204, memory 256Mi", gotID, r, id)
		}
	})

	t.Run("deferred until room is made", func(t *testing.T) {
		alloc := n.Status.Allocatable[v1.ResourceCPU]
		// big takes what web leaves, less 100m: web cannot grow by 300m.
		big := alloc.MilliValue() - 200 - 100
		hog := ipPod("resize-hog", node, fmt.Sprintf("%dm", big), fmt.Sprintf("%dm", big), "16Mi", "16Mi")
		if _, err := c.cs.CoreV1().Pods("default").Create(ctx, hog, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.ipWait(t, hog.Name, "running", time.Minute, isRunning)
		c.ipResize(t, web.Name, ipPatch("500m", "600m", "64Mi", "256Mi"))
		p := c.ipWait(t, web.Name, "Deferred", time.Minute, func(p *v1.Pod) bool {
			cond := ipCondition(p, v1.PodResizePending)
			return cond != nil && cond.Reason == v1.PodReasonDeferred && cond.ObservedGeneration == p.Generation
		})
		if cs := p.Status.ContainerStatuses[0]; cs.AllocatedResources.Cpu().MilliValue() != 200 {
			t.Fatalf("deferred resize allocated: %v", cs.AllocatedResources)
		}
		if err := c.cs.CoreV1().Pods("default").Delete(ctx, hog.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		p = c.ipWait(t, web.Name, "resized once the hog left", 2*time.Minute, ipResizeDone)
		if p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Fatalf("restarted: %s", describe(p))
		}
	})

	t.Run("a memory limit below the usage is refused, then applied", func(t *testing.T) {
		exec := func(cmd ...string) {
			t.Helper()
			if _, stderr, code, err := a.runtime().ExecSync(ctx, id, cmd, 10*time.Second); err != nil || code != 0 {
				t.Fatalf("%v: %d %s %v", cmd, code, stderr, err)
			}
		}
		exec("alloc", "200Mi")
		c.ipResize(t, web.Name, ipPatch("500m", "600m", "64Mi", "128Mi"))
		p := c.ipWait(t, web.Name, "resize error", time.Minute, func(p *v1.Pod) bool {
			cond := ipCondition(p, v1.PodResizeInProgress)
			return cond != nil && cond.Reason == v1.PodReasonError && strings.Contains(cond.Message, "cannot decrease memory limits") &&
				strings.Contains(cond.Message, "below current usage")
		})
		if l := p.Status.ContainerStatuses[0].Resources.Limits[v1.ResourceMemory]; l.Value() != 256<<20 {
			t.Fatalf("status reports memory limit %s while the resize failed, want 256Mi", l.String())
		}
		exec("free")
		p = c.ipWait(t, web.Name, "resized once the memory was freed", 2*time.Minute, ipResizeDone)
		if p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Fatalf("restarted: %s", describe(p))
		}
	})

	t.Run("a killed agent neither re-applies nor loses a resize", func(t *testing.T) {
		a.kill9()
		// Resized while the agent is down: the next one applies it.
		c.ipResize(t, web.Name, ipPatch("300m", "600m", "64Mi", "128Mi"))
		a.start()
		p := c.ipWait(t, web.Name, "resized by the restarted agent", 2*time.Minute, ipResizeDone)
		gotID, r := ipRuntimeResources(t, a, created.UID)
		if gotID != id || p.Status.ContainerStatuses[0].RestartCount != 0 || r.GetCpuShares() != 307 || r.GetMemoryLimitInBytes() != 128<<20 {
			t.Fatalf("after restart: container %s (want %s), %s, runtime %+v", gotID, id, describe(p), r)
		}
	})

	t.Run("RestartContainer restarts once", func(t *testing.T) {
		rp := ipPod("resize-restart", node, "100m", "100m", "64Mi", "64Mi",
			v1.ContainerResizePolicy{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer})
		if _, err := c.cs.CoreV1().Pods("default").Create(ctx, rp, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.ipWait(t, rp.Name, "running", time.Minute, ipResizeDone)
		c.ipResize(t, rp.Name, ipPatch("100m", "100m", "128Mi", "128Mi"))
		p := c.ipWait(t, rp.Name, "restarted with the new memory", time.Minute, func(p *v1.Pod) bool {
			return ipResizeDone(p) && p.Status.ContainerStatuses[0].RestartCount == 1
		})
		_, r := ipRuntimeResources(t, a, p.UID)
		if r.GetMemoryLimitInBytes() != 128<<20 {
			t.Fatalf("new container has %+v", r)
		}
	})
}
