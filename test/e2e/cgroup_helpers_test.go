package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/actorlet/actorlet/internal/testenv"
)

// Helpers of the cgroup end-to-end tests: each agent they start gets a
// cgroup root of its own (--cgroup-root /actorlet-e2e-<test>-<n>), made in
// every cgroup v1 hierarchy before the agent starts (upstream's kubelet
// refuses a --cgroup-root that does not exist) and removed, depth first,
// when the test ends. They read the kernel's files under /sys/fs/cgroup
// directly, never actorlet's view of them.

// cgMount is where the cgroup hierarchies are mounted.
const cgMount = "/sys/fs/cgroup"

// cgUnlimitedMemory is the largest value a v1 memory.limit_in_bytes shows
// ("no limit" is PAGE_COUNTER_MAX pages); anything at or above 1<<62 is
// treated as no limit.
const cgUnlimitedMemory = int64(1) << 62

var cgRootSeq atomic.Int64

// cgHierarchies lists the cgroup v1 hierarchies mounted under /sys/fs/cgroup
// (their directory names: cpu, cpuacct, memory, pids, systemd, ...) and
// whether a cgroup2 hierarchy is mounted there too (hybrid: unified).
func cgHierarchies(t *testing.T) (v1 []string, unified string) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+1 >= len(fields) {
			continue
		}
		mp, fstype := fields[4], fields[sep+1]
		if filepath.Dir(mp) != cgMount && mp != cgMount {
			continue
		}
		switch fstype {
		case "cgroup":
			v1 = append(v1, filepath.Base(mp))
		case "cgroup2":
			unified = mp
		}
	}
	sort.Strings(v1)
	return v1, unified
}

// cgRequireV1 ends the test where the cpu, memory and pids controllers are
// not cgroup v1 hierarchies: what these tests read. With CI=true that is a
// failure (testenv.CannotRun).
func cgRequireV1(t *testing.T) {
	t.Helper()
	v1, _ := cgHierarchies(t)
	for _, c := range []string{"cpu", "memory", "pids"} {
		if !cgHas(v1, c) {
			testenv.CannotRun(t, fmt.Sprintf("these tests read cgroup v1 files and %s/%s is not a cgroup v1 hierarchy (mounted: %v)", cgMount, c, v1))
		}
	}
}

func cgHas(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// cgNewRoot returns a fresh cgroup root for one agent,
// /actorlet-e2e-<test>-<pid>-<n>, created in every cgroup v1 hierarchy
// (cpuset's cpus and mems copied from the top, as a child cpuset starts
// empty). At the end of the test (after the agents started later have
// stopped: cleanups run last-in first-out) every directory left below it,
// in every hierarchy including the unified one, is removed depth first; one
// that cannot be removed fails the test, since a test must leave the
// machine's cgroups as it found them.
func cgNewRoot(t *testing.T) string {
	t.Helper()
	cgRequireV1(t)
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	root := fmt.Sprintf("/actorlet-e2e-%s-%d-%d", strings.Trim(name, "-"), os.Getpid(), cgRootSeq.Add(1))
	v1, unified := cgHierarchies(t)
	t.Cleanup(func() { cgRemoveTree(t, root, v1, unified) })
	for _, h := range v1 {
		dir := filepath.Join(cgMount, h, root)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			t.Fatalf("make the cgroup root %s: %v", dir, err)
		}
		if h == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(cgMount, h, f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					t.Fatalf("%s/%s: %v", dir, f, err)
				}
			}
		}
	}
	return root
}

