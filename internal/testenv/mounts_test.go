package testenv

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestUnmountAtCleanup mounts two tmpfs, one inside the other, under a
// test's temporary directory, as an agent stopped with its pods leaves
// them: the cleanup unmounts both and the directory goes.
func TestUnmountAtCleanup(t *testing.T) {
	if os.Geteuid() != 0 {
		CannotRun(t, "mounting a tmpfs needs root")
	}
	var dir string
	t.Run("leaves mounts", func(t *testing.T) {
		dir = t.TempDir()
		UnmountAtCleanup(t, dir)
		outer := filepath.Join(dir, "pods", "uid", "volumes", "secret")
		inner := filepath.Join(outer, "nested")
		if err := os.MkdirAll(outer, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", outer, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatalf("mount: %v", err)
		}
		if err := os.Mkdir(inner, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", inner, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatalf("mount: %v", err)
		}
		if got := mountsUnder(t, dir); !slices.Equal(got, []string{inner, outer}) {
			t.Fatalf("mounts under the dir %v, want %v (deepest first)", got, []string{inner, outer})
		}
	})
	if got := mountsUnder(t, dir); len(got) != 0 {
		t.Errorf("still mounted after the cleanup: %v", got)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the temporary directory stayed: %v", err)
	}
}
