// Package volume writes volume contents on the host: atomic updates of a
// directory of files (as the upstream kubelet's AtomicWriter: a timestamped
// data directory, a "..data" symlink swapped with one rename, user-visible
// symlinks into it), emptyDir directories (a tmpfs mounted on them for
// medium Memory) and the fsGroup ownership of both (upstream's
// SetVolumeOwnership). Outbound adapter: it imports neither actors nor
// messages.
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

	"github.com/actorlet/actorlet/podspec"
)

const dataLink = "..data"

// Files writes and removes volume directories.
type Files struct{}

// EnsureDir creates dir if missing (hostPath DirectoryOrCreate); an
// existing directory keeps its mode.
func (Files) EnsureDir(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}

// WriteAtomic makes dir hold exactly files (relative path -> content, mode
// and owner), all at once: a reader sees either the old set or the new one.
// With fsGroup set, the whole volume is given to that group, read-only
// (upstream's SetVolumeOwnership for configMap, secret, downwardAPI and
// projected volumes), before the new files become visible.
func (Files) WriteAtomic(dir string, files map[string]podspec.VolumeFile, fsGroup *int64) error {
	for name := range files {
		if name == "" || filepath.IsAbs(name) || strings.HasPrefix(filepath.Clean(name), "..") {
			return fmt.Errorf("volume file %q: must be a relative path inside the volume", name)
		}
	}
	if err := mkdirMode(dir, 0o755); err != nil {
		return fmt.Errorf("volume dir: %w", err)
	}
	ts := ".." + time.Now().UTC().Format("2006_01_02_15_04_05.") + strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	tsDir := filepath.Join(dir, ts)
	if err := mkdirMode(tsDir, 0o755); err != nil {
		return fmt.Errorf("volume data dir: %w", err)
	}
	names := make([]string, 0, len(files))
	for name, f := range files {
		p := filepath.Join(tsDir, name)
		// Directories of the volume: 0755 whatever the umask, so that
		// every user of the pod can reach its files.
		for d := filepath.Dir(p); d != tsDir; d = filepath.Dir(d) {
			if err := mkdirMode(d, 0o755); err != nil {
				return err
			}
		}
		if err := writeFile(p, f); err != nil {
			return err
		}
		names = append(names, name)
	}
	sort.Strings(names)
	if fsGroup != nil {
		if err := SetOwnership(dir, *fsGroup, true); err != nil {
			return err
		}
	}
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

// writeFile writes one volume file with exactly its mode (whatever the
// umask) and, if it has one, its owner.
func writeFile(p string, f podspec.VolumeFile) error {
	mode := f.Mode & os.ModePerm
	if err := os.WriteFile(p, f.Data, mode); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := os.Chmod(p, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", p, err)
	}
	if f.FsUser != nil {
		if err := os.Lchown(p, int(*f.FsUser), -1); err != nil {
			return fmt.Errorf("chown %s: %w", p, err)
		}
	}
	return nil
}

// RemoveAll removes a pod's volume directories. The tmpfs of memory-backed
// emptyDirs (any mount under dir) are unmounted first; if one stays
// mounted nothing is removed, so that nothing is deleted through a mount.
func (Files) RemoveAll(dir string) error {
	if dir == "" || dir == "/" {
		return errors.New("refusing to remove an empty or root path")
	}
	if err := unmountUnder(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}
