package testenv

import (
	"os"
	"syscall"
	"testing"

	"github.com/actorlet/actorlet/internal/mountinfo"
)

// UnmountAtCleanup makes the test unmount, when it ends, whatever is still
// mounted at or below dir: an agent stopped with its pods running leaves
// their volumes mounted (secret, projected and downwardAPI volumes are a
// tmpfs each, as upstream's; memory emptyDirs too), as the upstream
// kubelet does, and the next agent adopts or sweeps them. A test's
// temporary directory cannot be removed over a mount. Call it after dir's
// t.TempDir and before starting the agent: cleanups run last-in first-out,
// so the agent is stopped first, then the mounts go, then the directory.
// Mounts are detached (MNT_DETACH), so one a runtime still holds goes too.
func UnmountAtCleanup(t testing.TB, dir string) {
	t.Helper()
	t.Cleanup(func() {
		for _, p := range mountsUnder(t, dir) {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL && err != syscall.ENOENT {
				t.Errorf("unmount %s left by the test: %v", p, err)
			}
		}
	})
}

// mountsUnder lists the mount points at or below dir in this process's
// mount table, the deepest first.
func mountsUnder(t testing.TB, dir string) []string {
	if _, err := os.Stat(mountinfo.Self); os.IsNotExist(err) {
		return nil // not Linux: nothing this agent mounted
	}
	points, err := mountinfo.PointsUnder(mountinfo.Self, dir)
	if err != nil {
		t.Errorf("mount table: %v", err)
	}
	return points
}
