package volume

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// umaskOnce reads the process's umask once: the modes a fresh directory or
// file gets from mkdir and open are predictable from it, so that the chmod
// (and the stat before it) that a directory or file made now would need
// is skipped when the umask clears none of its bits. actorlet never
// changes its umask; tests that do reset the cache (resetUmask).
var (
	umaskOnce sync.Once
	umaskVal  os.FileMode
	umaskOK   bool
)

// readUmask returns the process's umask from /proc/self/status (Linux 4.7
// and later); ok is false where it cannot be known, and every mode is
// then set explicitly.
func readUmask() (os.FileMode, bool) {
	umaskOnce.Do(func() {
		f, err := os.Open("/proc/self/status")
		if err != nil {
			return
		}
		defer func() { _ = f.Close() }()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			v, ok := strings.CutPrefix(sc.Text(), "Umask:")
			if !ok {
				continue
			}
			if n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
				umaskVal, umaskOK = os.FileMode(n)&os.ModePerm, true
			}
			return
		}
	})
	return umaskVal, umaskOK
}

// keepsMode tells whether a file or directory created now with perm ends
// up with exactly perm: the umask clears none of its bits.
func keepsMode(perm os.FileMode) bool {
	u, ok := readUmask()
	return ok && perm&u == 0
}

// mkdirAll creates dir and its missing parents with perm (under the
// umask), as os.MkdirAll, and tells whether dir itself was created by
// this call. It tries the directory first and climbs only when its parent
// is missing, so that a directory whose parent exists costs one mkdir and
// no stat. An existing dir is not checked to be a directory: what is
// made in it next fails if it is not one.
func mkdirAll(dir string, perm os.FileMode) (bool, error) {
	err := os.Mkdir(dir, perm)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrExist):
		return false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("create %s: %w", dir, err)
	}
	parent := filepath.Dir(dir)
	if parent == dir {
		return false, fmt.Errorf("create %s: %w", dir, err)
	}
	if _, err := mkdirAll(parent, perm); err != nil {
		return false, err
	}
	if err := os.Mkdir(dir, perm); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil // made meanwhile by someone else
		}
		return false, fmt.Errorf("create %s: %w", dir, err)
	}
	return true, nil
}

// mkdirMode creates dir (and its parents) and gives it the permission bits
// perm whatever the umask, keeping its setgid and sticky bits (a tmpfs
// root's 1777, an fsGroup's setgid) when it exists already; it tells
// whether dir was created by this call. A directory created now whose
// mode the umask left whole needs neither stat nor chmod (a setgid bit
// inherited from its parent stays, as the chmod would keep it).
func mkdirMode(dir string, perm os.FileMode) (bool, error) {
	created, err := mkdirAll(dir, perm)
	if err != nil {
		return false, err
	}
	if created && keepsMode(perm) {
		return true, nil
	}
	info, err := os.Stat(dir)
	if err != nil {
		return false, fmt.Errorf("create %s: %w", dir, err)
	}
	if !info.IsDir() {
		return false, fmt.Errorf("create %s: %w", dir, syscall.ENOTDIR)
	}
	if info.Mode().Perm() == perm {
		return created, nil
	}
	if err := os.Chmod(dir, info.Mode()&(os.ModeSetgid|os.ModeSetuid|os.ModeSticky)|perm); err != nil {
		return false, fmt.Errorf("chmod %s: %w", dir, err)
	}
	return created, nil
}
