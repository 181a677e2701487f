package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Faults at the edges: tests that stop a real part (the runtime, the API
// server) and start it again. They get their own instance of the part
// (their own state dir, bridge, subnet, ports), so the outage disturbs no
// other test and no other run on the machine that uses the shared one; it is
// removed when the test ends.

// PrivateContainerd is a containerd of its own for one test.
type PrivateContainerd struct {
	ContainerdEnv
	root string
	env  []string
}

// NewPrivateContainerd brings up a containerd in its own state dir, bridge
// and subnet through deploy/local/containerd.sh up, and takes it down (every
// container, the daemon, its shims, the bridge) when the test ends. It skips
// (or fails with CI=true) where the machine cannot run containerd, as
// Containerd does.
func NewPrivateContainerd(t testing.TB, bridge, subnet string) *PrivateContainerd {
	t.Helper()
	return newPrivateContainerd(t, 0, bridge, subnet)
}

// newPrivateContainerd is NewPrivateContainerd on containerd line line (0:
// the process's, ACTORLET_CONTAINERD_LINE).
func newPrivateContainerd(t testing.TB, line int, bridge, subnet string) *PrivateContainerd {
	t.Helper()
	if os.Geteuid() != 0 {
		cannotRun(t, "containerd", fmt.Sprintf("needs root (euid %d)", os.Geteuid()))
	}
	dir, err := os.MkdirTemp("", "actorlet-faults-containerd")
	if err != nil {
		t.Fatal(err)
	}
	c := &PrivateContainerd{root: RepoRoot(t), env: []string{
		"ACTORLET_CONTAINERD_DIR=" + dir, "ACTORLET_CNI_BRIDGE=" + bridge, "ACTORLET_CNI_SUBNET=" + subnet,
	}}
	if line != 0 {
		c.env = append(c.env, fmt.Sprintf("ACTORLET_CONTAINERD_LINE=%d", line))
	}
	t.Cleanup(func() {
		if _, stderr, err := runScriptEnv(c.root, "containerd.sh", c.env, 2*time.Minute, "down"); err != nil {
			t.Errorf("containerd.sh down (%s): %v\n%s", dir, err, tail(stderr, 20))
		}
		_ = os.Remove(dir + ".lock") // the script's lock file, beside its dir
	})
	vals := c.run(t, scriptTimeout, "containerd", "up")
	var ok bool
	if c.ContainerdEnv, ok = containerdEnv(vals); !ok {
		t.Fatalf("containerd.sh up: unexpected output %v", vals)
	}
	return c
}

// StopRuntime stops the containerd daemon only (containerd.sh
// stop-runtime): shims and containers keep running.
func (c *PrivateContainerd) StopRuntime(t testing.TB) {
	t.Helper()
	c.run(t, time.Minute, "containerd", "stop-runtime")
}

// StartRuntime starts the daemon again on the same state (containerd.sh
// start-runtime); it returns once the CRI serves.
func (c *PrivateContainerd) StartRuntime(t testing.TB) {
	t.Helper()
	c.run(t, time.Minute, "containerd", "start-runtime")
}

func (c *PrivateContainerd) run(t testing.TB, timeout time.Duration, name string, args ...string) map[string]string {
	t.Helper()
	return runPart(t, c.root, name+".sh", c.env, timeout, args...)
}

// PrivateControlPlane is a control plane of its own for one test.
type PrivateControlPlane struct {
	ControlPlaneEnv
	root string
	env  []string
}

// NewPrivateControlPlane brings up a control plane in its own state dir and
// on its own ports (the first tried at apiPort and etcdPort) through
// deploy/local/controlplane.sh up, and takes it down when the test ends. The
// binaries are those of the shared cache (built once per machine). It skips
// (or fails with CI=true) where the machine cannot run it, as ControlPlane
// does.
func NewPrivateControlPlane(t testing.TB, apiPort, etcdPort int) *PrivateControlPlane {
	t.Helper()
	dir, err := os.MkdirTemp("", "actorlet-faults-controlplane")
	if err != nil {
		t.Fatal(err)
	}
	c := &PrivateControlPlane{root: RepoRoot(t), env: []string{
		"ACTORLET_CONTROLPLANE_DIR=" + dir,
		fmt.Sprintf("ACTORLET_APISERVER_PORT=%d", apiPort), fmt.Sprintf("ACTORLET_ETCD_PORT=%d", etcdPort),
	}}
	t.Cleanup(func() {
		if _, stderr, err := runScriptEnv(c.root, "controlplane.sh", c.env, 2*time.Minute, "down"); err != nil {
			t.Errorf("controlplane.sh down (%s): %v\n%s", dir, err, tail(stderr, 20))
		}
		_ = os.Remove(dir + ".lock")
	})
	vals := runPart(t, c.root, "controlplane.sh", c.env, scriptBudget(t, controlPlaneTimeout), "up")
	c.ControlPlaneEnv = ControlPlaneEnv{AdminKubeconfig: vals["ADMIN_KUBECONFIG"], Kubectl: vals["KUBECTL"],
		APIServer: vals["APISERVER"], ClusterCA: vals["CLUSTER_CA"]}
	if c.AdminKubeconfig == "" || c.APIServer == "" || c.ClusterCA == "" {
		t.Fatalf("controlplane.sh up: unexpected output %v", vals)
	}
	return c
}

// NodeKubeconfig is the kubeconfig of node name (system:node:<name>).
func (c *PrivateControlPlane) NodeKubeconfig(t testing.TB, name string) string {
	t.Helper()
	path := runPart(t, c.root, "controlplane.sh", c.env, time.Minute, "node-kubeconfig", name)["NODE_KUBECONFIG"]
	if path == "" {
		t.Fatalf("controlplane.sh node-kubeconfig %s printed no NODE_KUBECONFIG", name)
	}
	return path
}

// StopAPIServer stops kube-apiserver only (controlplane.sh stop-apiserver):
// etcd, the controller manager and the scheduler keep running.
func (c *PrivateControlPlane) StopAPIServer(t testing.TB) {
	t.Helper()
	runPart(t, c.root, "controlplane.sh", c.env, time.Minute, "stop-apiserver")
}

// StartAPIServer starts kube-apiserver again on the same port, PKI and etcd
// (controlplane.sh start-apiserver); it returns once /readyz answers ok.
func (c *PrivateControlPlane) StartAPIServer(t testing.TB) {
	t.Helper()
	runPart(t, c.root, "controlplane.sh", c.env, 3*time.Minute, "start-apiserver")
}

// runPart runs a deploy script with env and returns its KEY=VALUE lines;
// exit 3 (the machine cannot run it) skips t, or fails it with CI=true; any
// other failure fails t.
func runPart(t testing.TB, root, script string, env []string, timeout time.Duration, args ...string) map[string]string {
	t.Helper()
	stdout, stderr, err := runScriptEnv(root, script, env, timeout, args...)
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr) && exitErr.ExitCode() == ExitCannotRun:
		cannotRun(t, script, tail(stderr, 5))
	case err != nil:
		t.Fatalf("%s %v: %v\n%s", script, args, err, tail(stderr, 30))
	}
	return parseLines(stdout)
}

// cannotRun skips t: the machine cannot run the part; with CI=true it fails.
func cannotRun(t testing.TB, part, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s needed but this machine cannot run it (CI=true): %s", part, why)
	}
	t.Skipf("skipping: this machine cannot run %s: %s", part, why)
}
