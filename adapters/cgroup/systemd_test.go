package cgroup

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"

	cgroupactor "github.com/actorlet/actorlet/actors/cgroup"
	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/fakesystemd"
	"github.com/actorlet/actorlet/podspec"
)

var _ cgroupactor.Manager = (*Systemd)(nil)

func TestSystemdUnitName(t *testing.T) {
	for _, tc := range []struct {
		name podspec.CgroupName
		unit string
		path string
	}{
		{nil, "-.slice", "/"},
		{podspec.CgroupName{}, "-.slice", "/"},
		{podspec.CgroupName{"kubepods"}, "kubepods.slice", "/kubepods.slice"},
		{podspec.CgroupName{"kubepods", "besteffort"}, "kubepods-besteffort.slice", "/kubepods.slice/kubepods-besteffort.slice"},
		// a '-' in a part is '_' in the unit (pod UIDs)
		{podspec.CgroupName{"kubepods", "burstable", "pod1234-abcd-5678"}, "kubepods-burstable-pod1234_abcd_5678.slice",
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd_5678.slice"},
		// a cgroup root of several parts (--cgroup-root /a-b/c)
		{podspec.CgroupName{"a-b", "c", "kubepods"}, "a_b-c-kubepods.slice", "/a_b.slice/a_b-c.slice/a_b-c-kubepods.slice"},
	} {
		got, err := SystemdUnitName(tc.name)
		if err != nil || got != tc.unit {
			t.Errorf("SystemdUnitName(%q) = %q, %v; want %q", tc.name, got, err, tc.unit)
		}
		// the unit's cgroup, as systemd expands it, is the name's path
		if p, err := fakesystemd.ExpandSlice(got); err != nil || p != tc.path || tc.name.Systemd() != tc.path {
			t.Errorf("%q: systemd puts %s at %q (%v), the name's path is %q; want %q", tc.name, got, p, err, tc.name.Systemd(), tc.path)
		}
		back, ok := systemdParseUnit(got)
		if !ok || !reflect.DeepEqual(back, append(podspec.CgroupName{}, tc.name...)) {
			t.Errorf("systemdParseUnit(%q) = %q, %v; want %q", got, back, ok, tc.name)
		}
	}
	for _, bad := range []podspec.CgroupName{{"kubepods", ""}, {"a_b"}, {"a/b"}} {
		if u, err := SystemdUnitName(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("SystemdUnitName(%q) = %q, %v; want ErrInvalidArgument", bad, u, err)
		}
	}
	for _, bad := range []string{"kubepods", ".slice", "a--b.slice", "kubepods.scope"} {
		if n, ok := systemdParseUnit(bad); ok {
			t.Errorf("systemdParseUnit(%q) = %q, want not a slice name", bad, n)
		}
	}
}

func TestSystemdValues(t *testing.T) {
	// systemd's CPUQuota granularity is 10ms per second: the quota written
	// to cgroupfs is rounded up with it, as the library does
	for _, tc := range []struct {
		quota, wantQuota int64
		period, perSec   uint64
	}{
		{50000, 50000, 100000, 500000},
		{12345, 13000, 100000, 130000},
		{1000, 1000, 100000, 10000},
		{1000, 1000, 10000, 100000},
		{1 << 50, -1, 100000, math.MaxUint64},
	} {
		perSec, q := systemdQuotaPerSec(tc.quota, tc.period)
		if perSec != tc.perSec || q != tc.wantQuota {
			t.Errorf("systemdQuotaPerSec(%d, %d) = %d, %d; want %d, %d", tc.quota, tc.period, perSec, q, tc.perSec, tc.wantQuota)
		}
	}
	for v, want := range map[string]int{`"v252.5-1.fc38"`: 252, "245": 245, `"249.11-0ubuntu3"`: 249, "": -1} {
		if got := systemdVersionNumber(v); got != want {
			t.Errorf("systemdVersionNumber(%q) = %d, want %d", v, got, want)
		}
	}
}

func sdU64(v uint64) *uint64 { return &v }
func sdI64(v int64) *int64   { return &v }

// systemdEnv is the driver on a fake systemd on a real dbus-daemon, over a
// fake cgroup tree.
type systemdEnv struct {
	root string
	fake *fakesystemd.Systemd
	m    *Systemd
	addr string
}

func newSystemdEnv(t *testing.T, version int) *systemdEnv {
	t.Helper()
	prev := cgroups.TestMode
	cgroups.TestMode = true // the tree's files are plain files
	t.Cleanup(func() { cgroups.TestMode = prev })
	addr := fakesystemd.StartBus(t)
	root := t.TempDir()
	if err := fakesystemd.MakeTree(root, version); err != nil {
		t.Fatal(err)
	}
	fake, err := fakesystemd.Start(fakesystemd.Config{Address: addr, Root: root, CgroupVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	booted := t.TempDir()
	m, err := NewSystemd(SystemdConfig{Address: addr, Root: root, BootedDir: booted})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if m.Version() != version || m.Driver() != podspec.CgroupDriverSystemd {
		t.Fatalf("driver on a v%d tree: version %d, driver %s", version, m.Version(), m.Driver())
	}
	return &systemdEnv{root: root, fake: fake, m: m, addr: addr}
}

// file is the content of a cgroup file: on v1 in hierarchy h.
func (e *systemdEnv) file(t *testing.T, h string, name podspec.CgroupName, file string) string {
	t.Helper()
	dir := filepath.Join(e.root, h, name.Systemd())
	if e.m.Version() == 2 {
		dir = filepath.Join(e.root, name.Systemd())
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatalf("%s of %s: %v", file, name.Cgroupfs(), err)
	}
	return strings.TrimSpace(string(b))
}

// prop is the property the fake systemd holds for unit.
func (e *systemdEnv) prop(t *testing.T, unit, name string) any {
	t.Helper()
	u, ok := e.fake.Unit(unit)
	if !ok {
		t.Fatalf("systemd has no unit %s (units %v)", unit, e.fake.Units())
	}
	v, ok := u.Properties[name]
	if !ok {
		t.Fatalf("unit %s has no property %s (it has %v)", unit, name, u.Properties)
	}
	return v.Value()
}

var (
	sdKubepods  = podspec.CgroupName{"kubepods"}
	sdBurstable = podspec.CgroupName{"kubepods", "burstable"}
	sdPod       = podspec.CgroupName{"kubepods", "burstable", "pod6f1e-22aa-4b3c"}
	sdPodUnit   = "kubepods-burstable-pod6f1e_22aa_4b3c.slice"
)

func TestSystemdFake(t *testing.T) {
	for _, v := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) { testSystemdFake(t, v) })
	}
}