// cgRemoveTree removes <hierarchy>/<root> and everything below it in every
// hierarchy. A cgroup whose last process just exited may refuse rmdir
// (EBUSY) for a moment: they are retried for 30 s in all.
func cgRemoveTree(t *testing.T, root string, v1 []string, unified string) {
	t.Helper()
	dirs := make([]string, 0, len(v1)+1)
	for _, h := range v1 {
		dirs = append(dirs, filepath.Join(cgMount, h, root))
	}
	if unified != "" {
		dirs = append(dirs, filepath.Join(unified, root))
	}
	deadline := time.Now().Add(30 * time.Second) // for all of them
	for _, top := range dirs {
		var all []string
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				all = append(all, p)
			}
			return nil
		})
		// deepest first
		sort.Slice(all, func(i, j int) bool { return strings.Count(all[i], "/") > strings.Count(all[j], "/") })
		for _, d := range all {
			for {
				err := syscall.Rmdir(d)
				if err == nil || errors.Is(err, fs.ErrNotExist) {
					break
				}
				if time.Now().After(deadline) {
					procs, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
					t.Errorf("cgroup %s left behind: %v (cgroup.procs %q)", d, err, strings.TrimSpace(string(procs)))
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

// cgDir is a cgroup's directory in a v1 hierarchy: cgDir("cpu", root,
// "kubepods", "burstable", "pod<uid>").
func cgDir(controller, root string, parts ...string) string {
	return filepath.Join(append([]string{cgMount, controller, root}, parts...)...)
}

// cgPodParts is the cgroupfs path of a pod's cgroup below the cgroup root,
// as upstream names it: kubepods/pod<uid> (Guaranteed),
// kubepods/burstable/pod<uid>, kubepods/besteffort/pod<uid>.
func cgPodParts(qos, uid string) []string {
	switch qos {
	case "Guaranteed":
		return []string{"kubepods", "pod" + uid}
	case "Burstable":
		return []string{"kubepods", "burstable", "pod" + uid}
	default:
		return []string{"kubepods", "besteffort", "pod" + uid}
	}
}

// cgRead reads a cgroup file as an integer: "max" (pids.max) and v1's "no
// limit" memory value read as -1.
func cgRead(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return -1, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q: %w", path, s, err)
	}
	if strings.HasSuffix(path, ".limit_in_bytes") && v >= cgUnlimitedMemory {
		return -1, nil
	}
	return v, nil
}

// cgExpect is what one cgroup directory must hold: file (relative to the
// controller's directory: "cpu/cpu.shares") to value; -1 is "no limit".
type cgExpect map[string]int64

// cgCheck compares a cgroup's files with want and returns what differs
// ("" when nothing does).
func cgCheck(root string, parts []string, want cgExpect) string {
	var diffs []string
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		controller, file, _ := strings.Cut(k, "/")
		path := filepath.Join(cgDir(controller, root, parts...), file)
		got, err := cgRead(path)
		switch {
		case err != nil:
			diffs = append(diffs, err.Error())
		case got != want[k]:
			diffs = append(diffs, fmt.Sprintf("%s = %d, want %d", path, got, want[k]))
		}
	}
	return strings.Join(diffs, "; ")
}

// cgWait waits until a cgroup holds want.
func cgWait(t *testing.T, timeout time.Duration, what, root string, parts []string, want cgExpect) {
	t.Helper()
	testenv.WaitFor(t, timeout, what, func() (bool, error) {
		if d := cgCheck(root, parts, want); d != "" {
			return false, errors.New(d)
		}
		return true, nil
	})
}

// cgExists reports which of the controllers hold the cgroup.
func cgExists(root string, parts []string, controllers ...string) (present []string) {
	for _, c := range controllers {
		if _, err := os.Stat(cgDir(c, root, parts...)); err == nil {
			present = append(present, c)
		}
	}
	return present
}

// cgWaitGone waits until none of the controllers holds the cgroup.
func cgWaitGone(t *testing.T, timeout time.Duration, what, root string, parts []string, controllers ...string) {
	t.Helper()
	testenv.WaitFor(t, timeout, what, func() (bool, error) {
		if p := cgExists(root, parts, controllers...); len(p) > 0 {
			return false, fmt.Errorf("%s still in %v", filepath.Join(parts...), p)
		}
		return true, nil
	})
}

// The conversions upstream's kubelet uses (pkg/kubelet/cm: MilliCPUToShares,
// MilliCPUToQuota), written out here so that the tests check the kernel's
// files against numbers they compute themselves.

// cgShares is the cpu.shares of milli CPUs: milli*1024/1000, at least 2.
func cgShares(milli int64) int64 {
	if milli == 0 {
		return 2
	}
	return max(min(milli*1024/1000, 262144), 2)
}

// cgQuota is the CFS quota of milli CPUs per 100 ms period, at least 1 ms.
func cgQuota(milli int64) int64 {
	if milli == 0 {
		return -1
	}
	return max(milli*100000/1000, 1000)
}

// cgPage rounds a memory limit down to the kernel's page, as v1's
// memory.limit_in_bytes shows it.
func cgPage(bytes int64) int64 {
	p := int64(os.Getpagesize())
	return bytes / p * p
}

// cgNodeCapacity is the node's cpu (milli) and memory (bytes) as upstream's
// kubelet counts them (cadvisor: the CPUs, MemTotal), read here from the
// machine itself.
func cgNodeCapacity(t *testing.T) (milliCPU, memory int64) {
	t.Helper()
	total := rcKeyed(t, "/proc/meminfo")["MemTotal"]
	if total == 0 || total > math.MaxInt64 {
		t.Fatalf("MemTotal %d", total)
	}
	return int64(runtime.NumCPU()) * 1000, int64(total)
}

// cgNodePIDs is the node's process ID capacity as upstream's kubelet counts
// it (pkg/kubelet/stats/pidlimit): the lesser of kernel.pid_max and
// kernel.threads-max.
func cgNodePIDs(t *testing.T) int64 {
	t.Helper()
	n := int64(-1)
	for _, f := range []string{"/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"} {
		v, err := cgRead(f)
		if err != nil {
			t.Fatal(err)
		}
		if n < 0 || v < n {
			n = v
		}
	}
	return n
}

// cgDiskFlags keep image GC and disk pressure out of these tests: shared
// test machines run with their disks past the defaults (image GC at 85 %
// used, imagefs.available<15 %), where the agent would remove the
// runtime's unused images (busybox, pause) and refuse API pods, which has
// nothing to do with cgroups.
var cgDiskFlags = []string{
	"--image-gc-high-threshold", "100",
	"--eviction-hard", "memory.available<100Mi,nodefs.available<1%,imagefs.available<1%",
}

// cgForkFailures is how many forks the pids controller refused in a
// cgroup's subtree: the "max" of pids.events of the cgroup and every
// cgroup below it (cgroup v1 counts a refusal in the cgroup of the
// process that forked, a container's, not in the one whose limit was hit).
func cgForkFailures(t *testing.T, dir string) uint64 {
	t.Helper()
	var n uint64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if _, err := os.Stat(filepath.Join(p, "pids.events")); err == nil {
			n += rcKeyed(t, filepath.Join(p, "pids.events"))["max"]
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
