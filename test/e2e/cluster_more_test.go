package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/actorlet/actorlet/internal/testenv"
)

// proxy is a TCP proxy in front of the API server that a test can cut, so
// one node loses the API server while the rest of the cluster keeps it.
type proxy struct {
	t      *testing.T
	target string
	addr   string
	mu     sync.Mutex
	l      net.Listener
	conns  map[net.Conn]bool
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target, conns: map[net.Conn]bool{}}
	p.addr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p.up()
	t.Cleanup(p.down)
	return p
}

func (p *proxy) up() {
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
}

func (p *proxy) serve(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[u] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
	_, _ = io.Copy(c, u)
	_ = c.Close()
}

// down closes the listener and every open connection.
func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		_ = p.l.Close()
		p.l = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// proxiedKubeconfig is the node's kubeconfig pointing at the proxy.
func proxiedKubeconfig(t *testing.T, name, proxyAddr string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(testenv.NodeKubeconfig(t, name))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + proxyAddr
	}
	out := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestE2EClusterAPIServerGoneWhileContainerCrashes(t *testing.T) {
	c := newCluster(t)
	const node = "e2e-apidown"
	p := newProxy(t, strings.TrimPrefix(c.env.APIServer, "https://"))
	kubeconfig := proxiedKubeconfig(t, node, p.addr)
	t.Cleanup(func() { c.cleanupNode(t, node) })
	a := startAgent(t, agentOpts{extra: []string{
		"--kubeconfig", kubeconfig, "--hostname-override", node, "--node-status-update-frequency", "1s",
		"--crashloop-backoff-initial", "1s", "--crashloop-backoff-max", "2s",
	}})
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	pod := apiPod("crashy", node, simImage, "sh", "-c", "sleep 3; exit 3")
	if _, err := c.cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitPod(t, "default", "crashy", "Running", time.Minute, isRunning)

	// The node loses the API server for 30 s; meanwhile the container
	// crashes and restarts (as /pods, the node's own view, shows).
	p.down()
	a.waitPod(time.Minute, "crashy", "restarted twice while the API server is unreachable", func(p *v1.Pod) bool {
		return p.Status.ContainerStatuses[0].RestartCount >= 2
	})
	api, err := c.cs.CoreV1().Pods("default").Get(ctx, "crashy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := api.Status.ContainerStatuses[0].RestartCount; n != 0 {
		t.Fatalf("the API saw restart count %d while cut off", n)
	}
	testenv.WaitFor(t, time.Minute, "30 s of API outage", func() (bool, error) {
		return a.logContains("pod status write failed"), nil
	})
	deadline := time.Now().Add(30 * time.Second)
	testenv.WaitFor(t, time.Minute, "the outage lasting 30 s", func() (bool, error) {
		return !time.Now().Before(deadline), nil
	})
	p.up()

	// Back: the API catches up with the node's view.
	local := a.waitPod(time.Minute, "crashy", "restarted", func(p *v1.Pod) bool { return p.Status.ContainerStatuses[0].RestartCount >= 2 })
	c.waitPod(t, "default", "crashy", "status caught up", time.Minute, func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount >= local.Status.ContainerStatuses[0].RestartCount &&
			cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode == 3
	})
}

