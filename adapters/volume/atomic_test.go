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
			if err := f.WriteAtomic(dir, asFiles(s.files), nil); err != nil {
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
		if err := f.WriteAtomic(t.TempDir(), map[string]podspec.VolumeFile{name: {}}, nil); err == nil {
			t.Errorf("%q accepted", name)
		}
	}
	if err := f.RemoveAll("/"); err == nil {
		t.Error("RemoveAll(/) accepted")
	}
}
