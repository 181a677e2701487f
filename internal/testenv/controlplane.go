package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
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

var controlPlane struct {
	once    sync.Once
	env     ControlPlaneEnv
	skipMsg string // the machine cannot run it
	failMsg string // it broke
}

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
	switch {
	case controlPlane.skipMsg != "" && os.Getenv("CI") == "true":
		t.Fatalf("control plane needed but this machine cannot run it (CI=true): %s", controlPlane.skipMsg)
	case controlPlane.skipMsg != "":
		t.Skipf("skipping: this machine cannot run the local control plane: %s", controlPlane.skipMsg)
	case controlPlane.failMsg != "":
		t.Fatalf("deploy/local/controlplane.sh up failed: %s", controlPlane.failMsg)
	}
	return controlPlane.env
}

// NodeKubeconfig returns the path of a kubeconfig for node name: a client
// certificate for system:node:<name> in group system:nodes, signed by the
// control plane's CA, as a kubelet would hold. It brings the control plane up
// (or skips) like ControlPlane.
func NodeKubeconfig(t testing.TB, name string) string {
	t.Helper()
	ControlPlane(t)
	root := RepoRoot(t)
	stdout, stderr, err := runControlPlaneScript(root, time.Minute, "node-kubeconfig", name)
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
	stdout, stderr, err := runControlPlaneScript(root, timeout, "up")
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr) && exitErr.ExitCode() == ExitCannotRun:
		controlPlane.skipMsg = tail(stderr, 5)
		return
	case errors.Is(err, context.DeadlineExceeded):
		controlPlane.failMsg = fmt.Sprintf("no answer within %v (the first run builds the binaries, 10-15 min: "+
			"run deploy/local/controlplane.sh build, or go test -timeout 30m)\n%s", timeout, tail(stderr, 30))
		return
	case err != nil:
		controlPlane.failMsg = fmt.Sprintf("%v\n%s", err, tail(stderr, 30))
		return
	}
	vals := parseLines(stdout)
	controlPlane.env = ControlPlaneEnv{
		AdminKubeconfig: vals["ADMIN_KUBECONFIG"],
		Kubectl:         vals["KUBECTL"],
		APIServer:       vals["APISERVER"],
		ClusterCA:       vals["CLUSTER_CA"],
	}
	if e := controlPlane.env; e.AdminKubeconfig == "" || e.Kubectl == "" || e.APIServer == "" || e.ClusterCA == "" {
		controlPlane.failMsg = fmt.Sprintf("unexpected output %q\n%s", stdout, tail(stderr, 30))
	}
}

// runControlPlaneScript runs deploy/local/controlplane.sh with args. A
// timeout is reported as an error wrapping context.DeadlineExceeded.
func runControlPlaneScript(root string, timeout time.Duration, args ...string) (stdout, stderr string, err error) {
	script := filepath.Join(root, "deploy", "local", "controlplane.sh")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, args...)
	cmd.Dir = root
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w: %v", ctx.Err(), err)
	}
	return out.String(), errb.String(), err
}