func testSystemdFake(t *testing.T, v int) {
	e := newSystemdEnv(t, v)
	m := e.m
	if !m.Exists(nil) {
		t.Error("the root does not exist")
	}
	if m.Exists(sdKubepods) {
		t.Fatal("kubepods exists before Create")
	}
	// kubepods sized from allocatable, the QoS cgroup, a burstable pod with
	// a CPU and memory limit and a pids limit
	if err := m.Create(sdKubepods, &podspec.CgroupResources{CPUShares: sdU64(2048), Memory: sdI64(3 << 30), PidsLimit: sdI64(-1)}); err != nil {
		t.Fatalf("create kubepods: %v", err)
	}
	if err := m.Create(sdBurstable, &podspec.CgroupResources{CPUShares: sdU64(512)}); err != nil {
		t.Fatalf("create burstable: %v", err)
	}
	podRes := &podspec.CgroupResources{CPUShares: sdU64(256), CPUQuota: sdI64(50000), CPUPeriod: sdU64(100000), Memory: sdI64(256 << 20), PidsLimit: sdI64(100)}
	if err := m.Create(sdPod, podRes); err != nil {
		t.Fatalf("create pod: %v", err)
	}

	// units, their parents, their properties
	if got, want := e.fake.Units(), []string{sdPodUnit, "kubepods-burstable.slice", "kubepods.slice"}; !reflect.DeepEqual(got, want) {
		t.Errorf("units %v, want %v", got, want)
	}
	for unit, parent := range map[string]string{"kubepods.slice": "-.slice", "kubepods-burstable.slice": "kubepods.slice", sdPodUnit: "kubepods-burstable.slice"} {
		if got := e.prop(t, unit, "Wants"); !reflect.DeepEqual(got, []string{parent}) {
			t.Errorf("%s Wants=%v, want [%s]", unit, got, parent)
		}
		for _, acct := range []string{"CPUAccounting", "MemoryAccounting", "TasksAccounting"} {
			if got := e.prop(t, unit, acct); got != true {
				t.Errorf("%s %s=%v, want true", unit, acct, got)
			}
		}
		if got := e.prop(t, unit, "DefaultDependencies"); got != false {
			t.Errorf("%s DefaultDependencies=%v, want false", unit, got)
		}
	}
	shares, memory := "CPUShares", "MemoryLimit"
	podShares := uint64(256)
	if v == 2 {
		shares, memory = "CPUWeight", "MemoryMax"
		podShares = CPUSharesToWeight(256)
	}
	for _, c := range []struct {
		unit, prop string
		want       any
	}{
		{"kubepods.slice", memory, uint64(3 << 30)},
		{"kubepods.slice", "TasksMax", uint64(math.MaxUint64)},
		{sdPodUnit, shares, podShares},
		{sdPodUnit, "CPUQuotaPerSecUSec", uint64(500000)},
		{sdPodUnit, "CPUQuotaPeriodUSec", uint64(100000)},
		{sdPodUnit, memory, uint64(256 << 20)},
		{sdPodUnit, "TasksMax", uint64(100)},
	} {
		if got := e.prop(t, c.unit, c.prop); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %s=%v, want %v", c.unit, c.prop, got, c.want)
		}
	}
	if n := len(e.fake.CallsTo("SetUnitProperties")); n != 0 {
		t.Errorf("%d SetUnitProperties calls creating new slices, want 0 (the values go with StartTransientUnit)", n)
	}

	// the same values in cgroupfs, at the slices' nested paths
	if v == 1 {
		for _, c := range []struct{ h, file, want string }{
			{"cpu", "cpu.shares", "256"}, {"cpu", "cpu.cfs_quota_us", "50000"}, {"cpu", "cpu.cfs_period_us", "100000"},
			{"memory", "memory.limit_in_bytes", strconv.Itoa(256 << 20)}, {"pids", "pids.max", "100"},
			// cpuset: the driver copied the parent's CPUs into the new
			// cgroup, as the library does
			{"cpuset", "cpuset.cpus", "0-1"},
		} {
			if got := e.file(t, c.h, sdPod, c.file); got != c.want {
				t.Errorf("pod %s/%s = %q, want %q", c.h, c.file, got, c.want)
			}
		}
		if got := e.file(t, "cpu", sdKubepods, "cpu.shares"); got != "2048" {
			t.Errorf("kubepods cpu.shares = %q, want 2048", got)
		}
	} else {
		for _, c := range []struct{ file, want string }{
			{"cpu.weight", strconv.FormatUint(CPUSharesToWeight(256), 10)}, {"cpu.max", "50000 100000"},
			{"memory.max", strconv.Itoa(256 << 20)}, {"pids.max", "100"},
		} {
			if got := e.file(t, "", sdPod, c.file); got != c.want {
				t.Errorf("pod %s = %q, want %q", c.file, got, c.want)
			}
		}
		if got := e.file(t, "", sdKubepods, "pids.max"); got != "max" {
			t.Errorf("kubepods pids.max = %q, want max", got)
		}
		for _, c := range []string{"cpu", "memory", "pids"} {
			if on := e.file(t, "", sdBurstable, "cgroup.subtree_control"); !systemdHas(on, c) {
				t.Errorf("burstable cgroup.subtree_control %q lacks %s", on, c)
			}
		}
	}
	for _, n := range []podspec.CgroupName{sdKubepods, sdBurstable, sdPod} {
		if !m.Exists(n) {
			t.Errorf("%s does not exist after Create", n.Cgroupfs())
		}
	}
	got, err := m.Read(sdPod)
	if err != nil {
		t.Fatal(err)
	}
	wantShares := uint64(256)
	if v == 2 {
		wantShares = CPUWeightToShares(CPUSharesToWeight(256)) // the v2 round trip
	}
	if *got.CPUShares != wantShares || *got.CPUQuota != 50000 || *got.CPUPeriod != 100000 || *got.Memory != 256<<20 || *got.PidsLimit != 100 {
		t.Errorf("Read(pod) = shares %d quota %d period %d memory %d pids %d", *got.CPUShares, *got.CPUQuota, *got.CPUPeriod, *got.Memory, *got.PidsLimit)
	}

	// Update: a resize raises the memory limit and removes the CPU quota
	if err := m.Update(sdPod, &podspec.CgroupResources{Memory: sdI64(512 << 20), CPUQuota: sdI64(-1), CPUPeriod: sdU64(100000)}); err != nil {
		t.Fatalf("update pod: %v", err)
	}
	if calls := e.fake.CallsTo("SetUnitProperties"); len(calls) != 1 || calls[0].Unit != sdPodUnit || calls[0].Err != "" {
		t.Errorf("SetUnitProperties calls %+v, want one on %s", calls, sdPodUnit)
	}
	if got := e.prop(t, sdPodUnit, memory); got != uint64(512<<20) {
		t.Errorf("after Update %s=%v, want %d", memory, got, 512<<20)
	}
	if got := e.prop(t, sdPodUnit, "CPUQuotaPerSecUSec"); got != uint64(math.MaxUint64) {
		t.Errorf("after Update CPUQuotaPerSecUSec=%v, want infinity", got)
	}
	if got := e.prop(t, sdPodUnit, shares); got != podShares {
		t.Errorf("after Update %s=%v, want %v unchanged", shares, got, podShares)
	}
	if got, _ := m.Read(sdPod); *got.Memory != 512<<20 || *got.CPUQuota != -1 || *got.CPUShares != wantShares {
		t.Errorf("after Update Read(pod) = memory %d quota %d shares %d", *got.Memory, *got.CPUQuota, *got.CPUShares)
	}
	if err := m.Update(podspec.CgroupName{"kubepods", "besteffort"}, &podspec.CgroupResources{CPUShares: sdU64(2)}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Update of a cgroup that is not there: %v, want ErrNotFound", err)
	}
	// Create of an existing slice updates it: systemd says UnitExists
	if err := m.Create(sdBurstable, &podspec.CgroupResources{CPUShares: sdU64(1024)}); err != nil {
		t.Fatalf("create burstable again: %v", err)
	}
	wantQoS := any(uint64(1024))
	if v == 2 {
		wantQoS = CPUSharesToWeight(1024)
	}
	if got := e.prop(t, "kubepods-burstable.slice", shares); got != wantQoS {
		t.Errorf("burstable %s=%v after a second Create, want %v", shares, got, wantQoS)
	}

	// Children
	best := podspec.CgroupName{"kubepods", "besteffort"}
	if err := m.Create(best, &podspec.CgroupResources{CPUShares: sdU64(2)}); err != nil {
		t.Fatal(err)
	}
	if kids, err := m.Children(sdKubepods); err != nil || !reflect.DeepEqual(kids, []podspec.CgroupName{best, sdBurstable}) {
		t.Errorf("Children(kubepods) = %q, %v; want besteffort, burstable", kids, err)
	}
	if kids, err := m.Children(sdBurstable); err != nil || !reflect.DeepEqual(kids, []podspec.CgroupName{sdPod}) {
		t.Errorf("Children(burstable) = %q, %v; want [%q]", kids, err, sdPod)
	}
	if kids, err := m.Children(sdPod); err != nil || len(kids) != 0 {
		t.Errorf("Children(pod) = %q, %v; want none", kids, err)
	}
	if _, err := m.Children(podspec.CgroupName{"nope"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Children of a cgroup that is not there: %v, want ErrNotFound", err)
	}

	// Destroy refuses a cgroup with a process, in it or below it
	procs := filepath.Join(e.root, "memory", sdPod.Systemd(), "cgroup.procs")
	if v == 2 {
		procs = filepath.Join(e.root, sdPod.Systemd(), "cgroup.procs")
	}
	self := strconv.Itoa(os.Getpid())
	if err := os.WriteFile(procs, []byte(self+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if pids, err := m.Pids(sdBurstable); err != nil || !reflect.DeepEqual(pids, []int{os.Getpid()}) {
		t.Errorf("Pids(burstable) = %v, %v; want [%d]", pids, err, os.Getpid())
	}
	for _, n := range []podspec.CgroupName{sdPod, sdBurstable} {
		err := m.Destroy(n)
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), self) {
			t.Errorf("Destroy(%s) with a process: %v, want ErrFailedPrecondition naming pid %s", n.Cgroupfs(), err, self)
		}
	}
	if calls := e.fake.CallsTo("StopUnit"); len(calls) != 0 {
		t.Errorf("systemd was asked to stop %+v: it would kill the process", calls)
	}
	if !m.Exists(sdPod) {
		t.Error("the pod cgroup is gone after a refused Destroy")
	}
	// gone, the process: the pod's slice is stopped and its cgroup removed
	if err := os.WriteFile(procs, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Destroy(sdPod); err != nil {
		t.Fatalf("Destroy(pod): %v", err)
	}
	if calls := e.fake.CallsTo("StopUnit"); len(calls) != 1 || calls[0].Unit != sdPodUnit || calls[0].Result != "done" {
		t.Errorf("StopUnit calls %+v, want one on %s, done", calls, sdPodUnit)
	}
	if _, ok := e.fake.Unit(sdPodUnit); ok {
		t.Errorf("unit %s still loaded", sdPodUnit)
	}
	if m.Exists(sdPod) || m.anyDir(sdPod) {
		t.Errorf("the pod cgroup is still there: %v", m.dirs(sdPod))
	}
	if !m.Exists(sdBurstable) {
		t.Error("destroying the pod removed its QoS cgroup")
	}
	if err := m.Destroy(sdPod); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Destroy of a cgroup that is gone: %v, want ErrNotFound", err)
	}
	// kubepods: systemd stops the slices in it
	if err := m.Destroy(sdKubepods); err != nil {
		t.Fatalf("Destroy(kubepods): %v", err)
	}
	if units := e.fake.Units(); len(units) != 0 {
		t.Errorf("units left: %v", units)
	}
	for _, n := range []podspec.CgroupName{sdKubepods, sdBurstable, best} {
		if m.anyDir(n) {
			t.Errorf("%s still has directories", n.Cgroupfs())
		}
	}
	if err := m.Destroy(nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Destroy(root): %v, want ErrInvalidArgument", err)
	}
}

