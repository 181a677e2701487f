package plainfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

func TestOpenCreatesWritesAndReads(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	f, err := Open(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name() != p {
		t.Errorf("Name() = %q, want %q", f.Name(), p)
	}
	if _, err := f.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := f.Chmod(0o640); err != nil { // under any umask
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, want 0640", st.Mode().Perm())
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "hello" {
		t.Fatalf("read back %q, %v", b, err)
	}

	r, err := Open(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	buf := make([]byte, 16)
	n, _ := r.Read(buf)
	if string(buf[:n]) != "hello" {
		t.Errorf("read %q through Open, want hello", buf[:n])
	}
}

func TestOpenIsCloseOnExec(t *testing.T) {
	f, err := Open(filepath.Join(t.TempDir(), "f"), os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	flags, _, e := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_GETFD, 0)
	if e != 0 {
		t.Fatal(e)
	}
	if flags&syscall.FD_CLOEXEC == 0 {
		t.Error("descriptor is inherited by child processes: FD_CLOEXEC not set")
	}
}

func TestOpenErrorsAsOpenFileDoes(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(filepath.Join(dir, "missing", "f"), os.O_WRONLY|os.O_CREATE, 0o600)
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Op != "open" || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing parent: %v, want *PathError open ... not exist", err)
	}
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); !errors.Is(err, fs.ErrExist) {
		t.Errorf("O_EXCL on an existing file: %v, want exist", err)
	}
	l := filepath.Join(dir, "l")
	if err := os.Symlink(p, l); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(l, os.O_RDONLY|syscall.O_NOFOLLOW, 0); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("O_NOFOLLOW on a symlink: %v, want ELOOP", err)
	}
}

func TestModeKeepsSpecialBits(t *testing.T) {
	for _, c := range []struct {
		perm os.FileMode
		want uint32
	}{
		{0o644, 0o644},
		{0o755 | os.ModeSetgid, 0o2755},
		{0o755 | os.ModeSetuid | os.ModeSticky, 0o5755},
		{os.ModeDir | 0o700, 0o700},
	} {
		if got := mode(c.perm); got != c.want {
			t.Errorf("mode(%v) = %o, want %o", c.perm, got, c.want)
		}
	}
}

// BenchmarkCreate creates, writes and closes a small file, as a pod start
// does for its hosts file and termination-log files, with os.OpenFile and
// with Open (TMPDIR picks the file system: a tmpfs shows the system
// calls' share best).
func BenchmarkCreate(b *testing.B) {
	for _, c := range []struct {
		name string
		open func(string, int, os.FileMode) (*os.File, error)
	}{{"os.OpenFile", os.OpenFile}, {"plainfile.Open", Open}} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			data := []byte("127.0.0.1\tlocalhost\n")
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				f, err := c.open(filepath.Join(dir, strconv.Itoa(i)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.Write(data); err != nil {
					b.Fatal(err)
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
