package host

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestMachineInfo(t *testing.T) {
	proc, etc := t.TempDir(), t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(proc, "meminfo"), "MemTotal:       24576000 kB\nMemFree: 1 kB\n")
	write(filepath.Join(proc, "sys/kernel/osrelease"), "6.1.0-test\n")
	write(filepath.Join(proc, "sys/kernel/random/boot_id"), "boot-1\n")
	write(filepath.Join(etc, "machine-id"), "machine-1\n")
	write(filepath.Join(etc, "os-release"), "NAME=Debian\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n")
	m := &Machine{RootDir: t.TempDir(), ProcDir: proc, EtcDir: etc}
	info, capacity, err := m.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.KernelVersion != "6.1.0-test" || info.BootID != "boot-1" || info.MachineID != "machine-1" ||
		info.OSImage != "Debian GNU/Linux 12 (bookworm)" {
		t.Errorf("info %+v", info)
	}
	if got := capacity.Memory().Value(); got != 24576000*1024 {
		t.Errorf("memory %d", got)
	}
	if capacity.Cpu().Value() < 1 || capacity.StorageEphemeral().Value() <= 0 {
		t.Errorf("capacity %v", capacity)
	}
	// A broken meminfo is an error, not a crash.
	write(filepath.Join(proc, "meminfo"), "garbage\n")
	if _, _, err := m.Info(context.Background()); err == nil {
		t.Error("no error for a meminfo without MemTotal")
	}
}

// A root dir not made yet (a first start) is measured on the filesystem
// that will hold it, so the ephemeral storage is still known (and admitted
// against).
func TestEphemeralStorageOfARootDirNotMadeYet(t *testing.T) {
	base := t.TempDir()
	made, err := fsSize(base)
	if err != nil || made <= 0 {
		t.Fatalf("fsSize(%s) = %d, %v", base, made, err)
	}
	got, err := fsSize(filepath.Join(base, "not", "yet"))
	if err != nil || got != made {
		t.Fatalf("fsSize of a dir not made yet = %d, %v; want %d as its parent", got, err, made)
	}
}
