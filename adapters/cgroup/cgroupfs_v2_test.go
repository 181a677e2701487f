package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/podspec"
)

// hybridUnified is the cgroup2 hierarchy a hybrid host mounts beside its
// v1 controllers.
const hybridUnified = DefaultRoot + "/unified"

// The real cgroup2 hierarchy of a hybrid host has no controllers: no
// value can be set there (no cpu.weight, memory.max or pids.max files;
// the fake tree below covers the values). What it does check on a real
// kernel: a v2 tree made and listed, a real process found through
// cgroup.procs, Destroy refusing it and removing the tree after.
func TestCgroupfsRealV2NoControllersCreatePidsDestroyNoValues(t *testing.T) {
	needRealCgroups(t)
	var st unix.Statfs_t
	needHost(t, unix.Statfs(hybridUnified, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC,
		hybridUnified+" is not a cgroup2 hierarchy: this host is not hybrid (the real-host tests run on its own version)")
	m, err := NewCgroupfs(Config{Root: hybridUnified})
	if err != nil {
		t.Fatal(err)
	}
	if m.Version() != 2 {
		t.Fatalf("Version() = %d on a cgroup2 root", m.Version())
	}
	parent := uniqueParent("v2")
	t.Cleanup(func() {
		if err := m.Destroy(parent); err != nil {
			t.Errorf("clean up: %v", err)
		}
	})
	kubepods := parent.Child("kubepods")
	pod := kubepods.Child("burstable").Child("pod0005")
	guaranteed := kubepods.Child("pod0006")
	// Values for controllers the hierarchy lacks are skipped, not errors.
	if err := m.Create(pod, &podspec.CgroupResources{CPUShares: u64(512), Memory: i64(64 << 20), PidsLimit: i64(10)}); err != nil {
		t.Fatal(err)
	}
	if err := m.Create(guaranteed, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range []podspec.CgroupName{parent, kubepods, pod, guaranteed} {
		if !m.Exists(n) {
			t.Errorf("%s does not exist after Create", n.Cgroupfs())
		}
	}
	got, err := m.Read(pod)
	if err != nil {
		t.Fatal(err)
	}
	if got.CPUShares != nil || got.Memory != nil || got.PidsLimit != nil || got.CPUQuota != nil {
		t.Errorf("Read on a hierarchy without controllers = %+v, want no values", got)
	}
	kids, err := m.Children(kubepods)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(kids, []podspec.CgroupName{kubepods.Child("burstable"), guaranteed}, slices.Equal) {
		t.Errorf("Children(kubepods) = %v", kids)
	}

	sleep := startIn(t, m, pod, false)
	pids, err := m.Pids(kubepods)
	if err != nil || !slices.Equal(pids, []int{sleep.Process.Pid}) {
		t.Errorf("Pids(kubepods) = %v, %v; want [%d]", pids, err, sleep.Process.Pid)
	}
	if err := m.Destroy(kubepods); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), strconv.Itoa(sleep.Process.Pid)) {
		t.Errorf("Destroy with a process in the tree = %v, want ErrFailedPrecondition naming its pid", err)
	}
	stopProcess(sleep)
	if err := m.Destroy(kubepods); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(hybridUnified, kubepods.Cgroupfs())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("kubepods after Destroy: %v", err)
	}
}

