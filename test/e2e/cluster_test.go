package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/actorlet/actorlet/internal/testenv"
)

// cluster is the local control plane with an admin client.
type cluster struct {
	env       testenv.ControlPlaneEnv
	cs        kubernetes.Interface
	adminCert tls.Certificate // system:masters, from the admin kubeconfig
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	return clusterOf(t, testenv.ControlPlane(t))
}

// clusterOf is a cluster of the control plane env with an admin client.
func clusterOf(t *testing.T, env testenv.ControlPlaneEnv) *cluster {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", env.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	if err != nil {
		t.Fatalf("admin client certificate: %v", err)
	}
	return &cluster{env: env, cs: cs, adminCert: cert}
}

// startNode runs actorlet as node name in cluster mode, its node API
// secured as kubeadm configures a kubelet (no anonymous requests, client
// certificates of the cluster CA, bearer tokens through TokenReview,
// Webhook authorization), and removes the Node and its pods when the test
// ends. The agent's own requests to --port use the admin's certificate.
func (c *cluster) startNode(t *testing.T, name string, o agentOpts) *agent {
	t.Helper()
	kubeconfig := testenv.NodeKubeconfig(t, name)
	o.extra = append([]string{
		"--kubeconfig", kubeconfig, "--hostname-override", name,
		"--node-status-update-frequency", "1s", "--node-lease-duration-seconds", "8",
		"--sync-frequency", "5s",
		"--anonymous-auth=false", "--client-ca-file", c.env.ClusterCA,
		"--authentication-token-webhook", "--authorization-mode=Webhook",
	}, o.extra...)
	t.Cleanup(func() { c.cleanupNode(t, name) })
	a := startAgent(t, o)
	a.clientCert = &c.adminCert
	return a
}

func (c *cluster) cleanupNode(t *testing.T, name string) {
	ctx := context.Background()
	zero := int64(0)
	pods, err := c.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
	if err == nil {
		for _, p := range pods.Items {
			_ = c.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	}
	_ = c.cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
}

func (c *cluster) waitNodeReady(t *testing.T, name string, want v1.ConditionStatus, timeout time.Duration) *v1.Node {
	t.Helper()
	var node *v1.Node
	testenv.WaitFor(t, timeout, fmt.Sprintf("node %s Ready=%s", name, want), func() (bool, error) {
		n, err := c.cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = n
		for _, cond := range n.Status.Conditions {
			if cond.Type == v1.NodeReady {
				return cond.Status == want, fmt.Errorf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
			}
		}
		return false, fmt.Errorf("no Ready condition")
	})
	return node
}

func (c *cluster) waitPod(t *testing.T, ns, name, what string, timeout time.Duration, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var got *v1.Pod
	testenv.WaitFor(t, timeout, ns+"/"+name+": "+what, func() (bool, error) {
		p, err := c.cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = p
		return cond(p), fmt.Errorf("phase %s %s %q, %s", p.Status.Phase, p.Status.Reason, p.Status.Message, describe(p))
	})
	return got
}

func apiPod(name, node, image string, command ...string) *v1.Pod {
	grace := int64(2)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "e2e"}},
		Spec: v1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{
				Name: "main", Image: image, Command: command, ImagePullPolicy: v1.PullIfNotPresent,
			}},
		},
	}
}

