package volume

import (
	"maps"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/actorlet/actorlet/podspec"
)

// BenchmarkWriteAtomic writes a kube-api-access volume (token, ca.crt,
// namespace) as a pod's first setup does (fresh: its directories do not
// exist yet) and as a refresh does (the volume exists), with the same
// contents or a new token.
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
			if err := f.WriteAtomic(dir, files, nil, false, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		dir := filepath.Join(b.TempDir(), "vol")
		b.ReportAllocs()
		for b.Loop() {
			if err := f.WriteAtomic(dir, files, nil, false, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("changed", func(b *testing.B) {
		dir := filepath.Join(b.TempDir(), "vol")
		changed := maps.Clone(files)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			changed["token"] = podspec.VolumeFile{Data: []byte(strconv.Itoa(i)), Mode: 0o644}
			if err := f.WriteAtomic(dir, changed, nil, false, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}
