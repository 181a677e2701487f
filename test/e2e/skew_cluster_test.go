package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// TestE2ESkewV136ControlPlane is the version skew policy's promise for a
// node one minor version newer than its control plane: actorlet (client-go
// v0.37, reporting v1.37.x) on containerd joins a v1.36.4 kube-apiserver
// (deploy/local/controlplane.sh with ACTORLET_K8S_VERSION, a private state
// dir and ports): the node registers and renews its lease, a pod bound to
// it through the binding subresource (as kube-scheduler binds) runs and
// reports Ready with its service account token projected (TokenRequest of
// v1.36), its logs and exec go through the v1.36 API server to the node,
// and a graceful delete removes it.
func TestE2ESkewV136ControlPlane(t *testing.T) {
	const node, name = "e2e-skew", "skew-pod"
	skew := testenv.SkewControlPlane(t, testenv.SkewVersion)
	c := clusterOf(t, skew.ControlPlaneEnv)
	ctx := context.Background()

	sv, err := c.cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if sv.GitVersion != testenv.SkewVersion {
		t.Fatalf("the skew control plane serves %s, want %s", sv.GitVersion, testenv.SkewVersion)
	}

	env := testenv.ContainerdInfo(t)
	ip := nonLoopbackIPv4(t) // kube-apiserver does not proxy logs and exec to a loopback node IP
	t.Cleanup(func() { c.cleanupNode(t, node) })
	a := startAgent(t, agentOpts{endpoint: env.Endpoint, extra: []string{
		"--kubeconfig", skew.NodeKubeconfig(t, node), "--hostname-override", node,
		"--node-ip", ip, "--address", ip,
		"--node-status-update-frequency", "1s", "--node-lease-duration-seconds", "8",
		"--anonymous-auth=false", "--client-ca-file", skew.ClusterCA,
		"--authentication-token-webhook", "--authorization-mode=Webhook",
	}})
	a.host, a.clientCert = ip, &c.adminCert

	n := c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	if kv := n.Status.NodeInfo.KubeletVersion; !strings.HasPrefix(kv, "v1.37.") {
		t.Errorf("node %s reports kubelet version %q, want v1.37.x (one minor newer than the API server)", node, kv)
	}
	testenv.WaitFor(t, 30*time.Second, "the node's lease in kube-node-lease", func() (bool, error) {
		l, err := c.cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return l.Spec.RenewTime != nil && time.Since(l.Spec.RenewTime.Time) < 20*time.Second,
			fmt.Errorf("renewTime %v", l.Spec.RenewTime)
	})

	// No nodeName: the pod waits unbound until it is bound as kube-scheduler binds.
	pods := c.cs.CoreV1().Pods("default")
	p := apiPod(name, "", env.BusyboxImage, "sh", "-c", "echo skew-hello; exec sleep 3600")
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = pods.Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	if err := pods.Bind(ctx, &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Target:     v1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind %s to %s: %v", name, node, err)
	}
	got := c.waitPod(t, "default", name, "Running and Ready", 2*time.Minute, func(p *v1.Pod) bool {
		return isRunning(p) && podReady(p)
	})
	if got.Status.PodIP == "" || got.Status.HostIP != ip || !strings.HasPrefix(got.Status.ContainerStatuses[0].ContainerID, "containerd://") {
		t.Errorf("podIP %q hostIP %q (want %s) containerID %q", got.Status.PodIP, got.Status.HostIP, ip, got.Status.ContainerStatuses[0].ContainerID)
	}
	var projected bool
	for _, vol := range got.Spec.Volumes {
		projected = projected || (strings.HasPrefix(vol.Name, "kube-api-access-") && vol.Projected != nil)
	}
	if !projected {
		t.Errorf("the v1.36 ServiceAccount admission added no kube-api-access projected volume: %+v", got.Spec.Volumes)
	}

	testenv.WaitFor(t, 30*time.Second, "the pod's logs through the v1.36 API server", func() (bool, error) {
		out, err := pods.GetLogs(name, &v1.PodLogOptions{}).DoRaw(ctx)
		return err == nil && strings.Contains(string(out), "skew-hello"), fmt.Errorf("%q: %v", out, err)
	})
	// kubectl v1.36 exec through the v1.36 API server; the token the agent
	// asked of v1.36's TokenRequest is in the container.
	out, err := exec.Command(skew.Kubectl, "--kubeconfig", skew.AdminKubeconfig, "--request-timeout", "30s",
		"exec", name, "--", "cat", "/var/run/secrets/kubernetes.io/serviceaccount/namespace",
		"/var/run/secrets/kubernetes.io/serviceaccount/token").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "default") || len(out) < len("default")+100 {
		t.Errorf("kubectl exec cat the service account namespace and token = %q, %v", out, err)
	}

	if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, name+" deleted from the API", func() (bool, error) {
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}