func TestE2EClusterNodeRegistersAndLeaseRenews(t *testing.T) {
	c := newCluster(t)
	a := c.startNode(t, "e2e-reg", agentOpts{extra: []string{"--node-labels", "pool=e2e,tier=test"}})
	node := c.waitNodeReady(t, "e2e-reg", v1.ConditionTrue, time.Minute)
	for k, v := range map[string]string{"kubernetes.io/hostname": "e2e-reg", "kubernetes.io/os": "linux", "pool": "e2e", "tier": "test"} {
		if node.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, node.Labels[k], v)
		}
	}
	if node.Status.Capacity.Cpu().IsZero() || node.Status.Capacity.Memory().IsZero() || node.Status.Capacity.Pods().Value() != 110 {
		t.Errorf("capacity %v", node.Status.Capacity)
	}
	if node.Status.NodeInfo.ContainerRuntimeVersion == "" || node.Status.NodeInfo.KubeletVersion == "" || node.Status.NodeInfo.KernelVersion == "" {
		t.Errorf("node info %+v", node.Status.NodeInfo)
	}
	if len(node.Status.Addresses) == 0 || node.Status.Addresses[0].Address != "127.0.0.1" {
		t.Errorf("addresses %v", node.Status.Addresses)
	}
	// The lease is renewed: its renewTime moves forward.
	var first time.Time
	testenv.WaitFor(t, 30*time.Second, "lease renewed twice", func() (bool, error) {
		l, err := c.cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(context.Background(), "e2e-reg", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rt := renewTime(l)
		if first.IsZero() {
			first = rt
			return false, fmt.Errorf("first renewal at %s", rt)
		}
		return rt.After(first), fmt.Errorf("renewTime still %s", rt)
	})
	// A deleted Node object is registered again.
	if err := c.cs.CoreV1().Nodes().Delete(context.Background(), "e2e-reg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitNodeReady(t, "e2e-reg", v1.ConditionTrue, time.Minute)
	_ = a
}

func renewTime(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

func TestE2EClusterPodsRunAndDelete(t *testing.T) {
	c := newCluster(t)
	c.startNode(t, "e2e-pods", agentOpts{})
	c.waitNodeReady(t, "e2e-pods", v1.ConditionTrue, time.Minute)
	ctx := context.Background()

	// One pod bound by nodeName, one scheduled by kube-scheduler.
	bound := apiPod("bound", "e2e-pods", simImage, "sleep", "infinity")
	sched := apiPod("scheduled", "", simImage, "sleep", "infinity")
	sched.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "e2e-pods"}
	for _, p := range []*v1.Pod{bound, sched} {
		if _, err := c.cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"bound", "scheduled"} {
		p := c.waitPod(t, "default", name, "Running and Ready", time.Minute, func(p *v1.Pod) bool {
			return isRunning(p) && podReady(p)
		})
		if p.Status.PodIP == "" || p.Status.HostIP != "127.0.0.1" || p.Status.ContainerStatuses[0].ContainerID == "" {
			t.Errorf("%s: podIP %q hostIP %q containerID %q", name, p.Status.PodIP, p.Status.HostIP, p.Status.ContainerStatuses[0].ContainerID)
		}
	}

	// Graceful deletion: the pod goes away from the API once it is stopped.
	if err := c.cs.CoreV1().Pods("default").Delete(ctx, "bound", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "bound deleted from the API", func() (bool, error) {
		_, err := c.cs.CoreV1().Pods("default").Get(ctx, "bound", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func TestE2EClusterStaticPodGetsMirrorPod(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	writeManifest(t, dir, "static.yaml", podYAML("static", simImage, "", `["sleep", "infinity"]`))
	c.startNode(t, "e2e-static", agentOpts{manifestDir: dir})
	ctx := context.Background()
	name := "static-e2e-static"
	mirror := c.waitPod(t, "default", name, "mirror pod Running", time.Minute, isRunning)
	if mirror.Annotations["kubernetes.io/config.mirror"] == "" {
		t.Fatalf("mirror pod lacks the config.mirror annotation: %v", mirror.Annotations)
	}
	// Someone deletes the mirror pod: it comes back.
	if err := c.cs.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitPod(t, "default", name, "mirror pod recreated", time.Minute, func(p *v1.Pod) bool {
		return p.UID != mirror.UID && p.DeletionTimestamp == nil && isRunning(p)
	})
	// The manifest goes: the mirror pod goes.
	if err := os.Remove(filepath.Join(dir, "static.yaml")); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "mirror pod deleted", func() (bool, error) {
		_, err := c.cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

func TestE2ECluster100PodsAtOnce(t *testing.T) {
	c := newCluster(t)
	c.startNode(t, "e2e-many", agentOpts{extra: []string{"--max-pods", "150"}})
	c.waitNodeReady(t, "e2e-many", v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.cs.CoreV1().Pods("default").Create(ctx, apiPod(fmt.Sprintf("many-%03d", i), "e2e-many", simImage, "sleep", "infinity"), metav1.CreateOptions{})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, 3*time.Minute, "100 pods Running and Ready in the API", func() (bool, error) {
		pods, err := c.cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=e2e-many"})
		if err != nil {
			return false, err
		}
		ready := 0
		for i := range pods.Items {
			if isRunning(&pods.Items[i]) && podReady(&pods.Items[i]) {
				ready++
			}
		}
		return ready == 100, fmt.Errorf("%d of %d ready", ready, len(pods.Items))
	})
}

func TestE2EClusterRuntimeDownMakesNodeNotReady(t *testing.T) {
	c := newCluster(t)
	root := t.TempDir()
	sock := "unix://" + filepath.Join(root, "sim.sock")
	startSim := func() *exec.Cmd {
		cmd := exec.Command(actorletBin(t), "simruntime", "--listen", sock)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	sim := startSim()
	t.Cleanup(func() { _ = sim.Process.Kill(); _ = sim.Wait() })
	c.startNode(t, "e2e-rtdown", agentOpts{endpoint: sock, rootDir: filepath.Join(root, "agent"), extra: []string{"--pleg-relist-period", "200ms"}})
	c.waitNodeReady(t, "e2e-rtdown", v1.ConditionTrue, time.Minute)

	_ = sim.Process.Kill()
	_ = sim.Wait()
	n := c.waitNodeReady(t, "e2e-rtdown", v1.ConditionFalse, time.Minute)
	for _, cond := range n.Status.Conditions {
		if cond.Type == v1.NodeReady && !strings.Contains(cond.Message, "runtime") {
			t.Errorf("NotReady message %q does not name the runtime", cond.Message)
		}
	}
	sim = startSim()
	c.waitNodeReady(t, "e2e-rtdown", v1.ConditionTrue, time.Minute)
}

func TestE2EClusterBadKubeconfigIsAClearError(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(bad, []byte("this: is: not: a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(actorletBin(t), "--kubeconfig", bad, "--container-runtime-endpoint", "sim://",
		"--root-dir", t.TempDir(), "--port", "0", "--read-only-port", "0", "--healthz-port", "0")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("actorlet accepted a broken kubeconfig:\n%s", out)
	}
	if !strings.Contains(string(out), "kubeconfig") {
		t.Fatalf("error does not name the kubeconfig:\n%s", out)
	}
}
