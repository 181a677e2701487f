package e2e

import (
	"strings"
	"testing"

	"github.com/actorlet/actorlet/internal/testenv"
)

// set2 is the name of the test that runs the representative set on
// containerd 2.x; its subtests' agents get line 2 (containerdFor).
const set2 = "TestE2EContainerd2Set"

// containerd2Set: representative containerd end-to-end tests, run again on
// containerd 2.x by TestE2EContainerd2Set where the shared containerd is
// Debian's 1.6 (make test): the pod network (CNI bridge, pod IP), the
// lifecycle (exit codes, restarts, removal), exec and its streams, and
// the security context (runc's seccomp, capabilities, users).
// docs/CONTRIBUTING.md ("containerd 2.x") says why these and what each
// costs; `make test-containerd2` runs every containerd test on line 2.
var containerd2Set = []struct {
	name string
	test func(*testing.T)
}{
	{"HTTPDServesOnPodIP", TestE2EContainerdHTTPDServesOnPodIP},
	{"Lifecycle", TestE2EContainerdLifecycle},
	{"Exec", TestE2EExecContainerd},
	{"Security", TestE2EContainerdSecurity},
}

// containerdFor is the containerd a test's agent runs on: containerd 2.x
// (the set's own, in its own state dir, bridge and subnet) for the
// subtests of TestE2EContainerd2Set, else the shared one
// (ACTORLET_CONTAINERD_LINE).
func containerdFor(t *testing.T) testenv.ContainerdEnv {
	t.Helper()
	if strings.HasPrefix(t.Name(), set2+"/") {
		return containerd2(t)
	}
	return testenv.ContainerdInfo(t)
}

// containerd2 is the line-2 containerd of the set, brought up by its
// parent test (one for every subtest).
var containerd2 func(t *testing.T) testenv.ContainerdEnv

// The representative set on containerd 2.x (v2.4.2 and runc v1.5.3 built
// from the module proxy) beside Debian's 1.6, so that `make test` covers
// both lines; with ACTORLET_CONTAINERD_LINE=2 every containerd test runs on
// 2.x already and the set is not run twice.
func TestE2EContainerd2Set(t *testing.T) {
	if testenv.ContainerdLine() == 2 {
		t.Skip("the shared containerd is line 2 (ACTORLET_CONTAINERD_LINE=2): the set's tests run on it by their own names")
	}
	env := testenv.ContainerdOnLine(t, 2, "alset2", "10.244.185.0/24")
	containerd2 = func(*testing.T) testenv.ContainerdEnv { return env }
	t.Cleanup(func() { containerd2 = nil })
	for _, tc := range containerd2Set {
		t.Run(tc.name, tc.test)
	}
}
