package cgroup

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/podspec"
)

// Config configures the cgroupfs driver.
type Config struct {
	// Root is the cgroup mount root; "" is DefaultRoot. v2: the cgroup2
	// mount (or, with Version 2, any directory laid out like one: tests
	// use a fake tree). v1: the directory the controllers are mounted
	// under.
	Root string
	// Version is 1 or 2; 0 detects it (DetectHost: v2 when Root is a
	// cgroup2 filesystem, as upstream's IsCgroup2UnifiedMode).
	Version int
	// Log receives what the manager uses and skips; nil is slog.Default().
	Log *slog.Logger
}

// v1Subsystems are the v1 hierarchies the library knows, by its names:
// a pod cgroup is made in every one of them that is mounted but devices
// (as upstream: libcontainer's fs manager applied with pid -1 and
// SkipDevices), and removed from all of them, devices included (where the
// runtime makes its containers' cgroups), so that nothing a runtime puts
// under it outlives its removal.
var v1Subsystems = []string{"cpuset", "devices", "memory", "cpu", "cpuacct", "pids", "blkio",
	"hugetlb", "net_cls", "net_prio", "perf_event", "freezer", "rdma", "name=systemd", "misc"}

// v1Exists are the hierarchies upstream's Exists checks (cgroup v1
// manager's allowlist; hugetlb where mounted).
var v1Exists = []string{"cpu", "cpuacct", "cpuset", "memory", "name=systemd", "pids", "hugetlb"}

// v2Controllers are the controllers a v2 cgroup needs enabled, where the
// root has them (upstream's getSupportedUnifiedControllers).
var v2Controllers = []string{"cpu", "cpuset", "hugetlb", "memory", "pids"}

// Cgroupfs is the cgroupfs driver: it reads and writes cgroups by name
// under its root, on cgroup v1 or v2. A controller the host lacks is
// skipped (named in the log at construction and by Controllers). Safe for
// concurrent use: it keeps no state of the cgroups.
type Cgroupfs struct {
	root    string
	version int
	log     *slog.Logger
	// v1: each hierarchy used, by the library's name, at its mount point
	// ("" is the cgroup2 hierarchy of a hybrid host); the subset Exists
	// checks.
	mounts  map[string]string
	checked []string
	// v2: the controllers enabled on the way to each cgroup.
	needed []string
	// hugePageSizes are the host's huge page sizes ("2MB", "1GB").
	hugePageSizes []string
	// made, where set, is told of each v2 directory Create makes (tests
	// of a fake tree play the kernel's part there).
	made func(dir string)
}

// NewCgroupfs returns the cgroupfs driver for cfg. A root that is not a
// cgroup hierarchy is an error (ErrNotFound).
func NewCgroupfs(cfg Config) (*Cgroupfs, error) {
	if cfg.Version < 0 || cfg.Version > 2 {
		return nil, errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("cgroup version %d: neither 1 nor 2", cfg.Version))
	}
	root := filepath.Clean(cfg.Root)
	if cfg.Root == "" {
		root = DefaultRoot
	}
	m := &Cgroupfs{root: root, version: cfg.Version, log: cfg.Log, hugePageSizes: cgroups.HugePageSizes()}
	if m.log == nil {
		m.log = slog.Default()
	}
	var host *Host
	if m.version != 2 {
		h, err := DetectHost(root)
		if err != nil {
			return nil, err
		}
		if m.version == 1 && h.Version != 1 {
			return nil, errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("cgroup root %s is cgroup v%d, not v1", root, h.Version))
		}
		host, m.version = h, h.Version
	}
	switch m.version {
	case 1:
		m.mounts = map[string]string{}
		for _, s := range v1Subsystems {
			if p, ok := host.Mounts[s]; ok {
				m.mounts[s] = p
			}
		}
		if host.Unified != "" {
			m.mounts[""] = host.Unified
		}
		var skipped []string
		for _, s := range v1Exists {
			if _, ok := m.mounts[s]; ok {
				m.checked = append(m.checked, s)
			} else {
				skipped = append(skipped, s)
			}
		}
		m.log.Info("cgroupfs driver", "version", 1, "layout", host.Layout, "root", root,
			"controllers", m.Controllers(), "notMounted", skipped)
	case 2:
		avail, err := readControllers(root)
		if err != nil {
			return nil, classifyErr(fmt.Errorf("cgroup v2 root %s: %w", root, err))
		}
		var missing []string
		for _, c := range v2Controllers {
			if slices.Contains(avail, c) {
				m.needed = append(m.needed, c)
			} else {
				missing = append(missing, c)
			}
		}
		m.log.Info("cgroupfs driver", "version", 2, "root", root, "controllers", m.needed, "notAvailable", missing)
	default:
		return nil, errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("cgroup version %d: neither 1 nor 2", cfg.Version))
	}
	return m, nil
}

