package cgroup

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/podspec"
)

// realHost is the driver of the host's cgroups at /sys/fs/cgroup (the
// version detected) and a parent of the test's own, removed at the end.
func realHost(t *testing.T, tag string) (*Cgroupfs, podspec.CgroupName) {
	t.Helper()
	needRealCgroups(t)
	m, err := NewCgroupfs(Config{})
	if err != nil {
		t.Fatal(err)
	}
	parent := uniqueParent(tag)
	t.Cleanup(func() {
		if err := m.Destroy(parent); err != nil {
			t.Errorf("clean up %s: %v", parent.Cgroupfs(), err)
		}
		for _, d := range m.uniqueDirs(parent) {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("%s left behind", d)
			}
		}
	})
	return m, parent
}

// cpuDir and memDir are where the cgroup's cpu and memory files are.
func (m *Cgroupfs) cpuDir(n podspec.CgroupName) string { return m.dirs(n)[m.key("cpu")] }
func (m *Cgroupfs) memDir(n podspec.CgroupName) string { return m.dirs(n)[m.key("memory")] }
func (m *Cgroupfs) pidsDir(n podspec.CgroupName) string {
	return m.dirs(n)[m.key("pids")]
}
func (m *Cgroupfs) key(controller string) string {
	if m.version == 2 {
		return ""
	}
	return controller
}

