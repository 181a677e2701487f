// Package volume writes volume contents on the host: atomic updates of a
// directory of files (as the upstream kubelet's AtomicWriter: a timestamped
// data directory, a "..data" symlink swapped with one rename, user-visible
// symlinks into it), emptyDir directories (a tmpfs mounted on them for
// medium Memory) and the fsGroup ownership of both (upstream's
// SetVolumeOwnership). Outbound adapter: it imports neither actors nor
// messages.
package volume

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/actorlet/actorlet/internal/plainfile"
	"github.com/actorlet/actorlet/podspec"
)

const dataLink = "..data"

// volumeDirPerm is the mode of a configMap, secret, downwardAPI or
// projected volume's directory, on disk or the root of its tmpfs.
const volumeDirPerm os.FileMode = 0o755

// Files writes and removes volume directories. Its zero value is ready
// (it logs to slog.Default); New gives it a logger.
type Files struct {
	log *slog.Logger
	// refused is set once a tmpfs mount was refused (this process may not
	// mount): memory-backed volumes are written on disk from then on.
	refused atomic.Bool
}

// New returns the files, logging to log (nil: slog.Default).
func New(log *slog.Logger) *Files {
	return &Files{log: log}
}

func (f *Files) logger() *slog.Logger {
	if f.log == nil {
		return slog.Default()
	}
	return f.log
}

// WriteAtomic makes dir hold exactly files (relative path -> content, mode
// and owner), all at once: a reader sees either the old set or the new one.
// memory: dir is a tmpfs of its own of size bytes (0: the kernel's
// default), as upstream backs secret, projected and downwardAPI volumes
// (a memory emptyDir wrapped around them), so that their files, tokens
// included, never reach the disk; it is mounted at the first write, on an
// empty directory only (a volume written on disk before stays there, its
// containers see that directory), and where this process may not mount,
// the volume is written on disk (logged once).
// With fsGroup set, the whole volume is given to that group, read-only
// (upstream's SetVolumeOwnership for configMap, secret, downwardAPI and
// projected volumes), before the new files become visible.
//
// A volume directory made by this call (a pod's first setup, by far the
// most common write) holds nothing yet: its files are written with their
// final mode and owner at once, "..data" and the user-visible links are
// made directly, and nothing is read back or cleaned up. The result on
// disk is the same as the update's, which swaps "..data" with a rename.
func (f *Files) WriteAtomic(dir string, files map[string]podspec.VolumeFile, fsGroup *int64, memory bool, size int64) error {
	for name := range files {
		if name == "" || filepath.IsAbs(name) || strings.HasPrefix(filepath.Clean(name), "..") {
			return fmt.Errorf("volume file %q: must be a relative path inside the volume", name)
		}
	}
	var fresh bool
	var err error
	if memory && !f.refused.Load() {
		fresh, err = f.memoryDir(dir, size)
	} else {
		fresh, err = mkdirMode(dir, volumeDirPerm)
	}
	if err != nil {
		return fmt.Errorf("volume dir: %w", err)
	}
	if !fresh && upToDate(dir, files) {
		// As upstream's AtomicWriter: nothing to write, but the
		// user-visible links are made if missing.
		return linkMissing(dir, files)
	}
	now := time.Now().UTC()
	ts := ".." + now.Format("2006_01_02_15_04_05.") + strconv.FormatInt(int64(now.Nanosecond()), 10)
	tsDir := filepath.Join(dir, ts)
	tsMade, err := mkdirMode(tsDir, 0o755)
	if err != nil {
		return fmt.Errorf("volume data dir: %w", err)
	}
	// On a fresh volume the ownership is given while writing, to the
	// entries made (the walk of SetOwnership would find exactly these).
	var group *int64
	if fresh && tsMade {
		group = fsGroup
		if group != nil {
			ownDir(dir, *group)
			ownDir(tsDir, *group)
		}
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	made := map[string]bool{}    // directories of the volume made or checked
	written := map[string]bool{} // files written, by cleaned path
	top := make(map[string]bool, len(names))
	for _, name := range names {
		clean := filepath.Clean(name)
		top[strings.SplitN(clean, string(filepath.Separator), 2)[0]] = true
		// Directories of the volume: 0755 whatever the umask, so that
		// every user of the pod can reach its files; made top-down, each
		// once.
		if rel := filepath.Dir(clean); rel != "." {
			d := tsDir
			for _, part := range strings.Split(rel, string(filepath.Separator)) {
				d = filepath.Join(d, part)
				if made[d] {
					continue
				}
				made[d] = true
				dMade, err := mkdirMode(d, 0o755)
				if err != nil {
					return err
				}
				if group != nil && dMade {
					ownDir(d, *group)
				}
			}
		}
		// A file is new (its mode is the one open gives) in a data
		// directory made now, unless two names clean to the same path.
		fileNew := tsMade && !written[clean]
		written[clean] = true
		if err := writeFile(filepath.Join(tsDir, clean), files[name], fileNew, group); err != nil {
			return err
		}
	}
	if fresh && tsMade {
		return linkFresh(dir, ts, top)
	}
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

// linkFresh makes "..data" and the user-visible links of a volume
// directory made by this write: nothing is there to read, swap or clean
// up, and "..data" appears in one step once the data directory is whole,
// as a rename would make it appear.
func linkFresh(dir, ts string, top map[string]bool) error {
	if err := os.Symlink(ts, filepath.Join(dir, dataLink)); err != nil {
		return fmt.Errorf("data link: %w", err)
	}
	for t := range top {
		link := filepath.Join(dir, t)
		if err := os.Symlink(dataLink+string(filepath.Separator)+t, link); err != nil {
			return fmt.Errorf("link %s: %w", link, err)
		}
	}
	return nil
}

// upToDate tells whether the data directory "..data" points to holds
// exactly files, compared by content as upstream's AtomicWriter does (a
// volume's modes and owners come from the pod's spec, which does not
// change): then a write would change nothing a reader sees, and is not
// made, so that applications watching the volume see no update.
func upToDate(dir string, files map[string]podspec.VolumeFile) bool {
	old, err := os.Readlink(filepath.Join(dir, dataLink))
	if err != nil || !strings.HasPrefix(old, "..") || strings.ContainsRune(old, filepath.Separator) {
		return false
	}
	want := cleanNames(files)
	oldDir := filepath.Join(dir, old)
	seen := 0
	err = filepath.WalkDir(oldDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		f, ok := want[p[len(oldDir)+1:]]
		if !ok || !d.Type().IsRegular() || !sameContent(p, f.Data) {
			return errStale
		}
		seen++
		return nil
	})
	return err == nil && seen == len(want)
}

var errStale = errors.New("stale")

// cleanNames returns files by cleaned path; of two names that clean to
// the same path, the one written last (in sorted order) wins, as on disk.
func cleanNames(files map[string]podspec.VolumeFile) map[string]podspec.VolumeFile {
	out := make(map[string]podspec.VolumeFile, len(files))
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		out[filepath.Clean(name)] = files[name]
	}
	return out
}

