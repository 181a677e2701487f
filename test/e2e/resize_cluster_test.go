package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// In-place pod resize through the real API server, as a user does it
// (kubectl patch --subresource resize), on a real containerd: the node
// changes the running container's cgroup files and its pod's, without a
// restart where the container's resizePolicy is NotRequired, with exactly
// one where it is RestartContainer; a resize beyond the node's allocatable
// is refused (by the v1.37 API server already) and changes nothing.

// resizeRes is one container's cpu and memory, requests and limits.
type resizeRes struct{ reqCPU, reqMem, limCPU, limMem string }

func (r resizeRes) requirements() v1.ResourceRequirements {
	return v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(r.reqCPU), v1.ResourceMemory: resource.MustParse(r.reqMem)},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse(r.limCPU), v1.ResourceMemory: resource.MustParse(r.limMem)},
	}
}

// patch is the resize subresource's strategic merge patch of container name.
func (r resizeRes) patch(name string) string {
	return fmt.Sprintf(`{"spec":{"containers":[{"name":%q,"resources":{"requests":{"cpu":%q,"memory":%q},"limits":{"cpu":%q,"memory":%q}}}]}}`,
		name, r.reqCPU, r.reqMem, r.limCPU, r.limMem)
}

// cgroup is what the container's cgroup (and, the pod having one container
// with every limit set, its pod's) must hold.
func (r resizeRes) cgroup() cgExpect {
	milli := func(s string) int64 { q := resource.MustParse(s); return q.MilliValue() }
	bytes := func(s string) int64 { q := resource.MustParse(s); return q.Value() }
	return cgExpect{
		"cpu/cpu.shares":               cgShares(milli(r.reqCPU)),
		"cpu/cpu.cfs_quota_us":         cgQuota(milli(r.limCPU)),
		"memory/memory.limit_in_bytes": bytes(r.limMem),
	}
}

func resizePod(name, node, image string, memPolicy v1.ResourceResizeRestartPolicy, r resizeRes) *v1.Pod {
	p := apiPod(name, node, image, "sleep", "3600")
	p.Spec.Containers[0].Resources = r.requirements()
	p.Spec.Containers[0].ResizePolicy = []v1.ContainerResizePolicy{
		{ResourceName: v1.ResourceCPU, RestartPolicy: v1.NotRequired},
		{ResourceName: v1.ResourceMemory, RestartPolicy: memPolicy},
	}
	return p
}

// resizeState says whether the node is done with the pod's resize to r:
// no PodResizePending or PodResizeInProgress condition, and the
// container's status resources and allocated resources are r.
func resizeState(p *v1.Pod, r resizeRes) (bool, error) {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodResizePending || c.Type == v1.PodResizeInProgress {
			return false, fmt.Errorf("%s %s: %s", c.Type, c.Reason, c.Message)
		}
	}
	if len(p.Status.ContainerStatuses) != 1 {
		return false, fmt.Errorf("%d container statuses", len(p.Status.ContainerStatuses))
	}
	cs := p.Status.ContainerStatuses[0]
	if cs.State.Running == nil {
		return false, fmt.Errorf("container not running: %s", describe(p))
	}
	if cs.Resources == nil {
		return false, fmt.Errorf("no status resources")
	}
	want := r.requirements()
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if q := cs.Resources.Requests[name]; q.Cmp(want.Requests[name]) != 0 {
			return false, fmt.Errorf("status requests.%s %s, want %s", name, q.String(), want.Requests.Name(name, resource.DecimalSI))
		}
		if q := cs.Resources.Limits[name]; q.Cmp(want.Limits[name]) != 0 {
			return false, fmt.Errorf("status limits.%s %s, want %s", name, q.String(), want.Limits.Name(name, resource.DecimalSI))
		}
		if q := cs.AllocatedResources[name]; q.Cmp(want.Requests[name]) != 0 {
			return false, fmt.Errorf("allocatedResources.%s %s, want %s", name, q.String(), want.Requests.Name(name, resource.DecimalSI))
		}
	}
	return true, nil
}

