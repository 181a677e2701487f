package cgroup

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"github.com/opencontainers/cgroups/fs2"
	"golang.org/x/sys/unix"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/podspec"
)

// The systemd cgroup driver (--cgroup-driver=systemd), as upstream's kubelet
// runs it through github.com/opencontainers/cgroups/systemd: every cgroup
// actorlet owns is a transient slice unit that systemd creates, sizes and
// removes over D-Bus (kubepods.slice, kubepods-burstable.slice,
// kubepods-burstable-pod<uid>.slice), and the same values are written to
// cgroupfs as the library writes them, so both agree. The library's systemd
// managers dial only the host's system bus and write only below
// /sys/fs/cgroup, so this driver talks to systemd with go-systemd's D-Bus
// client itself and writes cgroupfs through the library's fs (v1) and fs2
// (v2) managers at the configured root.

// SystemdConfig configures NewSystemd.
type SystemdConfig struct {
	// Address is the D-Bus address of the bus systemd answers on. "" is the
	// system bus (DBUS_SYSTEM_BUS_ADDRESS, else
	// unix:path=/var/run/dbus/system_bus_socket), falling back for root to
	// systemd's private socket /run/systemd/private, as upstream's library.
	Address string
	// Root is the cgroupfs mount root ("" is /sys/fs/cgroup): on cgroup v1
	// a directory per hierarchy (cpu, cpuacct, cpuset, memory are needed;
	// pids, hugetlb and systemd (name=systemd) are used when there), on v2
	// the unified hierarchy.
	Root string
	// Version is the cgroup version, 1 or 2; 0 reads it from Root (a
	// cgroup2 mount, or a cgroup.controllers file at Root, is 2).
	Version int
	// BootedDir is the directory whose presence says systemd booted the
	// host (sd_booted(3)); "" is /run/systemd/system.
	BootedDir string
	// JobTimeout bounds the wait for a start or stop job (0: 30s, the
	// library's).
	JobTimeout time.Duration
}

// Systemd is the systemd cgroup driver: the CgroupActor's Manager for
// --cgroup-driver=systemd on cgroup v1 and v2.
type Systemd struct {
	cfg       SystemdConfig
	version   int
	sdVersion int               // systemd's version number (-1: unknown)
	mounts    map[string]string // v1: subsystem ("name=systemd" for systemd's) -> its hierarchy's directory
	dial      func() (*sddbus.Conn, error)

	mu   sync.Mutex
	conn *sddbus.Conn
}

// The upstream error where systemd does not run (opencontainers/cgroups'
// manager.New, which the kubelet's cgroup manager calls).
const systemdNotRunning = "systemd not running on this host, cannot use systemd cgroups manager"

// systemdV1Required and systemdV1Optional are the v1 subsystems the driver
// uses: the ones upstream's kubelet requires, then those it uses when
// mounted.
var (
	systemdV1Required = []string{"cpu", "cpuacct", "cpuset", "memory"}
	systemdV1Optional = []string{"pids", "hugetlb", "name=systemd"}
)

// cpuQuotaPeriodSupported is the first systemd with CPUQuotaPeriodUSec.
const systemdCPUQuotaPeriodVersion = 242

// NewSystemd checks that systemd runs and answers on the bus, and returns
// the driver. Where systemd does not run (no BootedDir, no bus, no systemd
// on the bus) the error says so as upstream's does ("systemd not running on
// this host, cannot use systemd cgroups manager"), classified
// errdefs.ErrFailedPrecondition: an agent configured for the systemd driver
// must refuse to start there rather than run pods unconfined.
func NewSystemd(cfg SystemdConfig) (*Systemd, error) {
	if cfg.Root == "" {
		cfg.Root = "/sys/fs/cgroup"
	}
	if cfg.BootedDir == "" {
		cfg.BootedDir = "/run/systemd/system"
	}
	if cfg.JobTimeout <= 0 {
		cfg.JobTimeout = 30 * time.Second
	}
	if fi, err := os.Lstat(cfg.BootedDir); err != nil || !fi.IsDir() {
		return nil, errdefs.Wrap(errdefs.ErrFailedPrecondition,
			fmt.Errorf("cgroup driver systemd: %s (%s is not a directory)", systemdNotRunning, cfg.BootedDir))
	}
	s := &Systemd{cfg: cfg, sdVersion: -1}
	var err error
	if s.version, err = systemdCgroupVersion(cfg); err != nil {
		return nil, err
	}
	if s.version == 1 {
		if s.mounts, err = systemdV1Mounts(cfg.Root); err != nil {
			return nil, err
		}
	}
	s.dial = func() (*sddbus.Conn, error) { return systemdDial(cfg.Address) }
	bus := cfg.Address
	if bus == "" {
		bus = "the system bus"
	}
	conn, err := s.dial()
	if err != nil {
		return nil, errdefs.Wrap(errdefs.ErrFailedPrecondition,
			fmt.Errorf("cgroup driver systemd: %s: cannot connect to %s: %w", systemdNotRunning, bus, err))
	}
	s.conn = conn
	v, err := systemdManagerProperty(conn, "Version", cfg.JobTimeout)
	if err != nil {
		conn.Close()
		return nil, errdefs.Wrap(errdefs.ErrFailedPrecondition,
			fmt.Errorf("cgroup driver systemd: %s: systemd does not answer on %s: %w", systemdNotRunning, bus, err))
	}
	s.sdVersion = systemdVersionNumber(v)
	return s, nil
}

