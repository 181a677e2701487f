package volume

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/actorlet/actorlet/podspec"
)

func asFiles(m map[string][]byte) map[string]podspec.VolumeFile {
	out := make(map[string]podspec.VolumeFile, len(m))
	for k, v := range m {
		out[k] = podspec.VolumeFile{Data: v, Mode: 0o644}
	}
	return out
}

func TestWriteAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	var f Files
	steps := []struct {
		name  string
		files map[string][]byte
		want  map[string]string // name -> content; absent names must be gone
		gone  []string
	}{
		{name: "first write", files: map[string][]byte{"token": []byte("a"), "ca.crt": []byte("ca")},
			want: map[string]string{"token": "a", "ca.crt": "ca"}},
		{name: "update and drop a key", files: map[string][]byte{"token": []byte("b"), "sub/ns": []byte("default")},
			want: map[string]string{"token": "b", "sub/ns": "default"}, gone: []string{"ca.crt"}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if err := f.WriteAtomic(dir, asFiles(s.files), nil, false, 0); err != nil {
				t.Fatal(err)
			}
			for name, want := range s.want {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil || string(b) != want {
					t.Fatalf("%s = %q, %v; want %q", name, b, err, want)
				}
			}
			for _, name := range s.gone {
				if _, err := os.Lstat(filepath.Join(dir, name)); !os.IsNotExist(err) {
					t.Fatalf("%s still exists (%v)", name, err)
				}
			}
			// Exactly one data directory remains besides the links.
			entries, _ := os.ReadDir(dir)
			data := 0
			for _, e := range entries {
				if e.IsDir() && len(e.Name()) > 2 && e.Name()[:2] == ".." {
					data++
				}
			}
			if data != 1 {
				t.Fatalf("%d data directories", data)
			}
		})
	}
}

func TestWriteAtomicRefusesEscapes(t *testing.T) {
	var f Files
	for _, name := range []string{"../x", "/etc/passwd", ""} {
		if err := f.WriteAtomic(t.TempDir(), map[string]podspec.VolumeFile{name: {}}, nil, false, 0); err == nil {
			t.Errorf("%q accepted", name)
		}
	}
	if err := f.RemoveAll("/"); err == nil {
		t.Error("RemoveAll(/) accepted")
	}
}

// A write of what the volume holds already changes nothing a reader or a
// watcher sees (same data directory, same files), as upstream; it puts
// back a user-visible link that was removed. A write that changes a
// content or drops a key swaps "..data" to a new data directory and
// removes the old one.
func TestWriteAtomicOnlyWritesChanges(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	var f Files
	data := func() string {
		t.Helper()
		target, err := os.Readlink(filepath.Join(dir, dataLink))
		if err != nil {
			t.Fatal(err)
		}
		return target
	}
	write := func(m map[string][]byte) {
		t.Helper()
		if err := f.WriteAtomic(dir, asFiles(m), nil, false, 0); err != nil {
			t.Fatal(err)
		}
	}
	first := map[string][]byte{"token": []byte("a"), "sub/ns": []byte("default")}
	write(first)
	before := data()
	token, err := os.Stat(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	write(first)
	if got := data(); got != before {
		t.Fatalf("an unchanged write swapped ..data: %s, then %s", before, got)
	}
	if again, err := os.Stat(filepath.Join(dir, "token")); err != nil || !os.SameFile(token, again) {
		t.Fatalf("an unchanged write replaced the token file (%v)", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sub", "ns")); err != nil || string(b) != "default" {
		t.Fatalf("sub/ns = %q, %v after the link was put back", b, err)
	}
	for _, step := range []struct {
		name  string
		files map[string][]byte
	}{
		{name: "a content changes", files: map[string][]byte{"token": []byte("b"), "sub/ns": []byte("default")}},
		{name: "a key is dropped", files: map[string][]byte{"token": []byte("b")}},
		{name: "a content grows", files: map[string][]byte{"token": []byte("bb")}},
		{name: "a content shrinks to nothing", files: map[string][]byte{"token": {}}},
	} {
		old := data()
		write(step.files)
		if got := data(); got == old {
			t.Fatalf("%s: ..data still %s", step.name, old)
		}
		if _, err := os.Stat(filepath.Join(dir, old)); !os.IsNotExist(err) {
			t.Fatalf("%s: the old data directory %s is left (%v)", step.name, old, err)
		}
		for name, want := range step.files {
			if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != string(want) {
				t.Fatalf("%s: %s = %q, %v; want %q", step.name, name, b, err, want)
			}
		}
	}
}