// Version is 1 or 2.
func (m *Cgroupfs) Version() int { return m.version }

// Driver is cgroupfs.
func (m *Cgroupfs) Driver() podspec.CgroupDriver { return podspec.CgroupDriverCgroupfs }

// Root is the mount root.
func (m *Cgroupfs) Root() string { return m.root }

// Controllers are what the manager uses: v1, the mounted hierarchies a
// cgroup is made in ("unified" for a hybrid host's cgroup2); v2, the
// controllers it enables on the way to a cgroup.
func (m *Cgroupfs) Controllers() []string {
	if m.version == 2 {
		return slices.Clone(m.needed)
	}
	var out []string
	for s := range m.mounts {
		if s == "" {
			s = "unified"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// checkName refuses a name that would leave the root or name nothing.
func checkName(name podspec.CgroupName) error {
	for _, p := range name {
		if p == "" || p == "." || p == ".." || strings.ContainsAny(p, "/\x00") {
			return errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("cgroup name %q: part %q is not a directory name", name.Cgroupfs(), p))
		}
	}
	return nil
}

// dirs are the cgroup's directories, one per hierarchy (v2: one, key "").
func (m *Cgroupfs) dirs(name podspec.CgroupName) map[string]string {
	rel := filepath.Join(name...)
	if m.version == 2 {
		return map[string]string{"": filepath.Join(m.root, rel)}
	}
	d := make(map[string]string, len(m.mounts))
	for s, mp := range m.mounts {
		d[s] = filepath.Join(mp, rel)
	}
	return d
}

// uniqueDirs are the cgroup's directories, each once (co-mounted
// controllers share one), sorted.
func (m *Cgroupfs) uniqueDirs(name podspec.CgroupName) []string {
	var out []string
	for _, d := range m.dirs(name) {
		out = append(out, d)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Exists says whether the cgroup is there: v1, in every hierarchy of
// upstream's list that is mounted (cpu, cpuacct, cpuset, memory,
// name=systemd, pids, hugetlb); v2, with every controller it needs
// enabled. Validate says what is missing.
func (m *Cgroupfs) Exists(name podspec.CgroupName) bool {
	return m.Validate(name) == nil
}

// Validate is nil when the cgroup exists, else an ErrNotFound naming the
// directories or controllers that are missing.
func (m *Cgroupfs) Validate(name podspec.CgroupName) error {
	if err := checkName(name); err != nil {
		return err
	}
	var missing []string
	if m.version == 2 {
		dir := m.dirs(name)[""]
		have, err := readControllers(dir)
		if err != nil {
			return errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("cgroup %s: %w", name.Cgroupfs(), err))
		}
		for _, c := range m.needed {
			if !slices.Contains(have, c) {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			return errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("cgroup %s (%s) lacks the controllers %s", name.Cgroupfs(), dir, strings.Join(missing, ", ")))
		}
		return nil
	}
	dirs := m.dirs(name)
	for _, s := range m.checked {
		if !cgroups.PathExists(dirs[s]) {
			missing = append(missing, s+" ("+dirs[s]+")")
		}
	}
	if len(missing) > 0 {
		return errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("cgroup %s is missing in %s", name.Cgroupfs(), strings.Join(missing, ", ")))
	}
	return nil
}

// anyDir says whether the cgroup has a directory in any hierarchy.
func (m *Cgroupfs) anyDir(name podspec.CgroupName) bool {
	for _, d := range m.uniqueDirs(name) {
		if cgroups.PathExists(d) {
			return true
		}
	}
	return false
}

func notFound(name podspec.CgroupName) error {
	return errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("cgroup %s not found", name.Cgroupfs()))
}

// Create makes the cgroup and its missing parents (v1: in every mounted
// hierarchy; v2: enabling the controllers it needs in each parent's
// cgroup.subtree_control) and sets r's values. An existing cgroup is
// updated. A value the kernel refuses is an error after the cgroup was
// made (it stays).
func (m *Cgroupfs) Create(name podspec.CgroupName, r *podspec.CgroupResources) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := checkResources(name, r); err != nil {
		return err
	}
	if m.version == 2 {
		if err := m.createV2(name); err != nil {
			return err
		}
	} else if err := m.createV1(name); err != nil {
		return err
	}
	return m.set(name, r)
}