// A pod-like tree on the host's real hierarchy: values set, read back
// through the manager and straight from the kernel's files, changed to
// no limit.
func TestCgroupfsRealPodTreeValues(t *testing.T) {
	m, parent := realHost(t, "values")
	kubepods := parent.Child("kubepods")
	burstable := kubepods.Child("burstable")
	pod := burstable.Child("pod0001")
	guaranteed := kubepods.Child("pod0002")

	if err := m.Create(kubepods, &podspec.CgroupResources{CPUShares: u64(4096), Memory: i64(1 << 30), PidsLimit: i64(1000)}); err != nil {
		t.Fatal(err)
	}
	if err := m.Create(burstable, &podspec.CgroupResources{CPUShares: u64(2)}); err != nil {
		t.Fatal(err)
	}
	want := &podspec.CgroupResources{CPUShares: u64(512), CPUQuota: i64(50000), CPUPeriod: u64(100000), Memory: i64(256 << 20), PidsLimit: i64(100)}
	if err := m.Create(pod, want); err != nil {
		t.Fatal(err)
	}
	if err := m.Create(guaranteed, &podspec.CgroupResources{CPUShares: u64(1024), CPUQuota: i64(100000), CPUPeriod: u64(100000), Memory: i64(128 << 20)}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []podspec.CgroupName{kubepods, burstable, pod, guaranteed} {
		if err := m.Validate(n); err != nil {
			t.Errorf("Validate(%s): %v", n.Cgroupfs(), err)
		}
	}

	got, err := m.Read(pod)
	if err != nil {
		t.Fatal(err)
	}
	checkValues(t, m, got, want)

	// What the kernel holds.
	if m.version == 1 {
		for file, v := range map[string]string{"cpu.shares": "512", "cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000"} {
			if s := readFile(t, m.cpuDir(pod), file); s != v {
				t.Errorf("%s = %s, want %s", file, s, v)
			}
		}
		if s := readFile(t, m.memDir(pod), "memory.limit_in_bytes"); s != strconv.Itoa(256<<20) {
			t.Errorf("memory.limit_in_bytes = %s", s)
		}
	} else {
		if s := readFile(t, m.cpuDir(pod), "cpu.weight"); s != strconv.FormatUint(CPUSharesToWeight(512), 10) {
			t.Errorf("cpu.weight = %s, want %d", s, CPUSharesToWeight(512))
		}
		if s := readFile(t, m.cpuDir(pod), "cpu.max"); s != "50000 100000" {
			t.Errorf("cpu.max = %s", s)
		}
		if s := readFile(t, m.memDir(pod), "memory.max"); s != strconv.Itoa(256<<20) {
			t.Errorf("memory.max = %s", s)
		}
	}
	if s := readFile(t, m.pidsDir(pod), "pids.max"); s != "100" {
		t.Errorf("pids.max = %s", s)
	}

	// No limits; the shares stay.
	if err := m.Update(pod, &podspec.CgroupResources{CPUQuota: i64(-1), Memory: i64(-1), PidsLimit: i64(-1)}); err != nil {
		t.Fatal(err)
	}
	got, err = m.Read(pod)
	if err != nil {
		t.Fatal(err)
	}
	checkValues(t, m, got, &podspec.CgroupResources{CPUShares: u64(512), CPUQuota: i64(-1), CPUPeriod: u64(100000), Memory: i64(-1), PidsLimit: i64(-1)})
	if s := readFile(t, m.pidsDir(pod), "pids.max"); s != "max" {
		t.Errorf("pids.max = %s, want max", s)
	}

	kids, err := m.Children(kubepods)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(kids, []podspec.CgroupName{burstable, guaranteed}, slices.Equal) {
		t.Errorf("Children(kubepods) = %v", kids)
	}
	if err := m.Destroy(kubepods); err != nil {
		t.Fatal(err)
	}
	if m.Exists(pod) || m.Exists(kubepods) {
		t.Error("kubepods still exists after Destroy")
	}
}

// checkValues compares what Read gave with what was set (v2 shares: the
// same weight).
func checkValues(t *testing.T, m *Cgroupfs, got, want *podspec.CgroupResources) {
	t.Helper()
	eq := func(field string, g, w *int64) {
		if g == nil || *g != *w {
			t.Errorf("%s = %v, want %d", field, deref(g), *w)
		}
	}
	if got.CPUShares == nil || (m.version == 1 && *got.CPUShares != *want.CPUShares) || !SameCPUWeight(*want.CPUShares, *got.CPUShares) {
		t.Errorf("CPUShares = %v, want %d", derefU(got.CPUShares), *want.CPUShares)
	}
	eq("CPUQuota", got.CPUQuota, want.CPUQuota)
	if got.CPUPeriod == nil || *got.CPUPeriod != *want.CPUPeriod {
		t.Errorf("CPUPeriod = %v, want %d", derefU(got.CPUPeriod), *want.CPUPeriod)
	}
	eq("Memory", got.Memory, want.Memory)
	eq("PidsLimit", got.PidsLimit, want.PidsLimit)
}

func deref(p *int64) any {
	if p == nil {
		return "nil"
	}
	return *p
}

func derefU(p *uint64) any {
	if p == nil {
		return "nil"
	}
	return *p
}

// A real process in a pod cgroup: Pids finds it from the pod and from its
// parents, Destroy refuses the pod and its parents while it runs and
// removes them once it is gone.
func TestCgroupfsRealDestroyRefusesProcess(t *testing.T) {
	m, parent := realHost(t, "procs")
	pod := parent.Child("kubepods").Child("besteffort").Child("pod0003")
	if err := m.Create(pod, &podspec.CgroupResources{CPUShares: u64(2)}); err != nil {
		t.Fatal(err)
	}
	sleep := startIn(t, m, pod, false)
	pid := sleep.Process.Pid
	for _, n := range []podspec.CgroupName{pod, parent} {
		pids, err := m.Pids(n)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(pids, []int{pid}) {
			t.Errorf("Pids(%s) = %v, want [%d]", n.Cgroupfs(), pids, pid)
		}
	}
	for _, n := range []podspec.CgroupName{pod, parent} {
		err := m.Destroy(n)
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), n.Cgroupfs()) ||
			!strings.Contains(err.Error(), "pid "+strconv.Itoa(pid)) {
			t.Errorf("Destroy(%s) with pid %d in it = %v, want ErrFailedPrecondition naming both", n.Cgroupfs(), pid, err)
		}
	}
	if !m.Exists(pod) {
		t.Fatal("refused Destroy removed the pod cgroup")
	}
	if err := sleep.Process.Signal(unix.Signal(0)); err != nil {
		t.Fatalf("the process in the cgroup is gone after a refused Destroy: %v", err)
	}

	stopProcess(sleep)
	if err := m.Destroy(pod); err != nil {
		t.Fatalf("Destroy after the process exited: %v", err)
	}
	if m.Exists(pod) {
		t.Error("pod cgroup still exists")
	}
	for _, d := range m.uniqueDirs(pod) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v, want gone", d, err)
		}
	}
	if _, err := m.Pids(pod); !errdefs.IsNotFound(err) {
		t.Errorf("Pids of a removed cgroup = %v, want ErrNotFound", err)
	}
	if err := m.Destroy(pod); err != nil {
		t.Errorf("Destroy of a removed cgroup = %v, want nil", err)
	}
}

