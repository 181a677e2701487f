package volume

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/actorlet/actorlet/podspec"

	"github.com/actorlet/actorlet/internal/testenv"
)

func ptr[T any](v T) *T { return &v }

// owner is the owning user and group of path (symlinks followed).
func owner(t *testing.T, path string) (uid, gid uint32) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := info.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid
}

type wantFile struct {
	mode string // os.FileMode.String() of the file a user sees
	uid  uint32
	gid  uint32
}

func TestWriteAtomicModesAndOwnership(t *testing.T) {
	testenv.NeedRoot(t)
	defer setUmask(0o077)() // modes must not depend on the umask
	tests := []struct {
		name    string
		files   map[string]podspec.VolumeFile
		fsGroup *int64
		want    map[string]wantFile // by path; "." is the volume directory
	}{
		{name: "modes as given, whatever the umask",
			files: map[string]podspec.VolumeFile{"a": {Mode: 0o666}, "b": {Mode: 0o400}, "sub/c": {Mode: 0o755}},
			want: map[string]wantFile{"a": {mode: "-rw-rw-rw-"}, "b": {mode: "-r--------"}, "sub/c": {mode: "-rwxr-xr-x"},
				"sub": {mode: "drwxr-xr-x"}, ".": {mode: "drwxr-xr-x"}}},
		{name: "fsGroup: group-readable files, setgid directories",
			files:   map[string]podspec.VolumeFile{"a": {Mode: 0o644}, "b": {Mode: 0o400}, "sub/c": {Mode: 0o600}},
			fsGroup: ptr(int64(1234)),
			want: map[string]wantFile{"a": {mode: "-rw-r--r--", gid: 1234}, "b": {mode: "-r--r-----", gid: 1234},
				"sub/c": {mode: "-rw-r-----", gid: 1234}, "sub": {mode: "dgrwxr-xr-x", gid: 1234}, ".": {mode: "dgrwxr-xr-x", gid: 1234}}},
		{name: "a token owned by the pod's user, read by its group",
			files:   map[string]podspec.VolumeFile{"token": {Mode: 0o600, FsUser: ptr(int64(1234))}},
			fsGroup: ptr(int64(2345)),
			want:    map[string]wantFile{"token": {mode: "-rw-r-----", uid: 1234, gid: 2345}}},
	}
	for _, tt := range tests {
		for _, memory := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, memory %v", tt.name, memory), func(t *testing.T) {
				base := t.TempDir()
				dir := filepath.Join(base, "vol")
				var f Files
				t.Cleanup(func() { _ = unmountUnder(base) })
				// Twice: a rewrite gives the same result.
				for range 2 {
					if err := f.WriteAtomic(dir, tt.files, tt.fsGroup, memory, 1<<20); err != nil {
						t.Fatal(err)
					}
				}
				if mounted, err := isTmpfsMount(dir); err != nil || mounted != memory {
					t.Fatalf("tmpfs mounted: %v (%v), want %v", mounted, err, memory)
				}
				checkFiles(t, dir, tt.want)
			})
		}
	}
}

// checkFiles checks the mode and owner of files under dir (by path; "."
// is dir).
func checkFiles(t *testing.T, dir string, want map[string]wantFile) {
	t.Helper()
	for name, w := range want {
		p := filepath.Join(dir, name)
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().String(); got != w.mode {
			t.Errorf("%s: mode %s, want %s", name, got, w.mode)
		}
		if uid, gid := owner(t, p); uid != w.uid || gid != w.gid {
			t.Errorf("%s: owner %d:%d, want %d:%d", name, uid, gid, w.uid, w.gid)
		}
	}
}

