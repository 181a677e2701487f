package volume

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// emptyDirPerm is the mode of an emptyDir's directory: every user of the
// pod's containers can write into it (upstream's emptyDir perm).
const emptyDirPerm os.FileMode = 0o777

// EmptyDir sets up an emptyDir at dir: a 0777 directory (whatever the
// umask); memory-backed, a tmpfs mounted on it (of size bytes; 0: the
// kernel's default), unless one already is; with fsGroup set, the volume
// given to that group (setgid directories, group read-write), as upstream.
func (*Files) EmptyDir(dir string, memory bool, size int64, fsGroup *int64) error {
	if _, err := mkdirMode(dir, emptyDirPerm); err != nil {
		return err
	}
	if memory {
		mounted, err := isTmpfsMount(dir)
		if err != nil {
			return err
		}
		if !mounted {
			if err := mountTmpfs(dir, size, 0); err != nil {
				return err
			}
		}
	}
	if fsGroup != nil {
		return SetOwnership(dir, *fsGroup, false)
	}
	return nil
}

// Masks of upstream's SetVolumeOwnership.
const (
	rwMask   os.FileMode = 0o660
	roMask   os.FileMode = 0o440
	execMask os.FileMode = 0o110
)

// SetOwnership gives everything under dir (dir too, symlinks not
// followed) to group gid: group read (and write unless readOnly) on files,
// plus search and setgid on directories, so files created later inherit
// the group. As upstream, a file that cannot be changed is skipped.
func SetOwnership(dir string, gid int64, readOnly bool) error {
	mask := rwMask
	if readOnly {
		mask = roMask
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("volume ownership %s: %w", path, err)
		}
		_ = os.Lchown(path, -1, int(gid)) // upstream logs and goes on
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil //nolint:nilerr // gone meanwhile: nothing to change
		}
		m := mask
		if info.IsDir() {
			m |= os.ModeSetgid | execMask
		}
		// os.FileMode keeps setgid and sticky apart from the permission
		// bits; Chmod sets both from it.
		_ = os.Chmod(path, info.Mode()&(os.ModePerm|os.ModeSetgid|os.ModeSetuid|os.ModeSticky)|m)
		return nil
	})
}
