package testenv

import (
	"fmt"
	"testing"
	"time"
)

// controlPlaneTimeout bounds deploy/local/controlplane.sh up: the first run
// builds kube-apiserver and friends from source (10-15 min on 2 cores).
const controlPlaneTimeout = 30 * time.Minute

// ControlPlaneEnv is what deploy/local/controlplane.sh up prints.
type ControlPlaneEnv struct {
	AdminKubeconfig string // ADMIN_KUBECONFIG: system:masters, certificates embedded
	Kubectl         string // KUBECTL: kubectl of the control plane's version
	APIServer       string // APISERVER: https://127.0.0.1:<port>
	// ClusterCA (CLUSTER_CA) is the CA that signed every client certificate
	// (admin, nodes, kube-apiserver's kubelet client): a kubelet's
	// --client-ca-file.
	ClusterCA string
}

var controlPlane part[ControlPlaneEnv]

// ControlPlane brings up the local control plane (etcd, kube-apiserver with
// Node,RBAC authorization and NodeRestriction, kube-controller-manager,
// kube-scheduler) through deploy/local/controlplane.sh up, once per test
// process, and returns what the script printed. When the machine cannot run it
// (script exit 3) the test is skipped with the reason, or fails when CI=true.
// Any other failure fails the test with the tail of the script's stderr.
//
// The first call on a machine builds the binaries (10-15 min; cached outside the
// repo afterwards), so run such tests with go test -timeout 30m or run
// `deploy/local/controlplane.sh build` first. The control plane stays up after
// the tests (fast re-runs); `deploy/local/controlplane.sh down` removes it.
func ControlPlane(t testing.TB) ControlPlaneEnv {
	t.Helper()
	root := RepoRoot(t)
	controlPlane.once.Do(func() { upControlPlane(root, scriptBudget(t, controlPlaneTimeout)) })
	return controlPlane.get(t, "control plane", "deploy/local/controlplane.sh")
}

// NodeKubeconfig returns the path of a kubeconfig for node name: a client
// certificate for system:node:<name> in group system:nodes, signed by the
// control plane's CA, as a kubelet would hold. It brings the control plane up
// (or skips) like ControlPlane.
func NodeKubeconfig(t testing.TB, name string) string {
	t.Helper()
	ControlPlane(t)
	root := RepoRoot(t)
	stdout, stderr, err := runScript(root, "controlplane.sh", time.Minute, "node-kubeconfig", name)
	if err != nil {
		t.Fatalf("deploy/local/controlplane.sh node-kubeconfig %s: %v\n%s", name, err, tail(stderr, 30))
	}
	path := parseLines(stdout)["NODE_KUBECONFIG"]
	if path == "" {
		t.Fatalf("deploy/local/controlplane.sh node-kubeconfig %s: unexpected output %q\n%s", name, stdout, tail(stderr, 30))
	}
	return path
}

// scriptBudget is limit, shortened to end a little before the test binary's
// -timeout so that a slow cold build fails with the script's output rather
// than a panic.
func scriptBudget(t testing.TB, limit time.Duration) time.Duration {
	d, ok := t.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return limit
	}
	deadline, ok := d.Deadline()
	if !ok {
		return limit
	}
	return max(min(limit, time.Until(deadline)-30*time.Second), time.Second)
}

func upControlPlane(root string, timeout time.Duration) {
	timeoutMsg := fmt.Sprintf("no answer within %v (the first run builds the binaries, 10-15 min: "+
		"run deploy/local/controlplane.sh build, or go test -timeout 30m)", timeout)
	controlPlane.up(root, "controlplane.sh", timeout, timeoutMsg, func(vals map[string]string) (ControlPlaneEnv, bool) {
		e := ControlPlaneEnv{
			AdminKubeconfig: vals["ADMIN_KUBECONFIG"],
			Kubectl:         vals["KUBECTL"],
			APIServer:       vals["APISERVER"],
			ClusterCA:       vals["CLUSTER_CA"],
		}
		return e, e.AdminKubeconfig != "" && e.Kubectl != "" && e.APIServer != "" && e.ClusterCA != ""
	})
}
