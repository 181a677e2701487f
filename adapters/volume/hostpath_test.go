package volume

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestHostPathTypes: each hostPath type as upstream's checkType: the
// ...OrCreate types make what is missing, the others refuse a path that
// is not of their kind, naming it.
func TestHostPathTypes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		path    string
		typ     v1.HostPathType
		wantErr string // "" : no error
	}{
		{missing, v1.HostPathUnset, ""},
		{dir, v1.HostPathDirectory, ""},
		{missing, v1.HostPathDirectory, "is not a directory"},
		{file, v1.HostPathDirectory, "is not a directory"},
		{file, v1.HostPathFile, ""},
		{dir, v1.HostPathFile, "is not a file"},
		{missing, v1.HostPathFile, "is not a file"},
		{sock, v1.HostPathSocket, ""},
		{file, v1.HostPathSocket, "is not a socket file"},
		{file, v1.HostPathCharDev, "is not a character device"},
		{file, v1.HostPathBlockDev, "is not a block device"},
		{file, v1.HostPathDirectoryOrCreate, "is not a directory"},
		{dir, v1.HostPathFileOrCreate, "is not a file"},
		{file, "Pipe", `unknown type "Pipe"`},
	}
	if _, err := os.Stat("/dev/null"); err == nil {
		tests = append(tests, struct {
			path    string
			typ     v1.HostPathType
			wantErr string
		}{"/dev/null", v1.HostPathCharDev, ""})
	}
	var f Files
	for _, tt := range tests {
		err := f.HostPath(tt.path, tt.typ)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s as %q: %v", tt.path, tt.typ, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "hostPath type check failed")):
			t.Errorf("%s as %q: %v, want %q", tt.path, tt.typ, err, tt.wantErr)
		}
	}

	// The ...OrCreate types create what is missing, parents included.
	newDir := filepath.Join(dir, "a", "b")
	if err := f.HostPath(newDir, v1.HostPathDirectoryOrCreate); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(newDir); err != nil || !fi.IsDir() {
		t.Errorf("DirectoryOrCreate made %v (%v)", fi, err)
	}
	newFile := filepath.Join(dir, "c", "f")
	if err := f.HostPath(newFile, v1.HostPathFileOrCreate); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(newFile); err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
		t.Errorf("FileOrCreate made %v (%v)", fi, err)
	}
}
