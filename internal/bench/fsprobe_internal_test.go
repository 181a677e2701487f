package bench

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestProbeFileSystemMeasuresAndCleansUp(t *testing.T) {
	dir := t.TempDir()
	fs, err := probeFileSystem(dir)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if want := fsTypeName(int64(st.Type)); fs.Type != want || fs.Type == "" {
		t.Errorf("type %q, want %q", fs.Type, want)
	}
	// 400 inodes cost some CPU on any file system: at least the two
	// syscalls of each.
	if fs.InodeCPUMicros <= 0 {
		t.Errorf("inode CPU %v us, want > 0", fs.InodeCPUMicros)
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the probe left %d entries in %s", len(left), dir)
	}
}

func TestProbeFileSystemRefusesAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := probeFileSystem(file); err == nil {
		t.Fatal("probing a regular file as a directory: no error")
	}
	if fs := measureFileSystem(file, slog.New(slog.DiscardHandler)); fs != nil {
		t.Fatalf("measureFileSystem of a file = %+v, want nil (and a warning)", fs)
	}
}

func TestFSTypeName(t *testing.T) {
	for magic, want := range map[int64]string{
		unix.EXT4_SUPER_MAGIC: "ext4", unix.TMPFS_MAGIC: "tmpfs", unix.XFS_SUPER_MAGIC: "xfs",
		unix.BTRFS_SUPER_MAGIC: "btrfs", unix.OVERLAYFS_SUPER_MAGIC: "overlay", 0x1234: "0x1234",
	} {
		if got := fsTypeName(magic); got != want {
			t.Errorf("fsTypeName(%#x) = %q, want %q", magic, got, want)
		}
	}
}