// systemdManagerProperty reads a Manager property, waiting at most timeout
// (go-systemd's call takes no context).
func systemdManagerProperty(conn *sddbus.Conn, name string, timeout time.Duration) (string, error) {
	type answer struct {
		v   string
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		v, err := conn.GetManagerProperty(name)
		ch <- answer{v, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case a := <-ch:
		return a.v, a.err
	case <-t.C:
		return "", fmt.Errorf("no answer in %s", timeout)
	}
}

// systemdDial connects to systemd as go-systemd's NewWithContext does, or to
// the bus at addr.
func systemdDial(addr string) (*sddbus.Conn, error) {
	if addr == "" {
		return sddbus.NewWithContext(context.Background())
	}
	return sddbus.NewConnection(func() (*dbus.Conn, error) {
		c, err := dbus.Dial(addr)
		if err != nil {
			return nil, err
		}
		if err := c.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
			c.Close()
			return nil, err
		}
		if err := c.Hello(); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	})
}

// systemdVersionNumber reads systemd's Version property ("\"v252.5-1\"",
// "252", "252.5"); -1 where it has no number.
func systemdVersionNumber(v string) int {
	v = strings.TrimLeft(v, "\"v")
	end := 0
	for end < len(v) && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(v[:end])
	if err != nil {
		return -1
	}
	return n
}

func systemdCgroupVersion(cfg SystemdConfig) (int, error) {
	switch cfg.Version {
	case 1, 2:
		return cfg.Version, nil
	case 0:
	default:
		return 0, errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("cgroup driver systemd: cgroup version %d (want 1 or 2)", cfg.Version))
	}
	var st unix.Statfs_t
	if err := unix.Statfs(cfg.Root, &st); err != nil {
		return 0, errdefs.Wrap(errdefs.ErrFailedPrecondition, fmt.Errorf("cgroup driver systemd: cgroup root %s: %w", cfg.Root, err))
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return 2, nil
	}
	if _, err := os.Stat(filepath.Join(cfg.Root, "cgroup.controllers")); err == nil {
		return 2, nil
	}
	return 1, nil
}

// systemdV1Mounts finds the v1 hierarchies under root: each directory's
// name lists its subsystems ("cpu,cpuacct"); "systemd" is name=systemd.
func systemdV1Mounts(root string) (map[string]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.ErrFailedPrecondition, fmt.Errorf("cgroup driver systemd: cgroup root %s: %w", root, err))
	}
	want := map[string]bool{}
	for _, s := range append(append([]string{}, systemdV1Required...), systemdV1Optional...) {
		want[s] = true
	}
	mounts := map[string]string{}
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		for _, sub := range strings.Split(e.Name(), ",") {
			if sub == "systemd" {
				sub = "name=systemd"
			}
			// a directory named for the subsystem alone wins over a
			// comounted one; either is the same hierarchy
			if want[sub] && (mounts[sub] == "" || e.Name() == sub) {
				mounts[sub] = dir
			}
		}
	}
	var missing []string
	for _, s := range systemdV1Required {
		if mounts[s] == "" {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return nil, errdefs.Wrap(errdefs.ErrFailedPrecondition,
			fmt.Errorf("cgroup driver systemd: cgroup v1 subsystems %s not mounted under %s", strings.Join(missing, ", "), root))
	}
	return mounts, nil
}

// Close closes the D-Bus connection.
func (s *Systemd) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

