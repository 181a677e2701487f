package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// TestE2EClusterContainerdEphemeralContainer is the user's kubectl debug:
// an ephemeral container added to a running pod through the
// pods/ephemeralcontainers subresource runs (ephemeralContainerStatuses,
// logs, exec), and the pod's own container is not restarted.
func TestE2EClusterContainerdEphemeralContainer(t *testing.T) {
	const node, name = "e2e-ephemeral", "ephemeral-target"
	c := newCluster(t)
	env := testenv.ContainerdInfo(t)
	ip := nonLoopbackIPv4(t)
	a := c.startNode(t, node, agentOpts{endpoint: env.Endpoint, extra: []string{"--node-ip", ip, "--address", ip}})
	a.host = ip
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	pods := c.cs.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, apiPod(name, node, env.BusyboxImage, "sleep", "3600"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = pods.Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	before := c.waitPod(t, "default", name, "Running", 2*time.Minute, isRunning)

	p := before.DeepCopy()
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{
		EphemeralContainerCommon: v1.EphemeralContainerCommon{
			Name: "debugger", Image: env.BusyboxImage, ImagePullPolicy: v1.PullIfNotPresent,
			Command: []string{"sh", "-c", "while true; do echo polo; sleep 1; done"},
			Stdin:   true, TTY: true, TerminationMessagePolicy: v1.TerminationMessageReadFile,
		},
		TargetContainerName: "main",
	})
	if _, err := pods.UpdateEphemeralContainers(ctx, name, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("add an ephemeral container: %v", err)
	}
	after := c.waitPod(t, "default", name, "ephemeral container running", time.Minute, func(p *v1.Pod) bool {
		return len(p.Status.EphemeralContainerStatuses) == 1 && p.Status.EphemeralContainerStatuses[0].State.Running != nil
	})
	if ec := after.Status.EphemeralContainerStatuses[0]; ec.Name != "debugger" || ec.Ready || !strings.HasPrefix(ec.ContainerID, "containerd://") {
		t.Errorf("ephemeral status %+v", ec)
	}
	b, a0 := before.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0]
	if a0.ContainerID != b.ContainerID || a0.RestartCount != 0 || a0.State.Running == nil {
		t.Errorf("main container %s restarts %d %+v, want %s untouched", a0.ContainerID, a0.RestartCount, a0.State, b.ContainerID)
	}

	testenv.WaitFor(t, 30*time.Second, "the ephemeral container's logs", func() (bool, error) {
		out, err := pods.GetLogs(name, &v1.PodLogOptions{Container: "debugger"}).DoRaw(ctx)
		return err == nil && strings.Contains(string(out), "polo"), err
	})
	out, err := exec.Command(c.env.Kubectl, "--kubeconfig", c.env.AdminKubeconfig, "--request-timeout", "30s",
		"exec", name, "-c", "debugger", "--", "echo", "marco").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "marco") {
		t.Errorf("kubectl exec -c debugger echo marco = %q, %v", out, err)
	}
}