// sameContent tells whether the regular file p holds exactly data. One
// read of one byte more than data says it: a regular file's read is short
// only at its end.
func sameContent(p string, data []byte) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, len(data)+1)
	n, err := f.Read(buf)
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	return n == len(data) && bytes.Equal(buf[:n], data)
}

// linkMissing makes the user-visible links of files missing in dir (a
// user removed one), as upstream does on a write that changes nothing.
func linkMissing(dir string, files map[string]podspec.VolumeFile) error {
	top := map[string]bool{}
	for name := range files {
		top[strings.SplitN(filepath.Clean(name), string(filepath.Separator), 2)[0]] = true
	}
	for t := range top {
		link := filepath.Join(dir, t)
		if _, err := os.Lstat(link); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.Symlink(dataLink+string(filepath.Separator)+t, link); err != nil {
			return fmt.Errorf("link %s: %w", link, err)
		}
	}
	return nil
}

// ownDir gives a directory made now with mode 0755 to group gid as
// SetOwnership would: setgid, group search and read (a setgid bit it
// inherited is in that mode already). As upstream, a failure is not an
// error.
func ownDir(dir string, gid int64) {
	_ = os.Lchown(dir, -1, int(gid))
	_ = os.Chmod(dir, 0o755|roMask|execMask|os.ModeSetgid)
}

// writeFile writes one volume file with exactly its mode (whatever the
// umask) and, if it has one, its owner. fresh: the file does not exist
// yet, so that open gives it its mode unless the umask clears some bits.
// group: the volume's fsGroup when the file must get it now (a fresh
// volume), with the group read bits SetOwnership would add.
func writeFile(p string, f podspec.VolumeFile, fresh bool, group *int64) error {
	mode := f.Mode & os.ModePerm
	fd, err := plainfile.Open(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := fillFile(fd, f, mode, fresh, group); err != nil {
		_ = fd.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := fd.Close(); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

func fillFile(fd *os.File, f podspec.VolumeFile, mode os.FileMode, fresh bool, group *int64) error {
	if _, err := fd.Write(f.Data); err != nil {
		return err
	}
	final := mode
	if group != nil {
		final |= roMask
	}
	if !fresh || final != mode || !keepsMode(mode) {
		if err := fd.Chmod(final); err != nil {
			return fmt.Errorf("chmod: %w", err)
		}
	}
	uid, gid := -1, -1
	if f.FsUser != nil {
		uid = int(*f.FsUser)
	}
	if group != nil {
		gid = int(*group)
	}
	if uid == -1 && gid == -1 {
		return nil
	}
	if fd.Chown(uid, gid) == nil {
		return nil
	}
	// Apart: the user must be given (an error), the group is given where
	// it can be, as SetOwnership does.
	if uid != -1 {
		if err := fd.Chown(uid, -1); err != nil {
			return fmt.Errorf("chown: %w", err)
		}
	}
	return nil
}

// RemoveAll removes a pod's volume directories (dir: its volumes/). The
// tmpfs mounted on them (secret, projected, downwardAPI and memory
// emptyDir volumes: volumes/<plugin>/<name>) are unmounted first, and
// any mount deeper in an emptyDir; if one stays mounted (busy) nothing is
// removed, and the removal never crosses into another filesystem.
func (*Files) RemoveAll(dir string) error {
	if dir == "" || dir == "/" {
		return errors.New("refusing to remove an empty or root path")
	}
	// EmptyDirs are the volumes containers write to, and may mount in
	// (privileged, with Bidirectional propagation, the mount shows here
	// too): a bind mount of a directory of the same filesystem has the
	// same st_dev, so only the mount table shows it. The other volumes
	// are mounted by this package only, at volumes/<plugin>/<name>: found
	// without reading the table, unless one of them stays mounted.
	unmount := unmountVolumes
	if _, err := os.Lstat(filepath.Join(dir, "kubernetes.io~empty-dir")); err == nil {
		unmount = unmountUnder
	}
	if err := unmount(dir); err != nil {
		if err := unmountUnder(dir); err != nil {
			return fmt.Errorf("remove %s: %w", dir, err)
		}
	}
	if err := removeTree(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}