// Version is the cgroup version the driver writes: 1 or 2.
func (s *Systemd) Version() int { return s.version }

// Driver is podspec.CgroupDriverSystemd.
func (s *Systemd) Driver() podspec.CgroupDriver { return podspec.CgroupDriverSystemd }

// SystemdUnitName is the slice unit of a cgroup name, as upstream's kubelet
// names it: the parts joined by '-', a '-' in a part written '_', ".slice"
// ({"kubepods", "burstable", "pod<uid>"} is
// "kubepods-burstable-pod<uid>.slice"); the root is "-.slice". A part that
// is empty or holds '/' or '_' (upstream forbids '_' so that the mapping
// reverses) is an errdefs.ErrInvalidArgument.
func SystemdUnitName(name podspec.CgroupName) (string, error) {
	if len(name) == 0 {
		return "-.slice", nil
	}
	for _, p := range name {
		if p == "" || strings.ContainsAny(p, "/_") {
			return "", errdefs.Wrap(errdefs.ErrInvalidArgument,
				fmt.Errorf("cgroup name %q: part %q is empty or holds '/' or '_'", name.Cgroupfs(), p))
		}
	}
	return path.Base(name.Systemd()), nil
}

// systemdParseUnit is SystemdUnitName's inverse ("-.slice" is the root).
func systemdParseUnit(unit string) (podspec.CgroupName, bool) {
	base, ok := strings.CutSuffix(unit, ".slice")
	if !ok || base == "" {
		return nil, false
	}
	if base == "-" {
		return podspec.CgroupName{}, true
	}
	var name podspec.CgroupName
	for _, p := range strings.Split(base, "-") {
		if p == "" {
			return nil, false
		}
		name = append(name, strings.ReplaceAll(p, "_", "-"))
	}
	return name, true
}

// dirs are the cgroup's directories: v1, by subsystem; v2, "" -> the one.
func (s *Systemd) dirs(name podspec.CgroupName) map[string]string {
	rel := name.Systemd()
	if s.version == 2 {
		return map[string]string{"": filepath.Join(s.cfg.Root, rel)}
	}
	out := make(map[string]string, len(s.mounts))
	for sub, m := range s.mounts {
		out[sub] = filepath.Join(m, rel)
	}
	return out
}

