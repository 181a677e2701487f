package volume

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/actorlet/actorlet/internal/testenv"
	"github.com/actorlet/actorlet/podspec"
)

// dataDirName matches a timestamped data directory's name, which differs
// from one write to the next.
var dataDirName = regexp.MustCompile(`\.\.\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d\.\d+`)

// tree describes everything under dir as a user sees it: per entry its
// type and mode, owner, symlink target or content, with the data
// directory's name replaced by "..TS".
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		rel, _ := filepath.Rel(dir, p)
		line := fmt.Sprintf("%s %s %d:%d", dataDirName.ReplaceAllString(rel, "..TS"), info.Mode(), st.Uid, st.Gid)
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + dataDirName.ReplaceAllString(target, "..TS")
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += " " + string(b)
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestFreshWriteIsTheUpdatesResult checks that the first write of a
// volume, which makes its directory and takes the short way, leaves on
// disk exactly what the full update leaves in an existing empty directory
// (same entries, modes, owners, links), under any umask; and that the
// next write, an update, gives the same again in both.
func TestFreshWriteIsTheUpdatesResult(t *testing.T) {
	testenv.NeedRoot(t)
	files := map[string]podspec.VolumeFile{
		"token": {Data: []byte("t"), Mode: 0o600, FsUser: ptr(int64(1234))}, "ca.crt": {Data: []byte("ca"), Mode: 0o644},
		"sub/deep/x": {Data: []byte("x"), Mode: 0o755}, "sub/y": {Data: []byte("y"), Mode: 0o400}, "./z": {Data: []byte("z"), Mode: 0o666},
	}
	update := map[string]podspec.VolumeFile{"token": {Data: []byte("t2"), Mode: 0o600, FsUser: ptr(int64(1234))}, "other/n": {Data: []byte("n"), Mode: 0o644}}
	tests := []struct {
		name    string
		umask   int
		fsGroup *int64
		memory  bool // the fresh volume on a tmpfs of its own
	}{
		{name: "umask 022", umask: 0o022},
		{name: "umask 077", umask: 0o077},
		{name: "umask 0", umask: 0},
		{name: "fsGroup, umask 022", umask: 0o022, fsGroup: ptr(int64(2345))},
		{name: "fsGroup, umask 077", umask: 0o077, fsGroup: ptr(int64(2345))},
		{name: "tmpfs, umask 022", umask: 0o022, memory: true},
		{name: "tmpfs, umask 077", umask: 0o077, memory: true},
		{name: "tmpfs, fsGroup, umask 077", umask: 0o077, fsGroup: ptr(int64(2345)), memory: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer setUmask(tt.umask)()
			var f Files
			base := t.TempDir()
			t.Cleanup(func() { _ = unmountUnder(base) })
			fresh := filepath.Join(base, "pods", "uid", "volumes", "kubernetes.io~projected", "vol")
			full := filepath.Join(t.TempDir(), "vol")
			// An existing (empty) directory takes the update's way.
			if err := os.Mkdir(full, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(full, 0o755); err != nil {
				t.Fatal(err)
			}
			for i, set := range []map[string]podspec.VolumeFile{files, update} {
				for _, dir := range []string{fresh, full} {
					if err := f.WriteAtomic(dir, set, tt.fsGroup, tt.memory && dir == fresh, 1<<20); err != nil {
						t.Fatal(err)
					}
				}
				if mounted, err := isTmpfsMount(fresh); err != nil || mounted != tt.memory {
					t.Fatalf("tmpfs mounted: %v (%v), want %v", mounted, err, tt.memory)
				}
				got, want := tree(t, fresh), tree(t, full)
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Fatalf("write %d: the fresh volume holds\n%s\nthe updated one\n%s", i, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				if i == 0 && !strings.Contains(strings.Join(got, "\n"), "\nz L") {
					t.Fatalf("no link z:\n%s", strings.Join(got, "\n"))
				}
			}
		})
	}
}