func TestE2EClusterKubeAPIAccessVolume(t *testing.T) {
	c := newCluster(t)
	a := c.startNode(t, "e2e-sa", agentOpts{})
	c.waitNodeReady(t, "e2e-sa", v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	// As kubectl run makes it: the API server adds the kube-api-access
	// projected volume and its mount.
	p := apiPod("with-sa", "e2e-sa", simImage, "sleep", "infinity")
	created, err := c.cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var volName string
	for _, v := range created.Spec.Volumes {
		if strings.HasPrefix(v.Name, "kube-api-access-") {
			volName = v.Name
		}
	}
	if volName == "" {
		t.Fatalf("the API server added no kube-api-access volume: %v", created.Spec.Volumes)
	}
	c.waitPod(t, "default", "with-sa", "Running", time.Minute, isRunning)
	dir := filepath.Join(a.rootDir, "pods", string(created.UID), "volumes", "kubernetes.io~projected", volName)
	for name, check := range map[string]func(string) bool{
		"token":     func(s string) bool { return strings.Count(s, ".") == 2 }, // a JWT
		"ca.crt":    func(s string) bool { return strings.Contains(s, "BEGIN CERTIFICATE") },
		"namespace": func(s string) bool { return s == "default" },
	} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !check(string(b)) {
			t.Errorf("%s: %q %v", name, b, err)
		}
	}
	// Events as upstream, from the kubelet component.
	testenv.WaitFor(t, 30*time.Second, "Started event", func() (bool, error) {
		evs, err := c.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=with-sa"})
		if err != nil {
			return false, err
		}
		var reasons []string
		for _, e := range evs.Items {
			reasons = append(reasons, e.Source.Component+"/"+e.Reason)
			if e.Reason == "Started" && e.Source.Component == "kubelet" {
				return true, nil
			}
		}
		return false, fmt.Errorf("events %v", reasons)
	})
	// Deleting the pod removes its volumes.
	if err := c.cs.CoreV1().Pods("default").Delete(ctx, "with-sa", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "pod gone and volumes removed", func() (bool, error) {
		_, err := c.cs.CoreV1().Pods("default").Get(ctx, "with-sa", metav1.GetOptions{})
		_, statErr := os.Stat(dir)
		return apierrors.IsNotFound(err) && os.IsNotExist(statErr), fmt.Errorf("get: %v, dir: %v", err, statErr)
	})
}

func TestE2EClusterContainerdGracefulDeletion(t *testing.T) {
	c := newCluster(t)
	env := testenv.ContainerdInfo(t)
	c.startNode(t, "e2e-grace", agentOpts{endpoint: env.Endpoint})
	c.waitNodeReady(t, "e2e-grace", v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	// sleep as PID 1 ignores SIGTERM: the stop takes the whole grace period.
	p := apiPod("graceful", "e2e-grace", env.BusyboxImage, "sleep", "3600")
	grace := int64(4)
	p.Spec.TerminationGracePeriodSeconds = &grace
	if _, err := c.cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitPod(t, "default", "graceful", "Running", 2*time.Minute, isRunning)
	start := time.Now()
	if err := c.cs.CoreV1().Pods("default").Delete(ctx, "graceful", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "graceful deleted from the API", func() (bool, error) {
		_, err := c.cs.CoreV1().Pods("default").Get(ctx, "graceful", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
	// Correctness, not speed: the pod may not vanish before its grace
	// period allowed the container to be killed.
	if took := time.Since(start); took < time.Duration(grace)*time.Second {
		t.Fatalf("pod gone after %s, before its %ds grace period", took, grace)
	}
}

func TestE2EClusterConfigMapEnvAndVolume(t *testing.T) {
	c := newCluster(t)
	a := c.startNode(t, "e2e-cm", agentOpts{})
	c.waitNodeReady(t, "e2e-cm", v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "greeting", Namespace: "default"}, Data: map[string]string{"text": "hello from a configmap"}}
	_ = c.cs.CoreV1().ConfigMaps("default").Delete(ctx, "greeting", metav1.DeleteOptions{})
	if _, err := c.cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.cs.CoreV1().ConfigMaps("default").Delete(ctx, "greeting", metav1.DeleteOptions{}) })
	p := apiPod("cm-user", "e2e-cm", simImage, "sh", "-c", "echo $GREETING; sleep infinity")
	p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "GREETING", ValueFrom: &v1.EnvVarSource{
		ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "greeting"}, Key: "text"}}}}
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{
		ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "greeting"}}}})
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cfg", MountPath: "/etc/greeting"}}
	created, err := c.cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.waitPod(t, "default", "cm-user", "Running", time.Minute, isRunning)
	file := filepath.Join(a.rootDir, "pods", string(created.UID), "volumes", "kubernetes.io~configmap", "cfg", "text")
	if b, err := os.ReadFile(file); err != nil || string(b) != "hello from a configmap" {
		t.Fatalf("configMap volume file: %q %v", b, err)
	}
	a.waitLog(t, "cm-user", "main", "the env value in the container's log", func(log string) bool {
		return strings.Contains(log, "hello from a configmap")
	})
	// A pod referring to a ConfigMap that does not exist waits with
	// CreateContainerConfigError, as upstream.
	bad := apiPod("cm-missing", "e2e-cm", simImage, "sleep", "infinity")
	bad.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{
		ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Key: "k"}}}}
	if _, err := c.cs.CoreV1().Pods("default").Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitPod(t, "default", "cm-missing", "CreateContainerConfigError", time.Minute, func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "CreateContainerConfigError"
	})
}