// Exists says whether the cgroup's directory is there in every hierarchy
// the driver uses (as upstream's kubelet, cgroupfs answers, not systemd).
func (s *Systemd) Exists(name podspec.CgroupName) bool {
	if _, err := SystemdUnitName(name); err != nil {
		return false
	}
	for _, d := range s.dirs(name) {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// anyDir says whether the cgroup has a directory in any hierarchy.
func (s *Systemd) anyDir(name podspec.CgroupName) bool {
	for _, d := range s.dirs(name) {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}

// Create starts the cgroup's slice unit with r's values as unit properties
// (systemd starts its parent slices), or, where the unit is loaded already,
// sets them on it; then makes the directories systemd does not (v1: the
// hierarchies it does not manage, such as cpuset) and writes r's values to
// cgroupfs.
func (s *Systemd) Create(name podspec.CgroupName, r *podspec.CgroupResources) error {
	return s.apply(name, r, true)
}

// Update sets r's non-nil values: as unit properties (SetUnitProperties,
// runtime) and in cgroupfs. A cgroup that is not there is ErrNotFound.
func (s *Systemd) Update(name podspec.CgroupName, r *podspec.CgroupResources) error {
	return s.apply(name, r, false)
}

func (s *Systemd) apply(name podspec.CgroupName, r *podspec.CgroupResources, create bool) error {
	unit, err := SystemdUnitName(name)
	if err != nil {
		return err
	}
	if len(name) == 0 {
		return errdefs.Wrap(errdefs.ErrInvalidArgument, errors.New("cgroup driver systemd: the root slice (-.slice) is systemd's own"))
	}
	if !create && !s.Exists(name) {
		return errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("cgroup %s (%s) not found", name.Cgroupfs(), unit))
	}
	res, props, err := s.resources(name, r)
	if err != nil {
		return err
	}
	if create {
		if err := s.startSlice(name, unit, props); err != nil {
			return err
		}
	} else if len(props) > 0 {
		err := s.call(func(ctx context.Context, c *sddbus.Conn) error {
			return c.SetUnitPropertiesContext(ctx, unit, true, props...)
		})
		if systemdIsError(err, "org.freedesktop.systemd1.NoSuchUnit") {
			// its cgroup is there but the unit is not loaded (a systemd
			// restarted since): start it again
			err = s.startSlice(name, unit, props)
		}
		if err != nil {
			return systemdClassify(fmt.Errorf("cgroup driver systemd: set properties of %s: %w", unit, err))
		}
	}
	return s.writeCgroupfs(name, res, create)
}

// startSlice starts the slice unit, or sets props on it where it is loaded.
func (s *Systemd) startSlice(name podspec.CgroupName, unit string, props []sddbus.Property) error {
	parent := "-.slice"
	if len(name) > 1 {
		parent, _ = SystemdUnitName(name[:len(name)-1])
	}
	acct := "BlockIOAccounting"
	if s.version == 2 {
		acct = "IOAccounting"
	}
	all := []sddbus.Property{
		sddbus.PropDescription("actorlet cgroup " + name.Cgroupfs()),
		sddbus.PropWants(parent),
		systemdProp("MemoryAccounting", true),
		systemdProp("CPUAccounting", true),
		systemdProp("TasksAccounting", true),
		systemdProp(acct, true),
		systemdProp("DefaultDependencies", false),
	}
	all = append(all, props...)
	result, err := s.job(func(ctx context.Context, c *sddbus.Conn, ch chan<- string) (int, error) {
		return c.StartTransientUnitContext(ctx, unit, "replace", all, ch)
	})
	if systemdIsError(err, "org.freedesktop.systemd1.UnitExists") {
		if len(props) == 0 {
			return nil
		}
		err = s.call(func(ctx context.Context, c *sddbus.Conn) error {
			return c.SetUnitPropertiesContext(ctx, unit, true, props...)
		})
		if err != nil {
			return systemdClassify(fmt.Errorf("cgroup driver systemd: set properties of %s: %w", unit, err))
		}
		return nil
	}
	if err != nil {
		return systemdClassify(fmt.Errorf("cgroup driver systemd: start %s: %w", unit, err))
	}
	if result != "done" {
		_ = s.call(func(ctx context.Context, c *sddbus.Conn) error { return c.ResetFailedUnitContext(ctx, unit) })
		return errdefs.Wrap(errdefs.ErrUnknown, fmt.Errorf("cgroup driver systemd: start %s: job %s", unit, result))
	}
	return nil
}

// writeCgroupfs writes res to the cgroup's directories through the
// library's managers, making those systemd did not (create).
func (s *Systemd) writeCgroupfs(name podspec.CgroupName, res *cgroups.Resources, create bool) error {
	if s.version == 1 {
		m, err := fs.NewManager(&cgroups.Cgroup{Resources: res}, s.dirs(name))
		if err != nil {
			return err
		}
		if create {
			if err := m.Apply(-1); err != nil {
				return systemdClassify(fmt.Errorf("cgroup driver systemd: create %s in cgroupfs: %w", name.Cgroupfs(), err))
			}
		}
		if err := m.Set(res); err != nil {
			return systemdClassify(fmt.Errorf("cgroup driver systemd: set %s in cgroupfs: %w", name.Cgroupfs(), err))
		}
		return nil
	}
	dir := s.dirs(name)[""]
	if create {
		if err := s.v2Create(dir); err != nil {
			return systemdClassify(fmt.Errorf("cgroup driver systemd: create %s in cgroupfs: %w", name.Cgroupfs(), err))
		}
	}
	m, err := fs2.NewManager(&cgroups.Cgroup{Resources: res}, dir)
	if err != nil {
		return err
	}
	if err := m.Set(res); err != nil {
		return systemdClassify(fmt.Errorf("cgroup driver systemd: set %s in cgroupfs: %w", name.Cgroupfs(), err))
	}
	return nil
}

// systemdV2Controllers are the v2 controllers the values need.
var systemdV2Controllers = []string{"cpu", "cpuset", "hugetlb", "io", "memory", "pids"}

// v2Create makes dir and its missing parents below the root, with the
// controllers the values need enabled in each parent's
// cgroup.subtree_control where systemd has not (fs2.CreateCgroupPath does
// the same, but only below /sys/fs/cgroup).
func (s *Systemd) v2Create(dir string) error {
	rel, err := filepath.Rel(s.cfg.Root, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("%s is not below %s", dir, s.cfg.Root)
	}
	cur := s.cfg.Root
	for _, e := range strings.Split(rel, string(filepath.Separator)) {
		if err := systemdEnable(cur); err != nil {
			return err
		}
		cur = filepath.Join(cur, e)
		if err := os.Mkdir(cur, 0o755); err != nil && !os.IsExist(err) {
			return err
		}
	}
	return nil
}

// systemdEnable enables in dir's cgroup.subtree_control the controllers of
// systemdV2Controllers that dir's cgroup.controllers offers and that are
// not on yet.
func systemdEnable(dir string) error {
	avail, err := cgroups.ReadFile(dir, "cgroup.controllers")
	if err != nil {
		return err
	}
	on, err := cgroups.ReadFile(dir, "cgroup.subtree_control")
	if err != nil {
		return err
	}
	var add []string
	for _, c := range systemdV2Controllers {
		if systemdHas(avail, c) && !systemdHas(on, c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := cgroups.WriteFile(dir, "cgroup.subtree_control", strings.Join(add, " ")); err == nil {
		return nil
	}
	// one at a time, as fs2.CreateCgroupPath: a controller the kernel
	// refuses (a threaded subtree) does not keep the others off
	for _, a := range add {
		_ = cgroups.WriteFile(dir, "cgroup.subtree_control", a)
	}
	return nil
}

func systemdHas(list, c string) bool {
	for _, f := range strings.Fields(list) {
		if f == c {
			return true
		}
	}
	return false
}

// resources converts r to the library's values and to the unit properties
// the library's systemd managers send for them (v1: CPUShares, MemoryLimit;
// v2: CPUWeight, MemoryMax; both: CPUQuotaPerSecUSec and, systemd 242 on,
// CPUQuotaPeriodUSec, TasksMax). The quota is rounded up to systemd's 10 ms
// per second granularity and written so to cgroupfs, as the library does.
func (s *Systemd) resources(name podspec.CgroupName, r *podspec.CgroupResources) (*cgroups.Resources, []sddbus.Property, error) {
	res := &cgroups.Resources{SkipDevices: true, SkipFreezeOnSet: true}
	var props []sddbus.Property
	if r == nil {
		return res, nil, nil
	}
	if r.CPUShares != nil {
		if s.version == 2 {
			res.CpuWeight = CPUSharesToWeight(*r.CPUShares)
			props = append(props, systemdProp("CPUWeight", res.CpuWeight))
		} else {
			res.CpuShares = *r.CPUShares
			props = append(props, systemdProp("CPUShares", res.CpuShares))
		}
	}
	if r.CPUPeriod != nil {
		res.CpuPeriod = *r.CPUPeriod
		if s.sdVersion >= systemdCPUQuotaPeriodVersion {
			props = append(props, systemdProp("CPUQuotaPeriodUSec", res.CpuPeriod))
		}
	}
	if r.CPUQuota != nil {
		res.CpuQuota = *r.CPUQuota
		perSec := uint64(math.MaxUint64) // infinity
		if res.CpuQuota > 0 {
			period := res.CpuPeriod
			if period == 0 {
				period = 100000
			}
			perSec, res.CpuQuota = systemdQuotaPerSec(res.CpuQuota, period)
		} else {
			res.CpuQuota = -1
		}
		props = append(props, systemdProp("CPUQuotaPerSecUSec", perSec))
	} else if r.CPUPeriod != nil && s.version == 2 {
		// cpu.max holds both: keep the quota that is there
		if q, _, ok := s.v2CPUMax(name); ok {
			res.CpuQuota = q
		}
	}
	if r.Memory != nil {
		res.Memory = *r.Memory
		if res.Memory < 0 {
			res.Memory = -1
		}
		p := "MemoryLimit"
		if s.version == 2 {
			p = "MemoryMax"
		}
		props = append(props, systemdProp(p, uint64(res.Memory))) // -1: infinity
	}
	if r.PidsLimit != nil {
		l := *r.PidsLimit
		res.PidsLimit = &l
		tasks := uint64(math.MaxUint64)
		switch {
		case l == 0:
			tasks = 1 // systemd does not take 0, the library writes 1 too
		case l > 0:
			tasks = uint64(l)
		}
		props = append(props, systemdProp("TasksMax", tasks))
	}
	if r.HugePageLimit != nil && s.hugetlb() {
		given := map[string]bool{}
		for size, limit := range r.HugePageLimit {
			ps, err := HugePageSizeName(size)
			if err != nil {
				return nil, nil, errdefs.Wrap(errdefs.ErrInvalidArgument, err)
			}
			if limit < 0 {
				limit = -1
			}
			res.HugetlbLimit = append(res.HugetlbLimit, &cgroups.HugepageLimit{Pagesize: ps, Limit: uint64(limit)})
			given[ps] = true
		}
		// as upstream: a page size not given is limited to 0
		for _, ps := range cgroups.HugePageSizes() {
			if !given[ps] {
				res.HugetlbLimit = append(res.HugetlbLimit, &cgroups.HugepageLimit{Pagesize: ps})
			}
		}
	}
	return res, props, nil
}

// hugetlb says whether the hugetlb controller is there.
func (s *Systemd) hugetlb() bool {
	if s.version == 1 {
		return s.mounts["hugetlb"] != ""
	}
	avail, err := cgroups.ReadFile(s.cfg.Root, "cgroup.controllers")
	return err == nil && systemdHas(avail, "hugetlb")
}

// systemdMaxCPUQuota is the largest quota the kernel takes (µs).
const systemdMaxCPUQuota = 1<<44 - 1

// systemdQuotaPerSec is CPUQuotaPerSecUSec for quota per period, rounded up
// to 10 ms, and the quota that rounding gives (what cgroupfs gets, so that
// both agree); a quota the kernel would not take is infinity (-1).
func systemdQuotaPerSec(quota int64, period uint64) (uint64, int64) {
	if quota > systemdMaxCPUQuota {
		return math.MaxUint64, -1
	}
	perSec := uint64(quota) * 1000000 / period
	if perSec%10000 != 0 {
		perSec = (perSec/10000 + 1) * 10000
		quota = int64(perSec / 10000 * period / 100)
	}
	if quota > systemdMaxCPUQuota {
		return math.MaxUint64, -1
	}
	return perSec, quota
}

func systemdProp(name string, v any) sddbus.Property {
	return sddbus.Property{Name: name, Value: dbus.MakeVariant(v)}
}

// Read returns the cgroup's values from cgroupfs (a value whose file is not
// there stays nil). A cgroup that is not there is ErrNotFound.
func (s *Systemd) Read(name podspec.CgroupName) (*podspec.CgroupResources, error) {
	if _, err := SystemdUnitName(name); err != nil {
		return nil, err
	}
	if !s.Exists(name) {
		return nil, errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("cgroup %s not found", name.Cgroupfs()))
	}
	out := &podspec.CgroupResources{}
	dirs := s.dirs(name)
	if s.version == 1 {
		if v, ok := systemdReadUint(dirs["cpu"], "cpu.shares"); ok {
			out.CPUShares = &v
		}
		if v, ok := systemdReadInt(dirs["cpu"], "cpu.cfs_quota_us"); ok {
			out.CPUQuota = &v
		}
		if v, ok := systemdReadUint(dirs["cpu"], "cpu.cfs_period_us"); ok {
			out.CPUPeriod = &v
		}
		if v, ok := systemdReadInt(dirs["memory"], "memory.limit_in_bytes"); ok {
			if v >= 0x7FFFFFFFFFFFF000 { // the kernel's "no limit", page-rounded
				v = -1
			}
			out.Memory = &v
		}
		if d, ok := dirs["pids"]; ok {
			if v, ok := systemdReadInt(d, "pids.max"); ok {
				out.PidsLimit = &v
			}
		}
		return out, nil
	}
	dir := dirs[""]
	if v, ok := systemdReadUint(dir, "cpu.weight"); ok {
		sh := CPUWeightToShares(v)
		out.CPUShares = &sh
	}
	if q, p, ok := s.v2CPUMax(name); ok {
		out.CPUQuota, out.CPUPeriod = &q, &p
	}
	if v, ok := systemdReadInt(dir, "memory.max"); ok {
		out.Memory = &v
	}
	if v, ok := systemdReadInt(dir, "pids.max"); ok {
		out.PidsLimit = &v
	}
	return out, nil
}

// v2CPUMax reads cpu.max: the quota (-1 for max) and period.
func (s *Systemd) v2CPUMax(name podspec.CgroupName) (int64, uint64, bool) {
	data, err := cgroups.ReadFile(s.dirs(name)[""], "cpu.max")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(data)
	if len(f) != 2 {
		return 0, 0, false
	}
	q := int64(-1)
	if f[0] != "max" {
		if q, err = strconv.ParseInt(f[0], 10, 64); err != nil {
			return 0, 0, false
		}
	}
	p, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return q, p, true
}

// systemdReadInt reads a number file; "max" is -1.
func systemdReadInt(dir, file string) (int64, bool) {
	if dir == "" {
		return 0, false
	}
	data, err := cgroups.ReadFile(dir, file)
	if err != nil {
		return 0, false
	}
	data = strings.TrimSpace(data)
	if data == "max" {
		return -1, true
	}
	v, err := strconv.ParseInt(data, 10, 64)
	return v, err == nil
}

func systemdReadUint(dir, file string) (uint64, bool) {
	v, ok := systemdReadInt(dir, file)
	if !ok || v < 0 {
		return 0, false
	}
	return uint64(v), true
}

// Destroy stops the cgroup's slice unit (systemd stops the slices in it and
// removes their cgroups) and removes what is left of its directories. A
// cgroup that holds a process, itself or in a cgroup below it, is refused
// with errdefs.ErrFailedPrecondition and left alone: systemd would kill the
// processes of a unit it stops, and the driver kills nothing. A cgroup that
// is neither a loaded unit nor a directory is ErrNotFound.
func (s *Systemd) Destroy(name podspec.CgroupName) error {
	unit, err := SystemdUnitName(name)
	if err != nil {
		return err
	}
	if len(name) == 0 {
		return errdefs.Wrap(errdefs.ErrInvalidArgument, errors.New("cgroup driver systemd: the root slice (-.slice) is systemd's own"))
	}
	there := s.anyDir(name)
	if there {
		pids, err := s.pids(name)
		if err != nil {
			return systemdClassify(fmt.Errorf("cgroup driver systemd: processes of %s: %w", name.Cgroupfs(), err))
		}
		if len(pids) > 0 {
			return errdefs.Wrap(errdefs.ErrFailedPrecondition,
				fmt.Errorf("cgroup %s (%s) holds %d processes %v: not removed", name.Cgroupfs(), unit, len(pids), systemdFirst(pids, 10)))
		}
	}
	result, err := s.job(func(ctx context.Context, c *sddbus.Conn, ch chan<- string) (int, error) {
		return c.StopUnitContext(ctx, unit, "replace", ch)
	})
	switch {
	case systemdIsError(err, "org.freedesktop.systemd1.NoSuchUnit"):
		if !there {
			return errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("cgroup %s (%s) not found", name.Cgroupfs(), unit))
		}
	case err != nil:
		return systemdClassify(fmt.Errorf("cgroup driver systemd: stop %s: %w", unit, err))
	}
	// a unit whose stop failed stays loaded as failed: let systemd drop it
	_ = s.call(func(ctx context.Context, c *sddbus.Conn) error { return c.ResetFailedUnitContext(ctx, unit) })
	// what systemd does not remove: v1 hierarchies it does not manage, a
	// v2 sub-cgroup systemd 239 left
	for _, d := range s.dirs(name) {
		if err := cgroups.RemovePath(d); err != nil {
			if result != "" && result != "done" {
				return systemdClassify(fmt.Errorf("cgroup driver systemd: stop %s: job %s; %w", unit, result, err))
			}
			return systemdClassify(fmt.Errorf("cgroup driver systemd: remove %s: %w", d, err))
		}
	}
	return nil
}

func systemdFirst(pids []int, n int) []int {
	if len(pids) > n {
		return pids[:n]
	}
	return pids
}

// Pids are the processes in the cgroup and the cgroups below it, in every
// hierarchy the driver uses, sorted.
func (s *Systemd) Pids(name podspec.CgroupName) ([]int, error) {
	if _, err := SystemdUnitName(name); err != nil {
		return nil, err
	}
	if !s.anyDir(name) {
		return nil, errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("cgroup %s not found", name.Cgroupfs()))
	}
	return s.pids(name)
}

func (s *Systemd) pids(name podspec.CgroupName) ([]int, error) {
	seen := map[int]bool{}
	for _, d := range s.dirs(name) {
		err := filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil // removed while we walk, or not in this hierarchy
				}
				return err
			}
			if !e.IsDir() {
				return nil
			}
			data, err := cgroups.ReadFile(p, cgroups.CgroupProcesses)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENODEV) {
					return nil
				}
				return err
			}
			for _, f := range strings.Fields(data) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]int, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Ints(out)
	return out, nil
}

