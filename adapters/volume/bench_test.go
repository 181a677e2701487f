package volume

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/actorlet/actorlet/podspec"
)

// BenchmarkWriteAtomic writes a kube-api-access volume (token, ca.crt,
// namespace) as a pod's first setup does (fresh: its directories do not
// exist yet) and as a refresh does (update: the volume exists).
func BenchmarkWriteAtomic(b *testing.B) {
	files := map[string]podspec.VolumeFile{
		"token":     {Data: make([]byte, 1000), Mode: 0o644},
		"ca.crt":    {Data: make([]byte, 1100), Mode: 0o644},
		"namespace": {Data: []byte("default"), Mode: 0o644},
	}
	var f Files
	b.Run("fresh", func(b *testing.B) {
		root := b.TempDir()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			dir := filepath.Join(root, strconv.Itoa(i), "volumes", "kubernetes.io~projected", "kube-api-access")
			if err := f.WriteAtomic(dir, files, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("update", func(b *testing.B) {
		dir := filepath.Join(b.TempDir(), "vol")
		b.ReportAllocs()
		for b.Loop() {
			if err := f.WriteAtomic(dir, files, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