// TestSystemdErrors: what systemd refuses comes back classified, and a
// failed start job is an error.
func TestSystemdErrors(t *testing.T) {
	e := newSystemdEnv(t, 2)
	e.fake.FailNext("StartTransientUnit", fakesystemd.ErrInvalidArgs, "Invalid argument")
	err := e.m.Create(sdKubepods, &podspec.CgroupResources{CPUShares: sdU64(2)})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "kubepods.slice") {
		t.Errorf("Create refused by systemd: %v, want ErrInvalidArgument naming the unit", err)
	}
	if err := e.m.Create(sdKubepods, nil); err != nil {
		t.Fatal(err)
	}
	e.fake.FailNext("SetUnitProperties", "org.freedesktop.DBus.Error.AccessDenied", "denied")
	if err := e.m.Update(sdKubepods, &podspec.CgroupResources{Memory: sdI64(1 << 30)}); err == nil || !strings.Contains(err.Error(), "denied") {
		t.Errorf("Update refused by systemd: %v, want its error", err)
	}
	// a unit systemd lost whose cgroup is there: Update starts it again
	e.fake.Forget("kubepods.slice")
	if _, err := dbusCall(e.addr, "GetUnit", "kubepods.slice"); err == nil || !strings.Contains(err.Error(), "not loaded") {
		t.Fatalf("GetUnit of a forgotten unit: %v", err)
	}
	if err := e.m.Update(sdKubepods, &podspec.CgroupResources{Memory: sdI64(1 << 30)}); err != nil {
		t.Fatalf("Update of a cgroup whose unit is not loaded: %v", err)
	}
	if got := e.prop(t, "kubepods.slice", "MemoryMax"); got != uint64(1<<30) {
		t.Errorf("MemoryMax=%v after the unit was started again", got)
	}
}