// Children are the cgroups below name that are slices of its children by
// name (container scopes and other directories are not actorlet's), in
// any hierarchy, sorted by unit name.
func (s *Systemd) Children(name podspec.CgroupName) ([]podspec.CgroupName, error) {
	if _, err := SystemdUnitName(name); err != nil {
		return nil, err
	}
	if !s.anyDir(name) {
		return nil, errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("cgroup %s not found", name.Cgroupfs()))
	}
	units := map[string]podspec.CgroupName{}
	for _, d := range s.dirs(name) {
		entries, err := os.ReadDir(d)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			child, ok := systemdParseUnit(e.Name())
			if !ok || len(child) != len(name)+1 || !systemdHasPrefix(child, name) {
				continue
			}
			units[e.Name()] = child
		}
	}
	keys := make([]string, 0, len(units))
	for k := range units {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]podspec.CgroupName, 0, len(keys))
	for _, k := range keys {
		out = append(out, units[k])
	}
	return out, nil
}

func systemdHasPrefix(n, prefix podspec.CgroupName) bool {
	for i, p := range prefix {
		if n[i] != p {
			return false
		}
	}
	return true
}

// call runs op on the connection with a deadline (JobTimeout), dialling
// again once where the connection was closed (dbus-daemon or systemd
// restarted), as the library does.
func (s *Systemd) call(op func(context.Context, *sddbus.Conn) error) error {
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		if s.conn == nil {
			c, err := s.dial()
			if err != nil {
				s.mu.Unlock()
				return errdefs.Wrap(errdefs.ErrUnavailable, fmt.Errorf("connect to systemd: %w", err))
			}
			s.conn = c
		}
		conn := s.conn
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.JobTimeout)
		err := op(ctx, conn)
		expired := ctx.Err() != nil
		cancel()
		if err != nil && expired {
			return errdefs.Wrap(errdefs.ErrDeadlineExceeded, fmt.Errorf("systemd did not answer in %s: %w", s.cfg.JobTimeout, err))
		}
		if err == nil || !errors.Is(err, dbus.ErrClosed) || attempt > 0 {
			return err
		}
		s.mu.Lock()
		if s.conn == conn {
			conn.Close()
			s.conn = nil
		}
		s.mu.Unlock()
	}
}

