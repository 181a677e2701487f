package volume

import (
	"maps"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/actorlet/actorlet/internal/testenv"
	"github.com/actorlet/actorlet/podspec"
)

// BenchmarkWriteAtomic writes a kube-api-access volume (token, ca.crt,
// namespace) as a pod's first setup does (fresh: its directories do not
// exist yet; on disk, or on a tmpfs of its own as secret, projected and
// downwardAPI volumes are when actorlet may mount) and as a refresh does
// (the volume exists), with the same contents or a new token; "pod" is a
// pod's whole share: the first write and the teardown.
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
	for _, memory := range []bool{false, true} {
		name := "pod, disk"
		if memory {
			testenv.NeedRoot(b)
			name = "pod, tmpfs"
		}
		b.Run(name, func(b *testing.B) {
			// CPU, not only wall time: on a loaded machine the disk's
			// wall time is mostly waiting.
			root := b.TempDir()
			b.ReportAllocs()
			cpu := processCPU(b)
			for i := 0; b.Loop(); i++ {
				vols := filepath.Join(root, strconv.Itoa(i), "volumes")
				if err := f.WriteAtomic(filepath.Join(vols, "kubernetes.io~projected", "kube-api-access"), files, nil, memory, 1<<20); err != nil {
					b.Fatal(err)
				}
				if err := f.RemoveAll(vols); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N)/1e3, "cpu-us/op")
		})
	}
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

// processCPU is the CPU time (user and system) the process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