// fakeV2 is a directory laid out like a cgroup2 root with the host
// controllers of a systemd machine; the library writes it in its test
// mode (regular files created on write).
func fakeV2(t *testing.T) (*Cgroupfs, string) {
	t.Helper()
	prev := cgroups.TestMode
	cgroups.TestMode = true
	t.Cleanup(func() { cgroups.TestMode = prev })
	root := t.TempDir()
	for file, content := range map[string]string{
		"cgroup.controllers":     "cpuset cpu io memory hugetlb pids rdma misc\n",
		"cgroup.subtree_control": "",
		"cgroup.procs":           "1\n",
		"cpu.stat":               "usage_usec 0\n",
	} {
		if err := os.WriteFile(filepath.Join(root, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := NewCgroupfs(Config{Root: root, Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	m.made = kernelFill
	return m, root
}

// kernelFill plays the kernel's part in a cgroup dir the fake tree's
// Create made: cgroup.controllers from its parent's
// cgroup.subtree_control (as written: "+cpu +memory"), an empty
// cgroup.procs.
func kernelFill(dir string) {
	sub, _ := os.ReadFile(filepath.Join(filepath.Dir(dir), "cgroup.subtree_control"))
	ctrs := strings.ReplaceAll(string(sub), "+", "")
	_ = os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte(ctrs), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "cgroup.procs"), nil, 0o644)
}

// The v2 files on a fake cgroupfs tree: subtree_control enabled on the
// way down, cpu.weight converted from shares, cpu.max, memory.max,
// pids.max and hugetlb.<size>.max written, "max" for no limit, a quota
// changed without its period, Read back.
func TestCgroupfsFakeV2Values(t *testing.T) {
	m, root := fakeV2(t)
	kubepods := podspec.CgroupName{"kubepods"}
	pod := kubepods.Child("burstable").Child("pod0007")
	sizes := cgroups.HugePageSizes()
	hp := map[int64]int64{}
	if len(sizes) > 0 {
		b, err := hugePageSizeBytes(sizes[0])
		if err != nil {
			t.Fatal(err)
		}
		hp[b] = 4 * b
	}
	want := &podspec.CgroupResources{CPUShares: u64(512), CPUQuota: i64(50000), CPUPeriod: u64(100000),
		Memory: i64(256 << 20), PidsLimit: i64(100), HugePageLimit: hp}
	if err := m.Create(pod, want); err != nil {
		t.Fatal(err)
	}
	const enabled = "+cpu +cpuset +hugetlb +memory +pids"
	for _, d := range []string{root, filepath.Join(root, "kubepods"), filepath.Join(root, "kubepods/burstable")} {
		if s := readFile(t, d, "cgroup.subtree_control"); s != enabled {
			t.Errorf("%s/cgroup.subtree_control = %q, want %q", d, s, enabled)
		}
	}
	dir := filepath.Join(root, pod.Cgroupfs())
	if _, err := os.Stat(filepath.Join(dir, "cgroup.subtree_control")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pod cgroup's own subtree_control was written (%v): the runtime enables it for its containers", err)
	}
	for file, v := range map[string]string{
		"cpu.weight": strconv.FormatUint(CPUSharesToWeight(512), 10),
		"cpu.max":    "50000 100000",
		"memory.max": strconv.Itoa(256 << 20),
		"pids.max":   "100",
	} {
		if s := readFile(t, dir, file); s != v {
			t.Errorf("%s = %q, want %q", file, s, v)
		}
	}
	for i, s := range sizes {
		want := "0" // sizes the pod does not ask for: none, as upstream
		if i == 0 {
			b, _ := hugePageSizeBytes(s)
			want = strconv.FormatInt(4*b, 10)
		}
		if got := readFile(t, dir, "hugetlb."+s+".max"); got != want {
			t.Errorf("hugetlb.%s.max = %q, want %q", s, got, want)
		}
	}

	if err := m.Validate(pod); err != nil {
		t.Errorf("Validate: %v", err)
	}
	got, err := m.Read(pod)
	if err != nil {
		t.Fatal(err)
	}
	checkValues(t, m, got, want)
	if *got.CPUShares != CPUWeightToShares(CPUSharesToWeight(512)) {
		t.Errorf("CPUShares read = %d", *got.CPUShares)
	}
	if len(sizes) > 0 && len(got.HugePageLimit) != len(sizes) {
		t.Errorf("HugePageLimit read = %v for sizes %v", got.HugePageLimit, sizes)
	}

	// The quota alone keeps the period; no limits are "max".
	if err := m.Update(pod, &podspec.CgroupResources{CPUQuota: i64(-1), Memory: i64(-1), PidsLimit: i64(-1)}); err != nil {
		t.Fatal(err)
	}
	for file, v := range map[string]string{"cpu.max": "max 100000", "memory.max": "max", "pids.max": "max"} {
		if s := readFile(t, dir, file); s != v {
			t.Errorf("%s = %q, want %q", file, s, v)
		}
	}
	if err := m.Update(pod, &podspec.CgroupResources{CPUPeriod: u64(50000)}); err != nil {
		t.Fatal(err)
	}
	if s := readFile(t, dir, "cpu.max"); s != "max 50000" {
		t.Errorf("cpu.max after a period change = %q, want the quota kept", s)
	}

	// Parents already enabled (as the kernel shows them, without '+')
	// are not written again.
	if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("cpuset cpu io memory hugetlb pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Create(kubepods.Child("pod0008"), nil); err != nil {
		t.Fatal(err)
	}
	if s := readFile(t, root, "cgroup.subtree_control"); s != "cpuset cpu io memory hugetlb pids" {
		t.Errorf("root subtree_control rewritten: %q", s)
	}

	// Exists needs every controller enabled down to the cgroup.
	if err := os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte("cpuset cpu memory hugetlb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(pod); !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "pids") {
		t.Errorf("Validate with pids not enabled = %v, want ErrNotFound naming pids", err)
	}
	if m.Exists(pod) {
		t.Error("Exists with pids not enabled")
	}
	kids, err := m.Children(kubepods)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(kids, []podspec.CgroupName{kubepods.Child("burstable"), kubepods.Child("pod0008")}, slices.Equal) {
		t.Errorf("Children(kubepods) = %v", kids)
	}
}

// On the fake tree: a memory limit below memory.current is refused as
// upstream refuses it (before the kernel would OOM-kill), and Destroy
// refuses a cgroup whose cgroup.procs lists a process.
func TestCgroupfsFakeV2Refusals(t *testing.T) {
	m, root := fakeV2(t)
	pod := podspec.CgroupName{"kubepods", "pod0009"}
	if err := m.Create(pod, &podspec.CgroupResources{Memory: i64(256 << 20)}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, pod.Cgroupfs())
	if err := os.WriteFile(filepath.Join(dir, "memory.current"), []byte(strconv.Itoa(100<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	err := m.Update(pod, &podspec.CgroupResources{Memory: i64(50 << 20)})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), "memory.max="+strconv.Itoa(50<<20)) {
		t.Errorf("memory.max below memory.current: %v", err)
	}
	if s := readFile(t, dir, "memory.max"); s != strconv.Itoa(256<<20) {
		t.Errorf("memory.max after the refusal = %s", s)
	}
	if usage, err := m.MemoryUsage(pod); err != nil || usage != 100<<20 {
		t.Errorf("MemoryUsage = %d, %v", usage, err)
	}

	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("4242\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if pids, err := m.Pids(podspec.CgroupName{"kubepods"}); err != nil || !slices.Equal(pids, []int{4242}) {
		t.Errorf("Pids(kubepods) = %v, %v", pids, err)
	}
	if err := m.Destroy(pod); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "pid 4242") {
		t.Errorf("Destroy with pid 4242 in cgroup.procs = %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("refused Destroy removed %s: %v", dir, err)
	}
}

// A v2 root without cgroup.controllers is not a cgroup2 root.
func TestCgroupfsV2RootWithoutControllers(t *testing.T) {
	if _, err := NewCgroupfs(Config{Root: t.TempDir(), Version: 2}); !errdefs.IsNotFound(err) {
		t.Errorf("NewCgroupfs on an empty directory as v2 = %v, want ErrNotFound", err)
	}
	if _, err := NewCgroupfs(Config{Root: t.TempDir()}); !errdefs.IsNotFound(err) {
		t.Errorf("NewCgroupfs detecting an empty directory = %v, want ErrNotFound", err)
	}
	if _, err := NewCgroupfs(Config{Root: t.TempDir(), Version: 3}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("NewCgroupfs version 3 = %v, want ErrInvalidArgument", err)
	}
}