// job runs a job method and waits for its JobRemoved: the job's result
// ("done", "failed", "canceled", "timeout", "dependency", "skipped").
func (s *Systemd) job(start func(context.Context, *sddbus.Conn, chan<- string) (int, error)) (string, error) {
	ch := make(chan string, 1)
	if err := s.call(func(ctx context.Context, c *sddbus.Conn) error { _, err := start(ctx, c, ch); return err }); err != nil {
		return "", err
	}
	t := time.NewTimer(s.cfg.JobTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r, nil
	case <-t.C:
		return "", errdefs.Wrap(errdefs.ErrDeadlineExceeded, fmt.Errorf("no job result from systemd in %s", s.cfg.JobTimeout))
	}
}

// systemdIsError says whether err is the D-Bus error name.
func systemdIsError(err error, name string) bool {
	var e dbus.Error
	if errors.As(err, &e) {
		return e.Name == name
	}
	var pe *dbus.Error
	return errors.As(err, &pe) && pe.Name == name
}

// systemdClassify gives err its errdefs class (one already classed stays).
func systemdClassify(err error) error {
	for _, c := range []error{errdefs.ErrNotFound, errdefs.ErrInvalidArgument, errdefs.ErrUnavailable,
		errdefs.ErrDeadlineExceeded, errdefs.ErrFailedPrecondition, errdefs.ErrUnknown} {
		if errors.Is(err, c) {
			return err
		}
	}
	switch {
	case systemdIsError(err, "org.freedesktop.systemd1.NoSuchUnit"), errors.Is(err, os.ErrNotExist):
		return errdefs.Wrap(errdefs.ErrNotFound, err)
	case systemdIsError(err, "org.freedesktop.DBus.Error.InvalidArgs"),
		systemdIsError(err, "org.freedesktop.DBus.Error.PropertyReadOnly"),
		errors.Is(err, unix.EINVAL):
		return errdefs.Wrap(errdefs.ErrInvalidArgument, err)
	case errors.Is(err, dbus.ErrClosed), systemdIsError(err, "org.freedesktop.DBus.Error.ServiceUnknown"),
		systemdIsError(err, "org.freedesktop.DBus.Error.NoReply"):
		return errdefs.Wrap(errdefs.ErrUnavailable, err)
	case errors.Is(err, unix.EBUSY):
		return errdefs.Wrap(errdefs.ErrFailedPrecondition, err)
	}
	return errdefs.Wrap(errdefs.ErrUnknown, err)
}