// TestSystemdJobTimeout: a systemd that never ends a job is an error in
// JobTimeout, not a wait forever.
func TestSystemdJobTimeout(t *testing.T) {
	e := newSystemdEnv(t, 1)
	m, err := NewSystemd(SystemdConfig{Address: e.addr, Root: e.root, BootedDir: t.TempDir(), JobTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e.fake.HoldJobs(true)
	if err := m.Create(sdKubepods, nil); !errors.Is(err, errdefs.ErrDeadlineExceeded) {
		t.Errorf("Create with a hung job: %v, want ErrDeadlineExceeded", err)
	}
	e.fake.HoldJobs(false)
	if err := m.Destroy(sdKubepods); err != nil {
		t.Errorf("Destroy once systemd answers again: %v", err)
	}
}

// dbusCall calls a Manager method on the bus as another client would.
func dbusCall(addr, method string, args ...any) ([]any, error) {
	c, err := dbus.Connect(addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	call := c.Object(fakesystemd.BusName, fakesystemd.ManagerPath).Call(fakesystemd.ManagerIf+"."+method, 0, args...)
	return call.Body, call.Err
}

// TestSystemdNotRunning: where systemd does not run, NewSystemd refuses
// with upstream's message.
func TestSystemdNotRunning(t *testing.T) {
	root := t.TempDir()
	if err := fakesystemd.MakeTree(root, 2); err != nil {
		t.Fatal(err)
	}
	booted := t.TempDir()
	check := func(what string, cfg SystemdConfig, more string) {
		t.Helper()
		m, err := NewSystemd(cfg)
		if err == nil {
			m.Close()
			t.Fatalf("%s: NewSystemd succeeded", what)
		}
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), systemdNotRunning) || !strings.Contains(err.Error(), more) {
			t.Errorf("%s: %v; want ErrFailedPrecondition, %q and %q", what, err, systemdNotRunning, more)
		}
	}
	// not booted with systemd
	check("no /run/systemd/system", SystemdConfig{Root: root, BootedDir: filepath.Join(booted, "system")}, "is not a directory")
	// no bus at the address
	check("no bus", SystemdConfig{Root: root, BootedDir: booted, Address: "unix:path=" + filepath.Join(booted, "nobus")}, "cannot connect")
	// a bus, no systemd on it
	addr := fakesystemd.StartBus(t)
	check("no systemd on the bus", SystemdConfig{Root: root, BootedDir: booted, Address: addr}, "does not answer")
}

// TestSystemdRealCgroupV1 runs the driver against the host's real cgroup v1
// hierarchies (the fake systemd makes and removes real cgroups, the driver
// writes real values), below a slice of the test's own. It needs root and
// a v1 host.
func TestSystemdRealCgroupV1(t *testing.T) {
	var st unix.Statfs_t
	needRealCgroups(t)
	needHost(t, unix.Statfs("/sys/fs/cgroup/cpu", &st) == nil && st.Type == unix.CGROUP_SUPER_MAGIC,
		"needs the host's cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu (a cgroup v1 host)")
	addr := fakesystemd.StartBus(t)
	fake, err := fakesystemd.Start(fakesystemd.Config{Address: addr, Root: "/sys/fs/cgroup", CgroupVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	m, err := NewSystemd(SystemdConfig{Address: addr, BootedDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if m.Version() != 1 {
		t.Fatalf("version %d on a v1 host", m.Version())
	}
	top := podspec.CgroupName{fmt.Sprintf("actorlet-sdtest%d", os.Getpid())}
	t.Cleanup(func() { systemdRemoveTree(t, m, top) })
	kp := top.Child("kubepods")
	bu := kp.Child("burstable")
	pd := bu.Child("pod0a1b-2c3d")
	for _, n := range []podspec.CgroupName{top, kp, bu} {
		if err := m.Create(n, &podspec.CgroupResources{CPUShares: sdU64(1024)}); err != nil {
			t.Fatalf("create %s: %v", n.Cgroupfs(), err)
		}
	}
	if err := m.Create(pd, &podspec.CgroupResources{CPUShares: sdU64(204), CPUQuota: sdI64(20000), CPUPeriod: sdU64(100000), Memory: sdI64(64 << 20), PidsLimit: sdI64(50)}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	podDir := func(h string) string { return filepath.Join("/sys/fs/cgroup", h, pd.Systemd()) }
	if !strings.HasSuffix(podDir("cpu"), "/actorlet_sdtest"+strconv.Itoa(os.Getpid())+"-kubepods-burstable-pod0a1b_2c3d.slice") {
		t.Errorf("pod cgroup at %s", podDir("cpu"))
	}
	read := func(h, f string) string {
		b, err := os.ReadFile(filepath.Join(podDir(h), f))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	for _, c := range []struct{ h, f, want string }{
		{"cpu", "cpu.shares", "204"}, {"cpu", "cpu.cfs_quota_us", "20000"}, {"cpu", "cpu.cfs_period_us", "100000"},
		{"memory", "memory.limit_in_bytes", strconv.Itoa(64 << 20)}, {"pids", "pids.max", "50"},
	} {
		if got := read(c.h, c.f); got != c.want {
			t.Errorf("kernel's %s/%s = %q, want %q", c.h, c.f, got, c.want)
		}
	}
	if read("cpuset", "cpuset.cpus") == "" {
		t.Error("the pod's cpuset.cpus is empty: a process could not join it")
	}
	if err := m.Update(pd, &podspec.CgroupResources{Memory: sdI64(128 << 20), PidsLimit: sdI64(-1)}); err != nil {
		t.Fatal(err)
	}
	if got := read("memory", "memory.limit_in_bytes"); got != strconv.Itoa(128<<20) {
		t.Errorf("after Update memory.limit_in_bytes = %s", got)
	}
	if got := read("pids", "pids.max"); got != "max" {
		t.Errorf("after Update pids.max = %s", got)
	}

	// a real process in the pod's cgroup: Destroy refuses, the kernel keeps it
	proc := exec.Command("sleep", "600")
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Process.Kill(); _ = proc.Wait() })
	if err := os.WriteFile(filepath.Join(podDir("pids"), "cgroup.procs"), []byte(strconv.Itoa(proc.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Destroy(kp); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Destroy(kubepods) with a process in a pod: %v, want ErrFailedPrecondition", err)
	}
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = proc.Wait() // reaped: gone from cgroup.procs
	if err := m.Destroy(pd); err != nil {
		t.Fatalf("Destroy(pod): %v", err)
	}
	for _, h := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "systemd"} {
		if _, err := os.Stat(podDir(h)); !os.IsNotExist(err) {
			t.Errorf("the pod's %s cgroup is still there: %v", h, err)
		}
	}
	if err := m.Destroy(top); err != nil {
		t.Fatalf("Destroy(top): %v", err)
	}
	if m.anyDir(top) {
		t.Errorf("%s still has directories", top.Systemd())
	}
}

// systemdRemoveTree removes what a failed test left of top in the host's
// hierarchies, deepest first (rmdir only: never a process).
func systemdRemoveTree(t *testing.T, m *Systemd, top podspec.CgroupName) {
	for _, d := range m.dirs(top) {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		if err := cgroups.RemovePath(d); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
}

// TestSystemdRealCgroupV2 runs the driver against a real cgroup2 hierarchy
// (the host's /sys/fs/cgroup where it is cgroup2, else the hybrid one at
// /sys/fs/cgroup/unified), below a slice of the test's own: the fake
// systemd makes and removes real cgroups, the driver writes the values of
// the controllers the hierarchy has (a hybrid host's holds few: hugetlb
// here) and enables them in cgroup.subtree_control.
func TestSystemdRealCgroupV2(t *testing.T) {
	root := ""
	for _, r := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st unix.Statfs_t
		if unix.Statfs(r, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			root = r
			break
		}
	}
	needRealCgroups(t)
	if root == "" {
		t.Skip("needs a cgroup2 hierarchy at /sys/fs/cgroup or /sys/fs/cgroup/unified")
	}
	ctrsB, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		t.Fatal(err)
	}
	ctrs := string(ctrsB)
	addr := fakesystemd.StartBus(t)
	fake, err := fakesystemd.Start(fakesystemd.Config{Address: addr, Root: root, CgroupVersion: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	m, err := NewSystemd(SystemdConfig{Address: addr, Root: root, BootedDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if m.Version() != 2 {
		t.Fatalf("version %d on %s", m.Version(), root)
	}
	top := podspec.CgroupName{fmt.Sprintf("actorlet-sdtest%d", os.Getpid())}
	t.Cleanup(func() { systemdRemoveTree(t, m, top) })
	kp := top.Child("kubepods")
	pd := kp.Child("pod9e8d-7c6b")
	for _, n := range []podspec.CgroupName{top, kp} {
		if err := m.Create(n, nil); err != nil {
			t.Fatalf("create %s: %v", n.Cgroupfs(), err)
		}
	}
	res := &podspec.CgroupResources{}
	want := map[string]string{}
	if systemdHas(ctrs, "cpu") {
		res.CPUShares, res.CPUQuota, res.CPUPeriod = sdU64(1024), sdI64(30000), sdU64(100000)
		want["cpu.weight"], want["cpu.max"] = "39", "30000 100000"
	}
	if systemdHas(ctrs, "memory") {
		res.Memory = sdI64(64 << 20)
		want["memory.max"] = strconv.Itoa(64 << 20)
	}
	if systemdHas(ctrs, "pids") {
		res.PidsLimit = sdI64(40)
		want["pids.max"] = "40"
	}
	if systemdHas(ctrs, "hugetlb") && len(cgroups.HugePageSizes()) > 0 {
		// 4 pages of the host's first size; the others limited to 0
		ps := cgroups.HugePageSizes()[0]
		var size int64
		for sz := int64(4 << 10); sz <= 16<<30 && size == 0; sz <<= 1 {
			if name, _ := HugePageSizeName(sz); name == ps {
				size = sz
			}
		}
		if size == 0 {
			t.Fatalf("huge page size %s is no power of two from 4KB to 16GB", ps)
		}
		res.HugePageLimit = map[int64]int64{size: 4 * size}
		want["hugetlb."+ps+".max"] = strconv.FormatInt(4*size, 10)
		for _, other := range cgroups.HugePageSizes()[1:] {
			want["hugetlb."+other+".max"] = "0"
		}
	}
	if len(want) == 0 {
		t.Logf("%s offers no controller the driver sets (%q): creation and removal only", root, ctrs)
	} else {
		t.Logf("%s: checking the kernel's %v", root, want)
	}
	if err := m.Create(pd, res); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	dir := filepath.Join(root, pd.Systemd())
	if !strings.HasSuffix(dir, "/actorlet_sdtest"+strconv.Itoa(os.Getpid())+"-kubepods-pod9e8d_7c6b.slice") {
		t.Errorf("pod cgroup at %s", dir)
	}
	for f, w := range want {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || strings.TrimSpace(string(b)) != w {
			t.Errorf("kernel's %s = %q, %v; want %q", f, strings.TrimSpace(string(b)), err, w)
		}
		ctrl, _, _ := strings.Cut(f, ".")
		if on, _ := os.ReadFile(filepath.Join(root, kp.Systemd(), "cgroup.subtree_control")); !systemdHas(string(on), ctrl) {
			t.Errorf("kubepods' cgroup.subtree_control %q lacks %s", on, ctrl)
		}
	}
	proc := exec.Command("sleep", "600")
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Process.Kill(); _ = proc.Wait() })
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(proc.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if pids, err := m.Pids(kp); err != nil || !reflect.DeepEqual(pids, []int{proc.Process.Pid}) {
		t.Errorf("Pids(kubepods) = %v, %v; want [%d]", pids, err, proc.Process.Pid)
	}
	if err := m.Destroy(pd); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Destroy(pod) with a process: %v, want ErrFailedPrecondition", err)
	}
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = proc.Wait()
	if err := m.Destroy(top); err != nil {
		t.Fatalf("Destroy(top): %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, top.Systemd())); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", top.Systemd(), err)
	}
}