func (m *Cgroupfs) createV1(name podspec.CgroupName) error {
	dirs := m.dirs(name)
	// The library makes cpuset cgroups with their parents' cpus and
	// mems, and the others with MkdirAll; -1 puts no process in them.
	lib, err := fs.NewManager(&cgroups.Cgroup{
		Path:      name.Cgroupfs(),
		Resources: &cgroups.Resources{SkipDevices: true, SkipFreezeOnSet: true},
	}, dirs)
	if err != nil {
		return classifyErr(fmt.Errorf("cgroup %s: %w", name.Cgroupfs(), err))
	}
	if err := lib.Apply(-1); err != nil {
		return classifyErr(fmt.Errorf("cgroup %s: create: %w", name.Cgroupfs(), err))
	}
	// The library adds a hybrid host's cgroup2 hierarchy only where that
	// is at the default root: make sure of it here.
	if d, ok := dirs[""]; ok {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return classifyErr(fmt.Errorf("cgroup %s: create: %w", name.Cgroupfs(), err))
		}
	}
	return nil
}

func (m *Cgroupfs) createV2(name podspec.CgroupName) error {
	cur := m.root
	for _, part := range name {
		if err := m.enableSubtree(name, cur); err != nil {
			return err
		}
		cur = filepath.Join(cur, part)
		if err := os.Mkdir(cur, 0o755); err == nil && m.made != nil {
			m.made(cur)
		} else if err != nil && !errors.Is(err, os.ErrExist) {
			return classifyErr(fmt.Errorf("cgroup %s: create %s: %w", name.Cgroupfs(), cur, err))
		}
	}
	return nil
}

// enableSubtree enables the needed controllers in dir's
// cgroup.subtree_control that are not yet.
func (m *Cgroupfs) enableSubtree(name podspec.CgroupName, dir string) error {
	const file = "cgroup.subtree_control"
	cur, err := cgroups.ReadFile(dir, file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return classifyErr(fmt.Errorf("cgroup %s: read %s: %w", name.Cgroupfs(), filepath.Join(dir, file), err))
	}
	enabled := map[string]bool{}
	for _, c := range strings.Fields(cur) {
		enabled[strings.TrimPrefix(c, "+")] = true
	}
	var add []string
	for _, c := range m.needed {
		if !enabled[c] {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	val := strings.Join(add, " ")
	if err := cgroups.WriteFile(dir, file, val); err != nil {
		return newWriteError(name.Cgroupfs(), dir, file+"="+val, err)
	}
	return nil
}

// Update sets r's non-nil values on an existing cgroup (ErrNotFound when
// it is not there).
func (m *Cgroupfs) Update(name podspec.CgroupName, r *podspec.CgroupResources) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := checkResources(name, r); err != nil {
		return err
	}
	if !m.anyDir(name) {
		return notFound(name)
	}
	return m.set(name, r)
}

// checkResources refuses the values the library would read as "unset"
// and so drop without a word (0), and the negative ones other than -1.
func checkResources(name podspec.CgroupName, r *podspec.CgroupResources) error {
	if r == nil {
		return nil
	}
	var bad []string
	if r.CPUShares != nil && (*r.CPUShares < MinShares || *r.CPUShares > MaxShares) {
		bad = append(bad, fmt.Sprintf("cpu shares %d outside [%d, %d]", *r.CPUShares, MinShares, MaxShares))
	}
	if r.CPUQuota != nil && (*r.CPUQuota == 0 || *r.CPUQuota < -1) {
		bad = append(bad, fmt.Sprintf("cpu quota %d (neither positive nor -1)", *r.CPUQuota))
	}
	if r.CPUPeriod != nil && *r.CPUPeriod == 0 {
		bad = append(bad, "cpu period 0")
	}
	if r.Memory != nil && (*r.Memory == 0 || *r.Memory < -1) {
		bad = append(bad, fmt.Sprintf("memory limit %d (neither positive nor -1)", *r.Memory))
	}
	if r.PidsLimit != nil && (*r.PidsLimit == 0 || *r.PidsLimit < -1) {
		bad = append(bad, fmt.Sprintf("pids limit %d (neither positive nor -1)", *r.PidsLimit))
	}
	for size, limit := range r.HugePageLimit {
		if _, err := HugePageSizeName(size); err != nil {
			bad = append(bad, err.Error())
		}
		if limit < -1 {
			bad = append(bad, fmt.Sprintf("huge page limit %d for size %d", limit, size))
		}
	}
	if len(bad) > 0 {
		return errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("cgroup %s: %s", name.Cgroupfs(), strings.Join(bad, "; ")))
	}
	return nil
}

