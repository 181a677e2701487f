package volume

import (
	"errors"
	"io"
	"os"
)

// memoryDir makes dir the root of a tmpfs of its own, of size bytes, for
// a memory-backed volume (secret, projected, downwardAPI), and tells
// whether dir holds nothing yet (the write then takes the short way).
//
// The tmpfs is mounted on an empty directory only: dir mounted already (a
// refresh, a restart of actorlet) is used as it is, and so is a dir with
// entries (a volume written on disk before, by an earlier actorlet or
// after a refused mount), since its containers see that directory. Where
// the mount fails, dir is set up on disk as any other volume's, never an
// error: the pod does not depend on it. A refusal (this process may not
// mount) is logged once and no mount is tried again; another failure is
// logged each time.
func (f *Files) memoryDir(dir string, size int64) (bool, error) {
	created, err := mkdirAll(dir, volumeDirPerm)
	if err != nil {
		return false, err
	}
	if !created {
		mounted, err := isMountPoint(dir)
		if err != nil {
			return false, err
		}
		if mounted {
			return false, nil
		}
		empty, err := isEmptyDir(dir)
		if err != nil {
			return false, err
		}
		if !empty {
			return mkdirMode(dir, volumeDirPerm)
		}
	}
	// The root's mode is given by the mount (not under the umask): the
	// same as the directory on disk would get.
	err = mountTmpfs(dir, size, volumeDirPerm)
	if err == nil {
		return true, nil
	}
	if mountRefused(err) {
		if f.refused.CompareAndSwap(false, true) {
			f.logger().Warn("secret, projected and downwardAPI volumes are written on disk, not on a tmpfs of their own as upstream: this process may not mount (it needs root or CAP_SYS_ADMIN)", "err", err)
		}
	} else {
		f.logger().Warn("volume written on disk, not on a tmpfs", "dir", dir, "err", err)
	}
	if _, err := mkdirMode(dir, volumeDirPerm); err != nil {
		return false, err
	}
	return true, nil // empty: made now, or found empty
}

// isEmptyDir tells whether the directory dir has no entries.
func isEmptyDir(dir string) (bool, error) {
	d, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer func() { _ = d.Close() }()
	names, err := d.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return len(names) == 0, err
}
