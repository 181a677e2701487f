package testenv

import (
	"bufio"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
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
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		if os.IsNotExist(err) {
			return nil // not Linux: nothing this agent mounted
		}
		t.Errorf("mount table: %v", err)
		return nil
	}
	defer func() { _ = f.Close() }()
	dir = filepath.Clean(dir)
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMount(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	if err := sc.Err(); err != nil {
		t.Errorf("mount table: %v", err)
	}
	sort.SliceStable(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	return points
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
