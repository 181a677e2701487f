package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// The node API as a cluster sees it: kubectl logs and the node proxy go
// through the API server (kube-apiserver's kubelet client certificate,
// authorized by a SubjectAccessReview on nodes/proxy); a request straight
// to --port without credentials gets 401, with a ServiceAccount token
// without node rights 403, with the admin's client certificate 200.
func TestE2EClusterNodeAPIAuth(t *testing.T) {
	const node = "e2e-auth"
	c := newCluster(t)
	a := c.startReachableNode(t, node)
	ctx := context.Background()

	pod := apiPod("talker", node, simImage, "sh", "-c", "echo hello from actorlet; echo second line; sleep infinity")
	if _, err := c.cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = c.cs.CoreV1().Pods("default").Delete(context.Background(), "talker", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	c.waitPod(t, "default", "talker", "Running", time.Minute, isRunning)

	kubectl := func(args ...string) (string, error) {
		cmd := exec.Command(c.env.Kubectl, append([]string{"--kubeconfig", c.env.AdminKubeconfig, "--request-timeout", "20s"}, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return out.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
		}
		return out.String(), nil
	}

	// kubectl logs: API server -> https://127.0.0.1:<port>/containerLogs/...
	// as kube-apiserver-kubelet-client (system:kubelet-api-admin).
	testenv.WaitFor(t, 30*time.Second, "kubectl logs talker", func() (bool, error) {
		out, err := kubectl("logs", "talker")
		if err != nil {
			return false, err
		}
		return out == "hello from actorlet\nsecond line\n", fmt.Errorf("logs %q", out)
	})
	if out, err := kubectl("logs", "--tail=1", "talker"); err != nil || out != "second line\n" {
		t.Fatalf("kubectl logs --tail=1: %q %v", out, err)
	}

	// The node proxy: /api/v1/nodes/<node>/proxy/pods is the node API's /pods.
	out, err := kubectl("get", "--raw", "/api/v1/nodes/"+node+"/proxy/pods")
	if err != nil {
		t.Fatal(err)
	}
	var list v1.PodList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("proxy/pods: %v: %.200s", err, out)
	}
	found := false
	for _, p := range list.Items {
		found = found || p.Name == "talker"
	}
	if !found {
		t.Fatalf("proxy/pods does not list talker: %d pods", len(list.Items))
	}

	// Straight to --port.
	get := func(client *http.Client, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, a.mainURL("/pods"), nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if code, body := get(a.mainClientAs(nil), ""); code != http.StatusUnauthorized {
		t.Fatalf("no credentials: %d %q, want 401", code, body)
	}
	if code, body := get(a.mainClientAs(nil), "not-a-token"); code != http.StatusUnauthorized {
		t.Fatalf("a made-up token: %d %q, want 401", code, body)
	}
	token := serviceAccountToken(t, c, "default", "no-node-rights")
	code, body := get(a.mainClientAs(nil), token)
	if code != http.StatusForbidden || !strings.Contains(body, "user=system:serviceaccount:default:no-node-rights") ||
		!strings.Contains(body, "resource=nodes") {
		t.Fatalf("a ServiceAccount without node rights: %d %q, want 403 naming it", code, body)
	}
	if code, body := get(a.mainClient(), ""); code != http.StatusOK || !strings.Contains(body, `"talker"`) {
		t.Fatalf("admin client certificate: %d %.200q, want 200 with the pods", code, body)
	}
}

// startReachableNode starts a node the API server can proxy to and waits
// until it is Ready. The API server proxies to no loopback address
// (nodes/proxy answers "address not allowed"), so the node serves on the
// machine's own address.
func (c *cluster) startReachableNode(t *testing.T, node string) *agent {
	t.Helper()
	ip := nonLoopbackIPv4(t)
	a := c.startNode(t, node, agentOpts{extra: []string{"--node-ip", ip, "--address", ip}})
	a.host = ip
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	return a
}

// nonLoopbackIPv4 is the machine's first non-loopback IPv4 address.
func nonLoopbackIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	msg := "this machine has no non-loopback IPv4 address: the API server cannot proxy to the node"
	testenv.CannotRun(t, msg)
	return ""
}

// serviceAccountToken makes the ServiceAccount ns/name (no role bindings)
// and returns a token of it.
func serviceAccountToken(t *testing.T, c *cluster, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := c.cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	exp := int64(600)
	tr, err := c.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}
