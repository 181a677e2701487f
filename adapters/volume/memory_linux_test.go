package volume

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/internal/testenv"
	"github.com/actorlet/actorlet/podspec"
)

// dropSysAdmin takes CAP_SYS_ADMIN out of the calling thread's effective
// capabilities (capset(2) changes one thread): mount(2) from it is then
// refused with EPERM, as for a process that is not root.
func dropSysAdmin() error {
	const capSysAdmin = 21
	hdr := struct {
		version uint32
		pid     int32
	}{version: 0x20080522} // _LINUX_CAPABILITY_VERSION_3
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return e
	}
	data[0].effective &^= 1 << capSysAdmin
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return e
	}
	return nil
}

// Where this process may not mount, memory-backed volumes are written on
// disk exactly as before (same files, modes, directory), the pod does not
// fail for it, one line says so, and no mount is tried again.
func TestMemoryVolumeFallsBackToDisk(t *testing.T) {
	testenv.NeedRoot(t)
	base := t.TempDir()
	t.Cleanup(func() { _ = unmountUnder(base) })
	var logs actortest.SyncBuffer
	f := New(slog.New(slog.NewTextHandler(&logs, nil)))
	files := map[string]podspec.VolumeFile{"token": {Data: []byte("t"), Mode: 0o600}, "ca.crt": {Data: []byte("ca"), Mode: 0o644}}
	vols := []string{filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "a")} // a: written, then refreshed
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, short of a capability, ends with
		// this goroutine instead of running others.
		runtime.LockOSThread()
		if err := dropSysAdmin(); err != nil {
			done <- err
			return
		}
		for _, dir := range vols {
			if err := f.WriteAtomic(dir, files, nil, true, 1<<20); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ms, err := mounts(); err != nil {
		t.Fatal(err)
	} else {
		for _, m := range ms {
			if strings.HasPrefix(m.point, base+"/") {
				t.Errorf("%s mounted (%s) by a thread that may not mount", m.point, m.fsType)
			}
		}
	}
	for _, dir := range vols[:2] {
		checkFiles(t, dir, map[string]wantFile{".": {mode: "drwxr-xr-x"}, "token": {mode: "-rw-------"}, "ca.crt": {mode: "-rw-r--r--"}})
		if b, err := os.ReadFile(filepath.Join(dir, "token")); err != nil || string(b) != "t" {
			t.Errorf("%s/token = %q (%v)", dir, b, err)
		}
	}
	if n := strings.Count(logs.String(), "may not mount"); n != 1 {
		t.Errorf("%d lines about the refused mount, want 1:\n%s", n, logs.String())
	}
	if !f.refused.Load() {
		t.Error("the refusal is not remembered")
	}
}

// A volume found on disk with files in it (written by an earlier
// actorlet, or after a refused mount) stays there: its containers see
// that directory, a tmpfs mounted over it would hide their updates. An
// empty one (a setup that failed before writing) gets its tmpfs.
func TestMemoryVolumeKeepsWhatIsOnDisk(t *testing.T) {
	testenv.NeedRoot(t)
	tests := []struct {
		name      string
		before    map[string]podspec.VolumeFile // written on disk first; nil: an empty directory
		wantTmpfs bool
	}{
		{name: "written on disk before: stays on disk", before: map[string]podspec.VolumeFile{"token": {Data: []byte("old"), Mode: 0o644}}},
		{name: "empty directory: mounted", wantTmpfs: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			t.Cleanup(func() { _ = unmountUnder(base) })
			dir := filepath.Join(base, "vol")
			var f Files
			if tt.before != nil {
				if err := f.WriteAtomic(dir, tt.before, nil, false, 0); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := f.WriteAtomic(dir, map[string]podspec.VolumeFile{"token": {Data: []byte("new"), Mode: 0o644}}, nil, true, 1<<20); err != nil {
				t.Fatal(err)
			}
			if mounted, err := isTmpfsMount(dir); err != nil || mounted != tt.wantTmpfs {
				t.Errorf("tmpfs: %v (%v), want %v", mounted, err, tt.wantTmpfs)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "token")); err != nil || string(b) != "new" {
				t.Errorf("token = %q (%v), want new", b, err)
			}
			checkFiles(t, dir, map[string]wantFile{".": {mode: "drwxr-xr-x"}})
		})
	}
}