// The user's path, with kubectl itself: run, wait, get -o wide, delete.
func TestE2EClusterKubectl(t *testing.T) {
	c := newCluster(t)
	c.startNode(t, "e2e-kubectl", agentOpts{})
	c.waitNodeReady(t, "e2e-kubectl", v1.ConditionTrue, time.Minute)
	kubectl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(c.env.Kubectl, append([]string{"--kubeconfig", c.env.AdminKubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := kubectl("get", "nodes", "e2e-kubectl", "--no-headers")
	if !strings.Contains(out, " Ready ") {
		t.Fatalf("kubectl get nodes: %q", out)
	}
	kubectl("run", "kweb", "--image", simImage, "--restart=Never",
		"--overrides", `{"spec":{"nodeSelector":{"kubernetes.io/hostname":"e2e-kubectl"},"terminationGracePeriodSeconds":2}}`,
		"--", "httpd", "-f", "-p", "8080")
	kubectl("wait", "--for=condition=Ready", "pod/kweb", "--timeout=60s")
	out = kubectl("get", "pod", "kweb", "-o", "wide", "--no-headers")
	fields := strings.Fields(out)
	if len(fields) < 7 || fields[2] != "Running" || !strings.HasPrefix(fields[5], "127.") || fields[6] != "e2e-kubectl" {
		t.Fatalf("kubectl get pods -o wide: %q", out)
	}
	// The pod IP answers HTTP (the sim's httpd listens on it for real).
	if code := statusOf(t)(http.Get("http://" + fields[5] + ":8080/")); code != http.StatusOK {
		t.Fatalf("GET pod IP: %d", code)
	}
	kubectl("delete", "pod", "kweb", "--wait=true", "--timeout=60s")
	if out := kubectl("get", "pods", "--field-selector", "spec.nodeName=e2e-kubectl", "--no-headers", "--ignore-not-found"); strings.Contains(out, "kweb") {
		t.Fatalf("pod still listed: %q", out)
	}
}

// TestE2EClusterRepeatedEventsAreCounted: a container that restarts is
// Created and Started again, and the node counts the repeats on one Event
// each, as upstream's recorder (kubectl describe: "x3 over 20s"), rather
// than writing an Event per start.
func TestE2EClusterRepeatedEventsAreCounted(t *testing.T) {
	c := newCluster(t)
	const node = "e2e-events"
	a := c.startNode(t, node, agentOpts{extra: []string{"--crashloop-backoff-initial", "1s", "--crashloop-backoff-max", "1s"}})
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	pod := apiPod("restarts", node, simImage, "sh", "-c", "exit 1")
	created, err := c.cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	started := func(uid types.UID) (evs []v1.Event, err error) {
		l, err := c.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=restarts,reason=Started"})
		if err != nil {
			return nil, err
		}
		for _, e := range l.Items {
			if e.InvolvedObject.UID == uid {
				evs = append(evs, e)
			}
		}
		return evs, nil
	}
	testenv.WaitFor(t, time.Minute, "one Started event counted 3 times", func() (bool, error) {
		evs, err := started(created.UID)
		if err != nil {
			return false, err
		}
		if len(evs) > 1 {
			t.Fatalf("%d Started Events for one container, want one counted: %v", len(evs), evs)
		}
		if len(evs) == 0 {
			return false, fmt.Errorf("no Started event")
		}
		e := evs[0]
		if e.Source.Component != "kubelet" || e.Source.Host != node || e.InvolvedObject.Kind != "Pod" || e.Message != "Started container main" {
			t.Fatalf("Started event %+v from %+v: %q", e.InvolvedObject, e.Source, e.Message)
		}
		return e.Count >= 3 && e.LastTimestamp.After(e.FirstTimestamp.Time), fmt.Errorf("count %d, first %v last %v", e.Count, e.FirstTimestamp, e.LastTimestamp)
	})
	// None was dropped at this rate, and the node says so.
	if m := a.metrics(); !strings.Contains(m, "\nactorlet_events_dropped_total 0\n") {
		t.Errorf("no actorlet_events_dropped_total 0 in /metrics:\n%s", m)
	}
}
