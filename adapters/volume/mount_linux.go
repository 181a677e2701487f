package volume

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/actorlet/actorlet/internal/mountinfo"
)

// A pod's setup and teardown never read the mount table
// (/proc/self/mountinfo): it holds a line per tmpfs of every pod on the
// node, so reading it per pod would make their cost grow with the node's
// pods. A mount point is found as a directory on another device than its
// parent. The table is read only for the teardown of a pod with
// emptyDirs (unmountUnder), where a container may have mounted.

// tmpfsMagic is statfs's f_type of a tmpfs (linux/magic.h).
const tmpfsMagic = 0x01021994

// isMountPoint tells whether something is mounted at dir: dir is on
// another device than its parent. (A bind mount of a directory of the
// same filesystem is not seen; the package makes none.)
func isMountPoint(dir string) (bool, error) {
	var st, parent syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return false, &fs.PathError{Op: "lstat", Path: dir, Err: err}
	}
	p := filepath.Dir(filepath.Clean(dir))
	if err := syscall.Lstat(p, &parent); err != nil {
		return false, &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	return st.Dev != parent.Dev, nil
}

// isTmpfsMount tells whether a tmpfs is mounted at dir.
func isTmpfsMount(dir string) (bool, error) {
	mounted, err := isMountPoint(dir)
	if err != nil || !mounted {
		return false, err
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false, &fs.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return st.Type == tmpfsMagic, nil
}

// mountTmpfs mounts a tmpfs of size bytes (0: the kernel's default, half
// the memory) at dir, its root with mode perm (0: the kernel's 1777, as
// upstream's memory-backed emptyDir).
func mountTmpfs(dir string, size int64, perm os.FileMode) error {
	var data string
	if size > 0 {
		data = "size=" + strconv.FormatInt(size, 10)
	}
	if perm != 0 {
		if data != "" {
			data += ","
		}
		data += "mode=" + strconv.FormatUint(uint64(perm&(os.ModePerm)), 8)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, data); err != nil {
		return fmt.Errorf("mount tmpfs on %s (%s): %w", dir, data, err)
	}
	return nil
}

// mountRefused tells whether a mount failed because this process may not
// mount (no CAP_SYS_ADMIN in its mount namespace's user namespace): every
// later mount would fail the same way.
func mountRefused(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES)
}

// maxStacked bounds the unmounts of one mount point (mounts stacked on
// it): a loop that never ends is worse than an error.
const maxStacked = 16

// unmountVolumes unmounts what is mounted on dir (a pod's volumes
// directory), on its entries and on theirs (volumes/<plugin>/<volume>,
// where this package mounts its tmpfs), each mount stacked there, and
// fails at the first that stays mounted (busy), before anything is
// removed. A missing dir has nothing mounted. Deeper mounts (none of this
// package's) are left to removeTree, which refuses to cross them.
func unmountVolumes(dir string) error {
	if err := unmountAt(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	plugins, err := readDirs(dir)
	if err != nil {
		return err
	}
	for _, plugin := range plugins {
		if err := unmountAt(plugin); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		vols, err := readDirs(plugin)
		if err != nil {
			return err
		}
		for _, v := range vols {
			if err := unmountAt(v); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// readDirs lists the directories in dir (by the entries' types: a symlink
// is not one); a missing dir has none.
func readDirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}

// unmountAt unmounts every mount stacked on dir; it fails if dir stays a
// mount point.
func unmountAt(dir string) error {
	for range maxStacked {
		mounted, err := isMountPoint(dir)
		if err != nil || !mounted {
			return err
		}
		if err := syscall.Unmount(dir, 0); err != nil && err != syscall.EINVAL {
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted after %d unmounts", dir, maxStacked)
}

// removeTree removes dir and everything in it, as os.RemoveAll, without
// crossing into another filesystem: a directory on another device than
// dir (a mount left there) is not entered, and the removal fails there.
func removeTree(dir string) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		if err == syscall.ENOENT {
			return nil
		}
		return &fs.PathError{Op: "lstat", Path: dir, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return os.Remove(dir)
	}
	return removeDir(dir, st.Dev)
}

func removeDir(dir string, dev uint64) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if !e.IsDir() {
			if err := syscall.Unlink(p); err != nil && err != syscall.ENOENT {
				return &fs.PathError{Op: "unlink", Path: p, Err: err}
			}
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			if err == syscall.ENOENT {
				continue
			}
			return &fs.PathError{Op: "lstat", Path: p, Err: err}
		}
		if st.Dev != dev {
			return fmt.Errorf("%s is still mounted", p)
		}
		if err := removeDir(p, dev); err != nil {
			return err
		}
	}
	if err := syscall.Rmdir(dir); err != nil && err != syscall.ENOENT {
		return &fs.PathError{Op: "rmdir", Path: dir, Err: err}
	}
	return nil
}

// mountInfo is where the mounts of this process's namespace are listed.
var mountInfo = "/proc/self/mountinfo"

// mount is one line of mountinfo: where, and which filesystem type.
type mount struct {
	point, fsType string
}

// mounts lists the mounts of this process's mount namespace.
func mounts() ([]mount, error) {
	f, err := os.Open(mountInfo)
	if err != nil {
		return nil, fmt.Errorf("list mounts: %w", err)
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		out = append(out, mount{point: mountinfo.Unescape(fields[4]), fsType: fields[sep+1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("list mounts: %w", err)
	}
	return out, nil
}

// unmountUnder unmounts every mount at or below dir that the mount table
// lists, the deepest first; it fails if one stays mounted. The slow way
// (the table grows with the node's pods), for what unmountVolumes does
// not see: a mount in an emptyDir, or one stacked on a busy volume.
func unmountUnder(dir string) error {
	ms, err := mounts()
	if err != nil {
		return err
	}
	dir = filepath.Clean(dir)
	var points []string
	for _, m := range ms {
		if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
			points = append(points, m.point)
		}
	}
	if len(points) == 0 {
		return nil // nothing mounted there: nothing to list again
	}
	// Deepest first; a point mounted twice is unmounted twice.
	sort.SliceStable(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		if err := syscall.Unmount(p, 0); err != nil && err != syscall.EINVAL && err != syscall.ENOENT {
			return fmt.Errorf("unmount %s: %w", p, err)
		}
	}
	ms, err = mounts()
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
			return fmt.Errorf("%s is still mounted", m.point)
		}
	}
	return nil
}
