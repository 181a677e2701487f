package testenv

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// SkewVersion is the older control plane version the skew test joins:
// the previous minor of the pinned one (deploy/controlplane-v1.36).
const SkewVersion = "v1.36.4"

// skewPortOffset moves the skew control plane's first ports away from the
// shared one's (ACTORLET_APISERVER_PORT, ACTORLET_ETCD_PORT or their
// defaults), so that both can run at once without racing for a port.
const skewPortOffset = 100

// SkewControlPlane brings up a control plane of version (deploy/local/
// controlplane.sh up with ACTORLET_K8S_VERSION=version): etcd and
// kube-apiserver of that version only, the default ServiceAccount and
// kube-root-ca.crt made by the script. It has a state dir and ports of its
// own, never those of ControlPlane: ACTORLET_SKEW_CONTROLPLANE_DIR, or
// ACTORLET_CONTROLPLANE_DIR (default /tmp/actorlet-controlplane) with
// "-<version>" appended; its first ports are the shared one's plus 100. It
// is taken down when the test ends. A machine that cannot run it skips the
// test (fails under CI=true), as ControlPlane.
//
// A cold cache builds kube-apiserver and kubectl of that version first
// (minutes; see docs/KUBEADM.md, "Version skew").
func SkewControlPlane(t testing.TB, version string) SkewControlPlaneEnv {
	t.Helper()
	root := RepoRoot(t)
	dir := os.Getenv("ACTORLET_SKEW_CONTROLPLANE_DIR")
	if dir == "" {
		base := os.Getenv("ACTORLET_CONTROLPLANE_DIR")
		if base == "" {
			base = "/tmp/actorlet-controlplane"
		}
		dir = base + "-" + version
	}
	env := []string{"ACTORLET_K8S_VERSION=" + version, "ACTORLET_CONTROLPLANE_DIR=" + dir}
	for name, def := range map[string]int{"ACTORLET_APISERVER_PORT": 62443, "ACTORLET_ETCD_PORT": 62379} {
		p := def
		if v := os.Getenv(name); v != "" {
			var err error
			if p, err = strconv.Atoi(v); err != nil {
				t.Fatalf("%s=%q is not a port", name, v)
			}
		}
		env = append(env, name+"="+strconv.Itoa(p+skewPortOffset))
	}
	t.Cleanup(func() {
		if _, stderr, err := runScriptEnv(root, "controlplane.sh", env, 2*time.Minute, "down"); err != nil {
			t.Errorf("deploy/local/controlplane.sh down (skew %s): %v\n%s", version, err, tail(stderr, 20))
		}
	})
	stdout, stderr, err := runScriptEnv(root, "controlplane.sh", env, scriptBudget(t, controlPlaneTimeout), "up")
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr) && exitErr.ExitCode() == ExitCannotRun && os.Getenv("CI") == "true":
		t.Fatalf("the %s control plane is needed but this machine cannot run it (CI=true): %s", version, tail(stderr, 5))
	case errors.As(err, &exitErr) && exitErr.ExitCode() == ExitCannotRun:
		t.Skipf("skipping: this machine cannot run the local %s control plane: %s", version, tail(stderr, 5))
	case err != nil:
		t.Fatalf("ACTORLET_K8S_VERSION=%s deploy/local/controlplane.sh up: %v\n%s", version, err, tail(stderr, 30))
	}
	vals := parseLines(stdout)
	e := ControlPlaneEnv{
		AdminKubeconfig: vals["ADMIN_KUBECONFIG"],
		Kubectl:         vals["KUBECTL"],
		APIServer:       vals["APISERVER"],
		ClusterCA:       vals["CLUSTER_CA"],
	}
	if e.AdminKubeconfig == "" || e.Kubectl == "" || e.APIServer == "" || e.ClusterCA == "" {
		t.Fatalf("ACTORLET_K8S_VERSION=%s deploy/local/controlplane.sh up: unexpected output %q\n%s", version, stdout, tail(stderr, 30))
	}
	return SkewControlPlaneEnv{ControlPlaneEnv: e, Version: version, scriptEnv: env}
}

// SkewControlPlaneEnv is a control plane of SkewControlPlane.
type SkewControlPlaneEnv struct {
	ControlPlaneEnv
	Version   string   // its Kubernetes version
	scriptEnv []string // what deploy/local/controlplane.sh needs to find it
}

// NodeKubeconfig is the package's NodeKubeconfig for this control plane.
func (s SkewControlPlaneEnv) NodeKubeconfig(t testing.TB, name string) string {
	t.Helper()
	stdout, stderr, err := runScriptEnv(RepoRoot(t), "controlplane.sh", s.scriptEnv, time.Minute, "node-kubeconfig", name)
	if err != nil {
		t.Fatalf("deploy/local/controlplane.sh node-kubeconfig %s: %v\n%s", name, err, tail(stderr, 30))
	}
	path := parseLines(stdout)["NODE_KUBECONFIG"]
	if path == "" {
		t.Fatalf("deploy/local/controlplane.sh node-kubeconfig %s: unexpected output %q\n%s", name, stdout, tail(stderr, 30))
	}
	return path
}
