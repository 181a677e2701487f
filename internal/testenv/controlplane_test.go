package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestControlPlane checks the control plane the kubelet tests rely on: the
// apiserver is ready at the pinned version, a node's own credentials may
// register its Node (Node authorizer + NodeRestriction) but not another node,
// and may not read a Secret no pod of theirs uses.
func TestControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: brings up a real control plane")
	}
	cp := ControlPlane(t)
	if !strings.HasPrefix(cp.APIServer, "https://127.0.0.1:") {
		t.Errorf("APISERVER = %q, want https on loopback", cp.APIServer)
	}
	if b, err := os.ReadFile(cp.ClusterCA); err != nil || !bytes.Contains(b, []byte("BEGIN CERTIFICATE")) {
		t.Errorf("CLUSTER_CA = %q: %v", cp.ClusterCA, err)
	}

	kubectl := func(kubeconfig, stdin string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(cp.Kubectl, append([]string{"--kubeconfig", kubeconfig, "--request-timeout", "20s"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return stdout.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return stdout.String(), nil
	}
	admin := func(stdin string, args ...string) string {
		t.Helper()
		out, err := kubectl(cp.AdminKubeconfig, stdin, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	if got := admin("", "get", "--raw", "/readyz"); strings.TrimSpace(got) != "ok" {
		t.Fatalf("/readyz = %q", got)
	}
	var version struct {
		Client struct{ GitVersion string } `json:"clientVersion"`
		Server struct{ GitVersion string } `json:"serverVersion"`
	}
	if err := json.Unmarshal([]byte(admin("", "version", "-o", "json")), &version); err != nil {
		t.Fatalf("kubectl version -o json: %v", err)
	}
	want := pinnedKubernetesVersion(t)
	if version.Server.GitVersion != want || version.Client.GitVersion != want {
		t.Fatalf("kubectl version: client %q server %q, want %s (pinned in deploy/controlplane/go.mod)",
			version.Client.GitVersion, version.Server.GitVersion, want)
	}

	// Unique per run: the control plane outlives the test process.
	name := fmt.Sprintf("testenv-%d", time.Now().UnixNano())
	other := name + "-other"
	secret := name + "-secret"
	t.Cleanup(func() {
		_, _ = kubectl(cp.AdminKubeconfig, "", "delete", "node", name, other, "--ignore-not-found", "--wait=false")
		_, _ = kubectl(cp.AdminKubeconfig, "", "delete", "secret", secret, "-n", "kube-system", "--ignore-not-found", "--wait=false")
	})
	node := NodeKubeconfig(t, name)
	if again := NodeKubeconfig(t, name); again != node {
		t.Errorf("NodeKubeconfig(%s) = %s, then %s", name, node, again)
	}

	nodeYAML := func(n string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n  labels:\n    kubernetes.io/hostname: %s\n    kubernetes.io/os: linux\n", n, n)
	}
	if _, err := kubectl(node, nodeYAML(name), "create", "-f", "-"); err != nil {
		t.Fatalf("node %s could not register its own Node: %v", name, err)
	}
	if got, err := kubectl(node, "", "get", "node", name, "-o", "jsonpath={.metadata.name}"); err != nil || got != name {
		t.Fatalf("node %s reading its Node: %q, %v", name, got, err)
	}
	if _, err := kubectl(node, nodeYAML(other), "create", "-f", "-"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("node %s creating Node %s: err = %v, want Forbidden (NodeRestriction)", name, other, err)
	}

	admin("", "create", "secret", "generic", secret, "-n", "kube-system", "--from-literal=k=v")
	if _, err := kubectl(node, "", "get", "secret", secret, "-n", "kube-system"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("node %s reading Secret kube-system/%s: err = %v, want Forbidden (Node authorizer)", name, secret, err)
	}
}

// pinnedKubernetesVersion is the k8s.io/kubernetes version deploy/controlplane/go.mod requires.
func pinnedKubernetesVersion(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join(RepoRoot(t), "deploy", "controlplane", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "require" && fields[1] == "k8s.io/kubernetes" {
			return fields[2]
		}
		if len(fields) >= 2 && fields[0] == "k8s.io/kubernetes" && strings.HasPrefix(fields[1], "v") {
			return fields[1]
		}
	}
	t.Fatal("deploy/controlplane/go.mod does not require k8s.io/kubernetes")
	return ""
}

func TestScriptBudget(t *testing.T) {
	if got := scriptBudget(&fakeTB{TB: t}, time.Hour); got != time.Hour {
		t.Errorf("without a deadline: %v, want 1h", got)
	}
	// go test's -timeout (default 10m) gives t a deadline: the budget ends before it.
	if _, ok := t.Deadline(); ok {
		if got := scriptBudget(t, 24*time.Hour); got >= 24*time.Hour || got < time.Second {
			t.Errorf("with a deadline: %v", got)
		}
	}
}