func TestE2EClusterContainerdResize(t *testing.T) {
	const node = "e2e-resize"
	c := newCluster(t)
	env := testenv.ContainerdInfo(t)
	root := cgNewRoot(t) // first: removed after the agent stopped
	a := c.startNode(t, node, agentOpts{endpoint: env.Endpoint, extra: append([]string{"--cgroup-root", root, "--fail-cgroupv1=false"}, cgDiskFlags...)})
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	pods := c.cs.CoreV1().Pods("default")
	// Before the agent stops (cleanups run last-in first-out): the pods
	// deleted and gone from containerd, so their cgroups can go.
	var uids []string
	t.Cleanup(func() {
		zero := int64(0)
		for _, name := range []string{"resize-inplace", "resize-restart"} {
			_ = pods.Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
		rt := a.runtime()
		testenv.WaitFor(t, 2*time.Minute, "the resize pods gone from containerd", func() (bool, error) {
			for _, uid := range uids {
				if n := len(containersOf(t, rt, uid)); n > 0 {
					return false, fmt.Errorf("pod %s: %d containers", uid, n)
				}
			}
			return true, nil
		})
	})
	kubectlResize := func(name string, r resizeRes) {
		t.Helper()
		out, err := exec.Command(c.env.Kubectl, "--kubeconfig", c.env.AdminKubeconfig, "--request-timeout", "30s",
			"-n", "default", "patch", "pod", name, "--subresource", "resize", "--patch", r.patch("main")).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl patch pod %s --subresource resize: %v: %s", name, err, out)
		}
	}
	waitResized := func(name, what string, r resizeRes) *v1.Pod {
		t.Helper()
		var got *v1.Pod
		testenv.WaitFor(t, 2*time.Minute, name+": "+what, func() (bool, error) {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got = p
			return resizeState(p, r)
		})
		return got
	}
	containerID := func(p *v1.Pod) string {
		t.Helper()
		_, id, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
		if id == "" {
			t.Fatalf("%s: no container ID: %s", p.Name, describe(p))
		}
		return id
	}

	orig := resizeRes{reqCPU: "100m", reqMem: "64Mi", limCPU: "200m", limMem: "128Mi"}
	up := resizeRes{reqCPU: "150m", reqMem: "96Mi", limCPU: "300m", limMem: "192Mi"}

	// NotRequired: cpu and memory up, then back down, in place.
	if _, err := pods.Create(ctx, resizePod("resize-inplace", node, env.BusyboxImage, v1.NotRequired, orig), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := c.waitPod(t, "default", "resize-inplace", "Running", 2*time.Minute, isRunning)
	uids = append(uids, string(before.UID))
	if before.Status.QOSClass != v1.PodQOSBurstable {
		t.Fatalf("QoS %s, want Burstable", before.Status.QOSClass)
	}
	id := containerID(before)
	podParts := cgPodParts("Burstable", string(before.UID))
	ctrParts := append(append([]string{}, podParts...), id)
	if d := cgCheck(root, ctrParts, orig.cgroup()); d != "" {
		t.Fatalf("before the resize, the container's cgroup: %s", d)
	}
	cgWait(t, 30*time.Second, "before the resize, the pod's cgroup", root, podParts, orig.cgroup())
	started := before.Status.ContainerStatuses[0].State.Running.StartedAt

	for _, step := range []struct {
		what string
		r    resizeRes
	}{{"cpu and memory up", up}, {"cpu and memory back down", orig}} {
		kubectlResize("resize-inplace", step.r)
		p := waitResized("resize-inplace", step.what, step.r)
		cs := p.Status.ContainerStatuses[0]
		if cs.RestartCount != 0 || containerID(p) != id || !cs.State.Running.StartedAt.Equal(&started) {
			t.Fatalf("%s: container %s restarts %d started %v, want %s untouched (restarts 0, started %v)",
				step.what, containerID(p), cs.RestartCount, cs.State.Running.StartedAt, id, started)
		}
		cgWait(t, 30*time.Second, step.what+": the container's cgroup files", root, ctrParts, step.r.cgroup())
		cgWait(t, 30*time.Second, step.what+": the pod's cgroup files", root, podParts, step.r.cgroup())
		cgWait(t, 70*time.Second, step.what+": the burstable QoS cgroup's shares", root, []string{"kubepods", "burstable"},
			cgExpect{"cpu/cpu.shares": step.r.cgroup()["cpu/cpu.shares"]})
	}

	waitEvent := func(name, reason string) {
		t.Helper()
		testenv.WaitFor(t, time.Minute, name+": a "+reason+" event", func() (bool, error) {
			evs, err := c.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
			if err != nil {
				return false, err
			}
			return len(evs.Items) > 0, fmt.Errorf("no %s event", reason)
		})
	}
	waitEvent("resize-inplace", "ResizeCompleted") // upstream's, with the resources in its message

	// More CPU than the node has: the v1.37 API server refuses it itself
	// (against the node's status.allocatable), the pod and its cgroups
	// stay as they are.
	huge := resizeRes{reqCPU: "1000", reqMem: orig.reqMem, limCPU: "1000", limMem: orig.limMem}
	out, err := exec.Command(c.env.Kubectl, "--kubeconfig", c.env.AdminKubeconfig, "--request-timeout", "30s",
		"-n", "default", "patch", "pod", "resize-inplace", "--subresource", "resize", "--patch", huge.patch("main")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "allocatable") {
		t.Errorf("a resize beyond the node's allocatable: %v %s, want the API server's refusal", err, out)
	}
	p := waitResized("resize-inplace", "still as before the refused resize", orig)
	if cs := p.Status.ContainerStatuses[0]; cs.RestartCount != 0 || containerID(p) != id {
		t.Errorf("after the refused resize: container %s restarts %d, want %s untouched", containerID(p), cs.RestartCount, id)
	}
	if d := cgCheck(root, ctrParts, orig.cgroup()); d != "" {
		t.Errorf("a refused resize changed the container's cgroup: %s", d)
	}

	// RestartContainer for memory: a memory resize restarts the container
	// once, and the new container has the new limit.
	if _, err := pods.Create(ctx, resizePod("resize-restart", node, env.BusyboxImage, v1.RestartContainer, orig), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rbefore := c.waitPod(t, "default", "resize-restart", "Running", 2*time.Minute, isRunning)
	uids = append(uids, string(rbefore.UID))
	rid := containerID(rbefore)
	memUp := resizeRes{reqCPU: orig.reqCPU, reqMem: "80Mi", limCPU: orig.limCPU, limMem: "160Mi"}
	kubectlResize("resize-restart", memUp)
	var rafter *v1.Pod
	testenv.WaitFor(t, 2*time.Minute, "resize-restart: restarted once with the new memory", func() (bool, error) {
		p, err := pods.Get(ctx, "resize-restart", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rafter = p
		if ok, err := resizeState(p, memUp); !ok {
			return false, err
		}
		return p.Status.ContainerStatuses[0].RestartCount >= 1, fmt.Errorf("restarts %d", p.Status.ContainerStatuses[0].RestartCount)
	})
	rParts := cgPodParts("Burstable", string(rbefore.UID))
	newID := containerID(rafter)
	if newID == rid {
		t.Fatalf("RestartContainer: the container %s was not replaced", rid)
	}
	cgWait(t, 30*time.Second, "the restarted container's cgroup", root, append(append([]string{}, rParts...), newID), memUp.cgroup())
	cgWait(t, 30*time.Second, "the restarted container's pod cgroup", root, rParts, memUp.cgroup())
	// Once: the status read after the cgroups were checked still says 1.
	last, err := pods.Get(ctx, "resize-restart", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if last.Status.ContainerStatuses[0].RestartCount != 1 {
		t.Fatalf("RestartContainer: %s, want exactly one restart", describe(last))
	}
}
