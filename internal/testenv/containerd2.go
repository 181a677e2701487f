package testenv

import (
	"os"
	"strconv"
	"testing"
)

// ContainerdLine is the line of the shared containerd (Containerd):
// ACTORLET_CONTAINERD_LINE, 1 (Debian's containerd 1.6) unless it says 2
// (containerd 2.x and runc built from the module proxy by
// deploy/local/containerd.sh build).
func ContainerdLine() int {
	if n, err := strconv.Atoi(os.Getenv("ACTORLET_CONTAINERD_LINE")); err == nil && n == 2 {
		return 2
	}
	return 1
}

// ContainerdOnLine is a containerd of line line (1 or 2) for a test that
// needs that line whatever the shared one runs (CDI needs 2): the shared
// containerd when it is of that line, else one of the test's own in its own
// state dir, bridge and subnet, taken down when the test ends (as
// NewPrivateContainerd). It skips (or fails with CI=true) where the machine
// cannot run it.
func ContainerdOnLine(t testing.TB, line int, bridge, subnet string) ContainerdEnv {
	t.Helper()
	if line != 1 && line != 2 {
		t.Fatalf("containerd line %d: want 1 or 2", line)
	}
	if ContainerdLine() == line {
		return ContainerdInfo(t)
	}
	return newPrivateContainerd(t, line, bridge, subnet).ContainerdEnv
}
