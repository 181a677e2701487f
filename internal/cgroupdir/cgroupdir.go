// Package cgroupdir makes and removes the cgroup an agent started by the
// tests, the bench or the scripts gets as its --cgroup-root (upstream's
// kubelet requires it to exist), in every cgroup hierarchy of the host.
// Cgroups are the whole machine's: every agent on a real runtime gets its
// own, never the top-level /kubepods.
package cgroupdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
)

// Mount is where the host's cgroup hierarchies are mounted.
const Mount = "/sys/fs/cgroup"

// roots numbers the cgroup roots this process makes.
var roots atomic.Int64

// Name is a cgroup name no other agent uses: /<prefix>-<n>, prefix from
// $ACTORLET_CGROUP_PREFIX (a developer's own, e.g. actorlet-alice), else
// <kind>-<pid> (kind: actorlet-e2e, actorlet-bench).
func Name(kind string) string {
	prefix := os.Getenv("ACTORLET_CGROUP_PREFIX")
	if prefix == "" {
		prefix = fmt.Sprintf("%s-%d", kind, os.Getpid())
	}
	return fmt.Sprintf("/%s-%d", strings.Trim(prefix, "/"), roots.Add(1))
}

// hierarchies are the mounted hierarchies: each v1 controller's (and
// the named and unified ones of a hybrid host), or the one cgroup2 mount.
func hierarchies() ([]string, error) {
	if _, err := os.Stat(filepath.Join(Mount, "cgroup.procs")); err == nil {
		return []string{Mount}, nil // cgroup v2
	}
	entries, err := os.ReadDir(Mount)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() { // a symlink (cpu -> cpu,cpuacct) is the same hierarchy
			continue
		}
		dir := filepath.Join(Mount, e.Name())
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
			out = append(out, dir)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no cgroup hierarchy under %s", Mount)
	}
	return out, nil
}

// Make makes the cgroup name (/a/b) in every hierarchy. A v1
// cpuset cgroup gets its parent's cpus and mems (a new one has none, and
// no process could join it).
func Make(name string) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	rel := strings.Trim(name, "/")
	if rel == "" || slices.Contains(strings.Split(rel, "/"), "..") {
		return fmt.Errorf("cgroup root %q: want /<name>", name)
	}
	for _, h := range hs {
		dir := h
		for _, part := range strings.Split(rel, "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil && strings.TrimSpace(string(b)) == "" {
					v, _ := os.ReadFile(filepath.Join(parent, f))
					if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
						return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
					}
				}
			}
		}
	}
	return nil
}

// Remove removes the cgroup name and every cgroup under it in
// every hierarchy, deepest first. A cgroup that still holds a process
// stays (the error names it).
func Remove(name string) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	rel := strings.Trim(name, "/")
	if rel == "" {
		return errors.New("refusing to remove the root cgroup")
	}
	var errs []error
	for _, h := range hs {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, rel), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Exists reports whether the cgroup name exists in the hierarchy of
// controller (v1: "cpu", "memory", ...; ignored on v2), and its directory.
func Exists(controller, name string) (string, bool) {
	hs, err := hierarchies()
	if err != nil {
		return "", false
	}
	h := hs[0]
	if len(hs) > 1 || h != Mount {
		h = filepath.Join(Mount, controller)
	}
	dir := filepath.Join(h, strings.Trim(name, "/"))
	st, err := os.Stat(dir)
	return dir, err == nil && st.IsDir()
}
