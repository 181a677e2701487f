package host

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFileStore(t *testing.T) {
	s := FileStore{Path: filepath.Join(t.TempDir(), "device-plugins", "kubelet_internal_checkpoint")}
	b, err := s.Load()
	if err != nil || b != nil {
		t.Fatalf("Load of no checkpoint: %q, %v; want nil, nil", b, err)
	}
	for _, want := range []string{`{"v":1}`, `{"v":2}`} {
		if err := s.Save([]byte(want)); err != nil {
			t.Fatal(err)
		}
		if b, err := s.Load(); err != nil || string(b) != want {
			t.Fatalf("Load: %q, %v; want %s", b, err, want)
		}
	}
	entries, err := os.ReadDir(filepath.Dir(s.Path))
	if err != nil || len(entries) != 1 {
		t.Fatalf("the checkpoint dir holds %v (%v): temporary files left", entries, err)
	}
}
