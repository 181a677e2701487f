package testenv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestSkewVersionPinned keeps the skew version in one place in effect:
// SkewVersion is what deploy/controlplane-v1.<minor>/go.mod pins and what
// the Makefile's test-binaries builds, and it is older than the main pin.
func TestSkewVersionPinned(t *testing.T) {
	root := RepoRoot(t)
	m := regexp.MustCompile(`^v1\.(\d+)\.\d+$`).FindStringSubmatch(SkewVersion)
	if m == nil {
		t.Fatalf("SkewVersion %q is not v1.X.Y", SkewVersion)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "deploy", "controlplane-v1."+m[1], "go.mod"))
	if err != nil {
		t.Fatalf("the skew module: %v", err)
	}
	if !regexp.MustCompile(`(?m)^require k8s\.io/kubernetes ` + regexp.QuoteMeta(SkewVersion) + `$`).Match(gomod) {
		t.Errorf("deploy/controlplane-v1.%s/go.mod does not require k8s.io/kubernetes %s", m[1], SkewVersion)
	}
	if !regexp.MustCompile(`(?m)^module github\.com/actorlet/actorlet/deploy/controlplane-v1\.` + m[1] + `$`).Match(gomod) {
		t.Errorf("deploy/controlplane-v1.%s/go.mod: module path is not .../deploy/controlplane-v1.%s", m[1], m[1])
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^SKEW_K8S_VERSION \?= ` + regexp.QuoteMeta(SkewVersion) + `$`).Match(mk) {
		t.Errorf("the Makefile's SKEW_K8S_VERSION is not %s", SkewVersion)
	}
	if pinned := pinnedKubernetesVersion(t); pinned == SkewVersion {
		t.Errorf("SkewVersion %s is the main pin, not an older control plane", SkewVersion)
	}
}

// TestSkewVersionRefused: a version with no module, or no version at all,
// is a usage error (exit 2) naming the versions there are, before
// anything is built or started.
func TestSkewVersionRefused(t *testing.T) {
	root := RepoRoot(t)
	for _, v := range []string{"v1.20.0", "latest"} {
		t.Run(v, func(t *testing.T) {
			_, stderr, err := runScriptEnv(root, "controlplane.sh", []string{
				"ACTORLET_K8S_VERSION=" + v, "ACTORLET_CONTROLPLANE_DIR=" + t.TempDir(),
			}, time.Minute, "status")
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) || exitErr.ExitCode() != 2 {
				t.Fatalf("ACTORLET_K8S_VERSION=%s controlplane.sh status: %v, want exit 2\n%s", v, err, stderr)
			}
			if !strings.Contains(stderr, v) {
				t.Errorf("the error does not name %s: %s", v, stderr)
			}
			if v == "v1.20.0" && (!strings.Contains(stderr, SkewVersion) || !strings.Contains(stderr, pinnedKubernetesVersion(t))) {
				t.Errorf("the error does not name the versions there are (%s, %s): %s", pinnedKubernetesVersion(t), SkewVersion, stderr)
			}
		})
	}
}
