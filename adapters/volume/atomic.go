// Package volume writes volume contents on the host: atomic updates of a
// directory of files (as the upstream kubelet's AtomicWriter: a timestamped
// data directory, a "..data" symlink swapped with one rename, user-visible
// symlinks into it) and plain directories for emptyDir. Outbound adapter: it
// imports neither actors nor messages.
package volume

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

const dataLink = "..data"

// Files writes and removes volume directories.
type Files struct{}

// EnsureDir creates dir (emptyDir, hostPath DirectoryOrCreate).
func (Files) EnsureDir(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}

// WriteAtomic makes dir hold exactly files (relative path -> content), all
// at once: a reader sees either the old set or the new one.
func (Files) WriteAtomic(dir string, files map[string][]byte, mode os.FileMode) error {
	for name := range files {
		if name == "" || filepath.IsAbs(name) || strings.HasPrefix(filepath.Clean(name), "..") {
			return fmt.Errorf("volume file %q: must be a relative path inside the volume", name)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("volume dir %s: %w", dir, err)
	}
	ts := ".." + time.Now().UTC().Format("2006_01_02_15_04_05.") + strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	tsDir := filepath.Join(dir, ts)
	if err := os.MkdirAll(tsDir, 0o755); err != nil {
		return fmt.Errorf("volume data dir: %w", err)
	}
	names := make([]string, 0, len(files))
	for name, b := range files {
		p := filepath.Join(tsDir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, mode); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	// Swap ..data in one rename.
	old, _ := os.Readlink(filepath.Join(dir, dataLink))
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(ts, tmp); err != nil {
		return fmt.Errorf("data link: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataLink)); err != nil {
		return fmt.Errorf("swap data link: %w", err)
	}
	// User-visible names point into ..data (top-level entries only).
	top := map[string]bool{}
	for _, name := range names {
		top[strings.SplitN(name, string(filepath.Separator), 2)[0]] = true
	}
	for t := range top {
		link := filepath.Join(dir, t)
		if target, err := os.Readlink(link); err == nil && target == filepath.Join(dataLink, t) {
			continue
		}
		_ = os.Remove(link)
		if err := os.Symlink(filepath.Join(dataLink, t), link); err != nil {
			return fmt.Errorf("link %s: %w", link, err)
		}
	}
	// Names no longer present go away, then the old data dir.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, "..") || top[n] {
			continue
		}
		_ = os.Remove(filepath.Join(dir, n))
	}
	if old != "" && old != ts {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}

// RemoveAll removes a pod's volume directories (never following mounts:
// actorlet mounts nothing itself; the runtime's bind mounts are gone with the
// containers).
func (Files) RemoveAll(dir string) error {
	if dir == "" || dir == "/" {
		return errors.New("refusing to remove an empty or root path")
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}
