package podfiles_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/actorlet/actorlet/adapters/podfiles"
)

func TestSubPath(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	tests := []struct {
		name    string
		mode    os.FileMode // of the volume directory
		setup   func(t *testing.T, vol, outside string)
		sub     string
		want    string // relative to the volume; "" with wantErr
		wantErr string
		perm    os.FileMode // of the made directory
	}{
		{name: "missing dir gets the volume's mode", mode: 0o777, sub: "a/b", want: "a/b", perm: 0o777},
		{name: "setgid volume (fsGroup) stays setgid", mode: 0o777 | os.ModeSetgid, sub: "x", want: "x", perm: 0o777 | os.ModeSetgid},
		{name: "a tmpfs root's sticky bit is copied (upstream's 3777)", mode: 0o777 | os.ModeSetgid | os.ModeSticky, sub: "s/t", want: "s/t",
			perm: 0o777 | os.ModeSetgid | os.ModeSticky},
		{name: "existing file kept", mode: 0o755, sub: "f", want: "f", perm: 0o640,
			setup: func(t *testing.T, vol, _ string) { mustWrite(t, filepath.Join(vol, "f"), 0o640) }},
		{name: "symlink inside the volume", mode: 0o755, sub: "l", want: "d", perm: 0o700,
			setup: func(t *testing.T, vol, _ string) {
				if err := os.Mkdir(filepath.Join(vol, "d"), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink("d", filepath.Join(vol, "l")); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "symlink out of the volume", mode: 0o755, sub: "esc", wantErr: "outside the volume",
			setup: func(t *testing.T, vol, outside string) {
				if err := os.Symlink(outside, filepath.Join(vol, "esc")); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "missing dir under a symlink out of the volume", mode: 0o755, sub: "esc/new", wantErr: "outside the volume",
			setup: func(t *testing.T, vol, outside string) {
				if err := os.Symlink(outside, filepath.Join(vol, "esc")); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "backsteps", mode: 0o755, sub: "../x", wantErr: "relative path inside the volume"},
		{name: "absolute", mode: 0o755, sub: "/etc", wantErr: "relative path inside the volume"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			vol, outside := filepath.Join(root, "vol"), filepath.Join(root, "outside")
			for _, d := range []string{vol, outside} {
				if err := os.Mkdir(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(vol, tt.mode); err != nil {
				t.Fatal(err)
			}
			if tt.setup != nil {
				tt.setup(t, vol, outside)
			}
			got, err := podfiles.New(root, "", quiet).SubPath(vol, tt.sub)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("SubPath = %q, %v; want an error with %q", got, err, tt.wantErr)
				}
				if _, serr := os.Stat(filepath.Join(outside, "new")); serr == nil {
					t.Fatal("a directory was made outside the volume")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(vol, tt.want); got != want {
				t.Fatalf("SubPath = %q, want %q", got, want)
			}
			fi, err := os.Stat(got)
			if err != nil {
				t.Fatal(err)
			}
			if m := fi.Mode() & (os.ModePerm | os.ModeSetgid | os.ModeSticky); m != tt.perm {
				t.Fatalf("mode %v, want %v", m, tt.perm)
			}
		})
	}
}

func mustWrite(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, nil, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
