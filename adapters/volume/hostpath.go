package volume

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
)

// HostPath prepares and checks a hostPath volume's path by its type, as
// upstream's hostPath plugin (pkg/volume/hostpath checkType): the
// ...OrCreate types create what is missing (a 0755 directory with its
// parents; an empty 0644 file, its parent directory 0755), the others
// must find that kind of file there; "" checks nothing.
func (*Files) HostPath(path string, typ v1.HostPathType) error {
	switch typ {
	case v1.HostPathDirectoryOrCreate:
		if _, err := os.Lstat(path); os.IsNotExist(err) {
			if err := os.MkdirAll(path, 0o755); err != nil {
				return fmt.Errorf("hostPath type check failed: create %s: %w", path, err)
			}
		}
	case v1.HostPathFileOrCreate:
		if _, err := os.Lstat(path); os.IsNotExist(err) {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return fmt.Errorf("hostPath type check failed: create %s: %w", filepath.Dir(path), err)
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o644)
			if err != nil {
				return fmt.Errorf("hostPath type check failed: create %s: %w", path, err)
			}
			_ = f.Close()
		}
	}
	return checkHostPathType(path, typ)
}

// checkHostPathType is upstream's type check of what is at path (links
// followed, as os.Stat does).
func checkHostPathType(path string, typ v1.HostPathType) error {
	var want func(os.FileMode) bool
	var what string
	switch typ {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate, v1.HostPathDirectory:
		want, what = os.FileMode.IsDir, "a directory"
	case v1.HostPathFileOrCreate, v1.HostPathFile:
		want, what = os.FileMode.IsRegular, "a file"
	case v1.HostPathSocket:
		want, what = func(m os.FileMode) bool { return m&os.ModeSocket != 0 }, "a socket file"
	case v1.HostPathCharDev:
		want, what = func(m os.FileMode) bool { return m&os.ModeCharDevice != 0 }, "a character device"
	case v1.HostPathBlockDev:
		want, what = func(m os.FileMode) bool { return m&os.ModeDevice != 0 && m&os.ModeCharDevice == 0 }, "a block device"
	default:
		return fmt.Errorf("hostPath type check failed: %s: unknown type %q", path, typ)
	}
	fi, err := os.Stat(path)
	if err != nil || !want(fi.Mode()) {
		return fmt.Errorf("hostPath type check failed: %s is not %s", path, what)
	}
	return nil
}
