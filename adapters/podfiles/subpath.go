package podfiles

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SubPath returns the host path of a volumeMount's subPath sub inside the
// volume directory volumeDir, creating it as a directory when it does not
// exist, as upstream's kubelet does before the runtime would (which makes
// it 0755 root:root): with the volume directory's mode, exactly, whatever
// the umask, its setgid and sticky bits included (a tmpfs emptyDir with an
// fsGroup: 3777), and so its group where it is setgid. The path, symlinks
// resolved, must stay inside the volume.
func (f *Files) SubPath(volumeDir, sub string) (string, error) {
	sub = filepath.Clean(sub)
	if filepath.IsAbs(sub) || sub == ".." || strings.HasPrefix(sub, "../") {
		return "", fmt.Errorf("subPath %q must be a relative path inside the volume", sub)
	}
	root, err := filepath.EvalSymlinks(volumeDir)
	if err != nil {
		return "", fmt.Errorf("subPath %q: volume directory: %w", sub, err)
	}
	info, err := os.Stat(root)
	if err != nil {
		return "", fmt.Errorf("subPath %q: volume directory: %w", sub, err)
	}
	perm := info.Mode() & (os.ModePerm | os.ModeSetgid | os.ModeSticky)
	path := filepath.Join(root, sub)
	if _, err := os.Lstat(path); os.IsNotExist(err) {
		if err := makeDirs(root, sub, perm); err != nil {
			return "", fmt.Errorf("subPath %q: %w", sub, err)
		}
	} else if err != nil {
		return "", fmt.Errorf("subPath %q: %w", sub, err)
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("subPath %q: %w", sub, err)
	}
	if resolved != root && !strings.HasPrefix(resolved, root+string(filepath.Separator)) {
		return "", fmt.Errorf("subPath %q resolves to %s, outside the volume", sub, resolved)
	}
	return resolved, nil
}

// makeDirs creates the missing directories of sub under root, one at a
// time (a symlink met on the way is resolved and must stay under root), each
// with perm exactly (setgid also where its parent is).
func makeDirs(root, sub string, perm os.FileMode) error {
	cur := root
	for _, part := range strings.Split(sub, string(filepath.Separator)) {
		if part == "" || part == "." {
			continue
		}
		next := filepath.Join(cur, part)
		fi, err := os.Lstat(next)
		switch {
		case os.IsNotExist(err):
			if err := os.Mkdir(next, perm); err != nil && !os.IsExist(err) {
				return fmt.Errorf("create %s: %w", next, err)
			}
			if err := os.Chmod(next, perm|setgidOf(cur)); err != nil {
				return fmt.Errorf("chmod %s: %w", next, err)
			}
		case err != nil:
			return err
		case fi.Mode()&os.ModeSymlink != 0:
			r, err := filepath.EvalSymlinks(next)
			if err != nil {
				return err
			}
			if r != root && !strings.HasPrefix(r, root+string(filepath.Separator)) {
				return fmt.Errorf("%s resolves to %s, outside the volume", next, r)
			}
			next = r
		}
		cur = next
	}
	return nil
}

// setgidOf is os.ModeSetgid when dir is setgid (new directories inherit
// it, and Chmod must not clear it), else 0.
func setgidOf(dir string) os.FileMode {
	if fi, err := os.Stat(dir); err == nil {
		return fi.Mode() & os.ModeSetgid
	}
	return 0
}
