package volume

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// The mount table of this process's namespace, read by the tests to check
// what the package mounts and unmounts (the package itself never reads it:
// it grows with every pod's tmpfs).

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
		out = append(out, mount{point: unescapeMountPath(fields[4]), fsType: fields[sep+1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("list mounts: %w", err)
	}
	return out, nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder unmounts every mount at or below dir, the deepest first; it
// fails if one stays mounted.
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