// hugetlbLimits are the library's limits for r: the sizes r names, and 0
// for the host's other sizes, as upstream (a pod without huge pages gets
// none). nil when r leaves huge pages alone.
func (m *Cgroupfs) hugetlbLimits(r *podspec.CgroupResources) []*cgroups.HugepageLimit {
	if r.HugePageLimit == nil {
		return nil
	}
	named := map[string]bool{}
	var out []*cgroups.HugepageLimit
	for size, limit := range r.HugePageLimit {
		n, _ := HugePageSizeName(size) // checked by checkResources
		named[n] = true
		out = append(out, &cgroups.HugepageLimit{Pagesize: n, Limit: uint64(limit)}) // -1: the largest
	}
	for _, n := range m.hugePageSizes {
		if !named[n] {
			out = append(out, &cgroups.HugepageLimit{Pagesize: n, Limit: 0})
		}
	}
	slices.SortFunc(out, func(a, b *cgroups.HugepageLimit) int { return strings.Compare(a.Pagesize, b.Pagesize) })
	return out
}

func hugetlbWhat(file func(size string) string, limits []*cgroups.HugepageLimit) string {
	var parts []string
	for _, l := range limits {
		parts = append(parts, fmt.Sprintf("%s=%d", file(l.Pagesize), int64(l.Limit)))
	}
	return strings.Join(parts, " ")
}

// Destroy removes the cgroup and its children from every hierarchy. A
// cgroup whose tree holds a process is refused (ErrFailedPrecondition
// naming the cgroup and a pid): nothing is killed here. A cgroup that is
// not there is nil. The root is never removed.
func (m *Cgroupfs) Destroy(name podspec.CgroupName) error {
	if err := checkName(name); err != nil {
		return err
	}
	if len(name) == 0 {
		return errdefs.Wrap(errdefs.ErrInvalidArgument, errors.New("the cgroup root is never removed"))
	}
	pids, err := m.Pids(name)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(pids) > 0 {
		return errdefs.Wrap(errdefs.ErrFailedPrecondition, fmt.Errorf(
			"cgroup %s still holds %d process(es) (pid %d): not removed", name.Cgroupfs(), len(pids), pids[0]))
	}
	var errs []error
	for _, d := range m.uniqueDirs(name) {
		if err := cgroups.RemovePath(d); err != nil {
			errs = append(errs, classifyErr(fmt.Errorf("cgroup %s: remove %s: %w", name.Cgroupfs(), d, err)))
		}
	}
	return errors.Join(errs...)
}

// Pids are the processes in the cgroup and its children, from every
// hierarchy's cgroup.procs, sorted (ErrNotFound when the cgroup is in
// none).
func (m *Cgroupfs) Pids(name podspec.CgroupName) ([]int, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	found := false
	var pids []int
	for _, d := range m.uniqueDirs(name) {
		p, err := cgroups.GetAllPids(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, classifyErr(fmt.Errorf("cgroup %s: processes in %s: %w", name.Cgroupfs(), d, err))
		}
		found = true
		pids = append(pids, p...)
	}
	if !found {
		return nil, notFound(name)
	}
	slices.Sort(pids)
	return slices.Compact(pids), nil
}

// Children are the cgroup's child cgroups (in any hierarchy), sorted
// (ErrNotFound when the cgroup is in none).
func (m *Cgroupfs) Children(name podspec.CgroupName) ([]podspec.CgroupName, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	found := false
	var parts []string
	for _, d := range m.uniqueDirs(name) {
		ents, err := os.ReadDir(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, classifyErr(fmt.Errorf("cgroup %s: children in %s: %w", name.Cgroupfs(), d, err))
		}
		found = true
		for _, e := range ents {
			if e.IsDir() {
				parts = append(parts, e.Name())
			}
		}
	}
	if !found {
		return nil, notFound(name)
	}
	slices.Sort(parts)
	parts = slices.Compact(parts)
	out := make([]podspec.CgroupName, 0, len(parts))
	for _, p := range parts {
		out = append(out, name.Child(p))
	}
	return out, nil
}