func TestEmptyDir(t *testing.T) {
	testenv.NeedRoot(t)
	defer setUmask(0o022)()
	tests := []struct {
		name     string
		memory   bool
		size     int64
		fsGroup  *int64
		mode     string
		gid      uint32
		sizeKiB  int64 // of the tmpfs; 0: not a tmpfs
		writeGID uint32
	}{
		{name: "on disk: 0777 whatever the umask", mode: "drwxrwxrwx"},
		{name: "on disk with fsGroup: setgid, new files get the group", fsGroup: ptr(int64(123)), mode: "dgrwxrwxrwx", gid: 123, writeGID: 123},
		{name: "memory: a tmpfs of the size asked", memory: true, size: 10 << 20, mode: "dtrwxrwxrwx", sizeKiB: 10240},
		{name: "memory with fsGroup", memory: true, size: 1 << 20, fsGroup: ptr(int64(123)), mode: "dgtrwxrwxrwx", gid: 123, sizeKiB: 1024, writeGID: 123},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			dir := filepath.Join(base, "volumes", "kubernetes.io~empty-dir", "v")
			var f Files
			t.Cleanup(func() { _ = unmountUnder(base) })
			// Twice: set up again, nothing is mounted twice.
			for range 2 {
				if err := f.EmptyDir(dir, tt.memory, tt.size, tt.fsGroup); err != nil {
					t.Fatal(err)
				}
			}
			info, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := info.Mode().String(); got != tt.mode {
				t.Errorf("mode %s, want %s", got, tt.mode)
			}
			if _, gid := owner(t, dir); gid != tt.gid {
				t.Errorf("group %d, want %d", gid, tt.gid)
			}
			n := 0
			ms, err := mounts()
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				if m.point == dir {
					n++
				}
			}
			if tt.sizeKiB > 0 {
				var st syscall.Statfs_t
				if err := syscall.Statfs(dir, &st); err != nil {
					t.Fatal(err)
				}
				if got := int64(st.Blocks) * st.Bsize / 1024; n != 1 || got != tt.sizeKiB {
					t.Errorf("%d mounts of %d KiB, want one tmpfs of %d KiB", n, got, tt.sizeKiB)
				}
			} else if n != 0 {
				t.Errorf("%d mounts on a disk-backed emptyDir", n)
			}
			// A file a container writes gets the volume's group.
			p := filepath.Join(dir, "new")
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, gid := owner(t, p); gid != tt.writeGID {
				t.Errorf("new file's group %d, want %d", gid, tt.writeGID)
			}
			// Teardown unmounts and removes.
			if err := f.RemoveAll(filepath.Join(base, "volumes")); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(base, "volumes")); !os.IsNotExist(err) {
				t.Errorf("volumes still there: %v", err)
			}
			if mounted, _ := isTmpfsMount(dir); mounted {
				t.Error("tmpfs still mounted")
			}
		})
	}
}

// A tmpfs that cannot be unmounted (busy) keeps everything: nothing is
// removed through a mount.
func TestRemoveAllKeepsWhatStaysMounted(t *testing.T) {
	testenv.NeedRoot(t)
	base := t.TempDir()
	dir := filepath.Join(base, "volumes", "kubernetes.io~empty-dir", "v")
	var f Files
	if err := f.EmptyDir(dir, true, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unmountUnder(base) })
	file := filepath.Join(dir, "data")
	if err := os.WriteFile(file, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A process working in the tmpfs keeps it busy: here, an open
	// directory used as the working directory of a child is not needed,
	// an open file is enough.
	busy, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	err = f.RemoveAll(filepath.Join(base, "volumes"))
	busy.Close()
	if err == nil {
		t.Fatal("RemoveAll of a busy tmpfs succeeded")
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep" {
		t.Fatalf("the tmpfs's file: %q, %v", b, err)
	}
	if err := f.RemoveAll(filepath.Join(base, "volumes")); err != nil {
		t.Fatalf("RemoveAll once no longer busy: %v", err)
	}
}

// A mount deeper in a volume than this package's own (a container's,
// propagated back through Bidirectional: here, a directory from outside
// bound into a disk emptyDir) is unmounted, not deleted through: the
// outside files stay, and the volumes go.
func TestRemoveAllUnmountsADeeperMount(t *testing.T) {
	testenv.NeedRoot(t)
	base, outside := t.TempDir(), t.TempDir()
	t.Cleanup(func() { _ = unmountUnder(base) })
	var f Files
	vol := filepath.Join(base, "volumes", "kubernetes.io~empty-dir", "v")
	if err := f.EmptyDir(vol, false, 0, nil); err != nil {
		t.Fatal(err)
	}
	precious := filepath.Join(outside, "precious")
	if err := os.WriteFile(precious, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(vol, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(outside, deep, "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := f.RemoveAll(filepath.Join(base, "volumes")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(precious); err != nil || string(b) != "keep" {
		t.Fatalf("the file outside: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(base, "volumes")); !os.IsNotExist(err) {
		t.Errorf("volumes still there: %v", err)
	}
}