// What the kernel refuses comes back classified, naming the file and
// the value: a memory limit below the usage of a process in the cgroup
// (v1: the kernel's EBUSY; v2: refused before writing, as upstream), a
// CPU quota below the kernel's 1ms minimum (EINVAL).
func TestCgroupfsRealKernelRefusals(t *testing.T) {
	m, parent := realHost(t, "refusals")
	pod := parent.Child("kubepods").Child("pod0004")
	if err := m.Create(pod, &podspec.CgroupResources{Memory: i64(256 << 20)}); err != nil {
		t.Fatal(err)
	}
	hogProc := startIn(t, m, pod, true)
	usage, err := m.MemoryUsage(pod)
	if err != nil {
		t.Fatal(err)
	}
	if usage < hogBytes {
		t.Fatalf("memory usage %d with a %d-byte hog in the cgroup", usage, hogBytes)
	}

	err = m.Update(pod, &podspec.CgroupResources{Memory: i64(4 << 20)})
	file := "memory.limit_in_bytes"
	if m.version == 2 {
		file = "memory.max"
	}
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !errors.Is(err, unix.EBUSY) ||
		!strings.Contains(err.Error(), file+"="+strconv.Itoa(4<<20)) || !strings.Contains(err.Error(), pod.Cgroupfs()) {
		t.Errorf("memory limit below usage: %v, want ErrFailedPrecondition/EBUSY naming %s and the value", err, file)
	}
	if got, err := m.Read(pod); err != nil || got.Memory == nil || *got.Memory != 256<<20 {
		t.Errorf("memory limit after the refusal: %v, %v; want it unchanged", got, err)
	}
	if err := hogProc.Process.Signal(unix.Signal(0)); err != nil {
		t.Errorf("the process was killed by the refused limit: %v", err)
	}

	err = m.Update(pod, &podspec.CgroupResources{CPUQuota: i64(500), CPUPeriod: u64(100000)})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "500") {
		t.Errorf("cpu quota 500us: %v, want ErrInvalidArgument/EINVAL naming the value", err)
	}
	stopProcess(hogProc)
}

// Names and values the manager refuses before touching the kernel, and
// cgroups that are not there.
func TestCgroupfsRealBadInput(t *testing.T) {
	m, parent := realHost(t, "bad")
	missing := parent.Child("nothing")
	if err := m.Update(missing, &podspec.CgroupResources{CPUShares: u64(2)}); !errdefs.IsNotFound(err) {
		t.Errorf("Update of a missing cgroup = %v, want ErrNotFound", err)
	}
	if _, err := m.Read(missing); !errdefs.IsNotFound(err) {
		t.Errorf("Read of a missing cgroup = %v, want ErrNotFound", err)
	}
	if _, err := m.Children(missing); !errdefs.IsNotFound(err) {
		t.Errorf("Children of a missing cgroup = %v, want ErrNotFound", err)
	}
	if m.Exists(missing) {
		t.Error("missing cgroup exists")
	}
	if err := m.Validate(missing); !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), missing.Cgroupfs()) {
		t.Errorf("Validate of a missing cgroup = %v", err)
	}
	for _, n := range []podspec.CgroupName{{".."}, {"a/b"}, {""}, parent.Child("..")} {
		if err := m.Create(n, nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Create(%q) = %v, want ErrInvalidArgument", n, err)
		}
	}
	if err := m.Destroy(nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Destroy(root) = %v, want ErrInvalidArgument", err)
	}
	for _, r := range []*podspec.CgroupResources{
		{CPUShares: u64(0)}, {CPUShares: u64(1 << 20)}, {CPUQuota: i64(0)}, {Memory: i64(0)}, {Memory: i64(-5)},
		{PidsLimit: i64(0)}, {HugePageLimit: map[int64]int64{1000: 1}},
	} {
		if err := m.Create(parent.Child("x"), r); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Create with %+v = %v, want ErrInvalidArgument", r, err)
		}
	}
	if err := m.Create(parent, nil); err != nil {
		t.Fatal(err)
	}
}

// The parts of a pod's lifecycle, per pod, on the host's real hierarchy:
// create the pod cgroup with its values, resize it, remove it.
func BenchmarkCgroupfsPodCreateUpdateDestroy(b *testing.B) {
	needRealCgroups(b)
	m, err := NewCgroupfs(Config{})
	if err != nil {
		b.Fatal(err)
	}
	parent := uniqueParent("bench")
	burstable := parent.Child("kubepods").Child("burstable")
	if err := m.Create(burstable, &podspec.CgroupResources{CPUShares: u64(1024)}); err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := m.Destroy(parent); err != nil {
			b.Error(err)
		}
	}()
	create := &podspec.CgroupResources{CPUShares: u64(256), CPUQuota: i64(50000), CPUPeriod: u64(100000), Memory: i64(128 << 20), PidsLimit: i64(1024)}
	update := &podspec.CgroupResources{CPUShares: u64(512), CPUQuota: i64(100000), Memory: i64(256 << 20)}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		pod := burstable.Child("pod" + strconv.Itoa(i))
		if err := m.Create(pod, create); err != nil {
			b.Fatal(err)
		}
		if err := m.Update(pod, update); err != nil {
			b.Fatal(err)
		}
		if err := m.Destroy(pod); err != nil {
			b.Fatal(err)
		}
	}
}
