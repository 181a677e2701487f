// Package fakesystemd is a fake systemd for tests: the org.freedesktop.systemd1
// Manager (StartTransientUnit, StopUnit, SetUnitProperties, ResetFailedUnit,
// GetUnit, the Version property, the JobRemoved signal) served with godbus on
// a real message bus (deploy/local/dbus.sh's dbus-daemon; StartBus), managing
// slice units as directories in a fake cgroup tree (MakeTree). It records the
// unit properties it was given and the calls it answered; it writes no
// resource values into the tree (the client under test writes cgroupfs
// itself, as runc's and upstream's drivers do), so a test tells what systemd
// was told from what the client wrote.
//
// What it does not do that systemd does: scopes and services, killing the
// processes of a stopped unit (a stop of a unit whose cgroup holds a process
// fails its job instead, and leaves the cgroup), unit files, dependencies
// other than a slice's parent slices. Test-only: the agent never links it.
package fakesystemd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"
	"golang.org/x/sys/unix"
)

// The bus names, paths and interfaces systemd serves.
const (
	BusName     = "org.freedesktop.systemd1"
	ManagerPath = dbus.ObjectPath("/org/freedesktop/systemd1")
	ManagerIf   = "org.freedesktop.systemd1.Manager"
	UnitIf      = "org.freedesktop.systemd1.Unit"
)

// The errors systemd answers with, by D-Bus error name.
const (
	ErrNoSuchUnit       = "org.freedesktop.systemd1.NoSuchUnit"
	ErrUnitExists       = "org.freedesktop.systemd1.UnitExists"
	ErrInvalidArgs      = "org.freedesktop.DBus.Error.InvalidArgs"
	ErrPropertyReadOnly = "org.freedesktop.DBus.Error.PropertyReadOnly"
	ErrNotSupported     = "org.freedesktop.DBus.Error.NotSupported"
)

// Config is a fake systemd's bus and cgroup tree.
type Config struct {
	// Address is the bus to serve on (StartBus's address).
	Address string
	// Root is the fake cgroup tree (MakeTree's layout): on cgroup v1 a
	// directory per hierarchy (cpu, cpuacct, memory, pids, systemd, ...),
	// on v2 the unified tree itself.
	Root string
	// CgroupVersion is 1 or 2.
	CgroupVersion int
	// Version is what the Manager's Version property says ("" is "252").
	Version string
}

// Call is one method call the fake answered.
type Call struct {
	Method string
	Unit   string
	// Err is the D-Bus error name it answered with ("" on success).
	Err string
	// Result is the job's result as JobRemoved said it (jobs only).
	Result string
}

// Unit is a unit as the fake holds it.
type Unit struct {
	Name string
	// Properties are those given at StartTransientUnit and by every
	// SetUnitProperties since, the last value of each.
	Properties map[string]dbus.Variant
	// Implicit says the unit was started as a parent slice of another, not
	// by a call naming it.
	Implicit bool
}

// Systemd is a running fake systemd.
type Systemd struct {
	cfg      Config
	conn     *dbus.Conn
	fakeTree bool // Root is not a cgroupfs: its directories hold plain files

	mu    sync.Mutex
	units map[string]*Unit
	calls []Call
	jobID uint32
	fail  map[string]*dbus.Error // method -> the error its next call answers
	hold  bool                   // jobs never end (no JobRemoved)
}

// controllers the fake's systemd realizes a slice in on cgroup v1 (the
// hierarchies systemd manages with accounting on, and its own name=systemd
// one), and the v2 controllers an accounting property enables.
var (
	v1Hierarchies = []string{"cpu", "cpuacct", "memory", "pids", "blkio", "systemd"}
	v2Accounting  = map[string]string{
		"CPUAccounting": "cpu", "MemoryAccounting": "memory", "TasksAccounting": "pids", "IOAccounting": "io",
	}
)

// Start connects to cfg.Address, owns org.freedesktop.systemd1 and serves.
func Start(cfg Config) (*Systemd, error) {
	if cfg.CgroupVersion != 1 && cfg.CgroupVersion != 2 {
		return nil, fmt.Errorf("fakesystemd: cgroup version %d (want 1 or 2)", cfg.CgroupVersion)
	}
	if cfg.Version == "" {
		cfg.Version = "252"
	}
	if fi, err := os.Stat(cfg.Root); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("fakesystemd: cgroup tree %q is not a directory", cfg.Root)
	}
	conn, err := dbus.Connect(cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("fakesystemd: connect to %s: %w", cfg.Address, err)
	}
	s := &Systemd{cfg: cfg, conn: conn, units: map[string]*Unit{}, fail: map[string]*dbus.Error{}}
	s.fakeTree = !onCgroupfs(cfg.Root, cfg.CgroupVersion)
	if err := conn.Export(&manager{s}, ManagerPath, ManagerIf); err != nil {
		conn.Close()
		return nil, err
	}
	if _, err := prop.Export(conn, ManagerPath, prop.Map{ManagerIf: {
		"Version": {Value: cfg.Version, Emit: prop.EmitFalse},
	}}); err != nil {
		conn.Close()
		return nil, err
	}
	reply, err := conn.RequestName(BusName, dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		conn.Close()
		return nil, fmt.Errorf("fakesystemd: cannot own %s on %s (reply %v): %v", BusName, cfg.Address, reply, err)
	}
	return s, nil
}

// Close leaves the bus (the units' directories stay).
func (s *Systemd) Close() error { return s.conn.Close() }

// Unit returns a copy of the unit named name, if loaded.
func (s *Systemd) Unit(name string) (Unit, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.units[name]
	if !ok {
		return Unit{}, false
	}
	c := *u
	c.Properties = make(map[string]dbus.Variant, len(u.Properties))
	for k, v := range u.Properties {
		c.Properties[k] = v
	}
	return c, true
}

// Units are the names of the loaded units, sorted.
func (s *Systemd) Units() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.units))
	for n := range s.units {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Calls are the calls answered so far, in order.
func (s *Systemd) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// CallsTo are the calls of method answered so far, in order.
func (s *Systemd) CallsTo(method string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Forget drops the unit from the fake's memory and leaves its cgroup (a
// systemd that lost a transient unit): systemd answers NoSuchUnit for it.
func (s *Systemd) Forget(unit string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.units, unit)
}

// HoldJobs makes the jobs started from now on never end (a hung systemd:
// no JobRemoved), or, with false, end again.
func (s *Systemd) HoldJobs(hold bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = hold
}

// FailNext makes the next call of method (e.g. "SetUnitProperties") answer
// the D-Bus error name with message.
func (s *Systemd) FailNext(method, name, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[method] = dbus.NewError(name, []any{message})
}

// CgroupDirs are the directories the slice unit's cgroup has in the tree
// where systemd realizes it: on v1 one per hierarchy systemd manages that is
// present in the tree (cpu, cpuacct, memory, pids, blkio, systemd), on v2
// one.
func (s *Systemd) CgroupDirs(unit string) ([]string, error) {
	return s.dirsOf(unit, v1Hierarchies)
}

// dirsOf is CgroupDirs in the v1 hierarchies named (nil: every directory
// at the tree's root).
func (s *Systemd) dirsOf(unit string, hierarchies []string) ([]string, error) {
	rel, err := ExpandSlice(unit)
	if err != nil {
		return nil, err
	}
	if s.cfg.CgroupVersion == 2 {
		return []string{filepath.Join(s.cfg.Root, rel)}, nil
	}
	if hierarchies == nil {
		entries, err := os.ReadDir(s.cfg.Root)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			hierarchies = append(hierarchies, e.Name())
		}
	}
	var dirs []string
	for _, h := range hierarchies {
		if fi, err := os.Stat(filepath.Join(s.cfg.Root, h)); err == nil && fi.IsDir() {
			dirs = append(dirs, filepath.Join(s.cfg.Root, h, rel))
		}
	}
	return dirs, nil
}

// ExpandSlice is a slice unit's cgroup path as systemd names it:
// "a-b-c.slice" is "/a.slice/a-b.slice/a-b-c.slice", "-.slice" is "/".
func ExpandSlice(unit string) (string, error) {
	base, ok := strings.CutSuffix(unit, ".slice")
	if !ok || base == "" || strings.Contains(base, "/") {
		return "", fmt.Errorf("invalid slice name %q", unit)
	}
	if base == "-" {
		return "/", nil
	}
	var path, prefix string
	for _, part := range strings.Split(base, "-") {
		if part == "" {
			return "", fmt.Errorf("invalid slice name %q", unit)
		}
		path += "/" + prefix + part + ".slice"
		prefix += part + "-"
	}
	return path, nil
}

// parentSlice is the slice a slice unit is in ("-.slice" for a top one).
func parentSlice(unit string) string {
	base := strings.TrimSuffix(unit, ".slice")
	if i := strings.LastIndexByte(base, '-'); i > 0 {
		return base[:i] + ".slice"
	}
	return "-.slice"
}

// UnitPath is the object path of a unit, escaped as systemd escapes it.
func UnitPath(unit string) dbus.ObjectPath {
	var b strings.Builder
	for i := 0; i < len(unit); i++ {
		c := unit[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "_%02x", c)
		}
	}
	return dbus.ObjectPath("/org/freedesktop/systemd1/unit/" + b.String())
}

// property is one (sv) of a unit property array.
type property struct {
	Name  string
	Value dbus.Variant
}

// auxUnit is one (sa(sv)) of StartTransientUnit's auxiliary units.
type auxUnit struct {
	Name  string
	Props []property
}

// The properties the fake accepts on a slice, with their D-Bus signatures
// (systemd.resource-control(5), systemd.unit(5)); anything else is refused
// as systemd refuses an unknown property.
var sliceProperties = map[string]string{
	"Description": "s", "Wants": "as", "After": "as", "Before": "as", "DefaultDependencies": "b",
	"CPUAccounting": "b", "MemoryAccounting": "b", "TasksAccounting": "b", "IOAccounting": "b",
	"BlockIOAccounting": "b",
	"CPUShares":         "t", "CPUWeight": "t", "CPUQuotaPerSecUSec": "t", "CPUQuotaPeriodUSec": "t",
	"MemoryLimit": "t", "MemoryMax": "t", "MemoryHigh": "t", "MemoryLow": "t", "MemoryMin": "t",
	"TasksMax": "t", "AllowedCPUs": "ay", "AllowedMemoryNodes": "ay",
}

func checkProperties(unit string, props []property) *dbus.Error {
	for _, p := range props {
		if p.Name == "Delegate" || p.Name == "Slice" {
			// systemd: slices are not delegated, and are in the slice their
			// name says.
			return dbus.NewError(ErrInvalidArgs, []any{fmt.Sprintf("%s= is not supported for slice unit %s.", p.Name, unit)})
		}
		sig, ok := sliceProperties[p.Name]
		if !ok {
			return dbus.NewError(ErrPropertyReadOnly, []any{fmt.Sprintf("Cannot set property %s, or unknown property.", p.Name)})
		}
		if got := p.Value.Signature().String(); got != sig {
			return dbus.NewError(ErrInvalidArgs, []any{fmt.Sprintf("Property %s has signature %s, want %s.", p.Name, got, sig)})
		}
	}
	return nil
}

// manager is the exported org.freedesktop.systemd1.Manager.
type manager struct{ s *Systemd }

func (m *manager) StartTransientUnit(name, mode string, props []property, aux []auxUnit) (dbus.ObjectPath, *dbus.Error) {
	return m.s.startTransient(name, mode, props, aux)
}

func (m *manager) StopUnit(name, mode string) (dbus.ObjectPath, *dbus.Error) {
	return m.s.stop(name)
}

func (m *manager) SetUnitProperties(name string, runtime bool, props []property) *dbus.Error {
	return m.s.setProperties(name, props)
}

func (m *manager) ResetFailedUnit(name string) *dbus.Error {
	return m.s.resetFailed(name)
}

func (m *manager) GetUnit(name string) (dbus.ObjectPath, *dbus.Error) {
	return m.s.getUnit(name)
}

// injected returns the error FailNext set for method, once.
func (s *Systemd) injected(method string) *dbus.Error {
	e := s.fail[method]
	delete(s.fail, method)
	return e
}

func (s *Systemd) record(c Call) { s.calls = append(s.calls, c) }

func errName(e *dbus.Error) string {
	if e == nil {
		return ""
	}
	return e.Name
}

func (s *Systemd) startTransient(name, mode string, props []property, aux []auxUnit) (dbus.ObjectPath, *dbus.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.injected("StartTransientUnit")
	if e == nil {
		e = s.checkStart(name, mode, props, aux)
	}
	if e != nil {
		s.record(Call{Method: "StartTransientUnit", Unit: name, Err: e.Name})
		return "", e
	}
	result := "done"
	if err := s.realize(name, props); err != nil {
		result = "failed"
	}
	return s.job("StartTransientUnit", name, result), nil
}

func (s *Systemd) checkStart(name, mode string, props []property, aux []auxUnit) *dbus.Error {
	if mode != "replace" && mode != "fail" {
		return dbus.NewError(ErrInvalidArgs, []any{"Job mode " + mode + " invalid."})
	}
	if len(aux) > 0 {
		return dbus.NewError(ErrNotSupported, []any{"fakesystemd: no auxiliary units"})
	}
	if !strings.HasSuffix(name, ".slice") {
		return dbus.NewError(ErrNotSupported, []any{"fakesystemd: only slice units, not " + name})
	}
	if _, err := ExpandSlice(name); err != nil || name == "-.slice" {
		return dbus.NewError(ErrInvalidArgs, []any{fmt.Sprintf("Invalid unit name or type: %s", name)})
	}
	if _, ok := s.units[name]; ok {
		// also a parent slice started implicitly: it is loaded
		return dbus.NewError(ErrUnitExists, []any{fmt.Sprintf("Unit %s already exists.", name)})
	}
	return checkProperties(name, props)
}

// realize starts the slice and its parent slices: their cgroup directories
// (v1: in each hierarchy systemd manages; v2: with the controllers the
// accounting properties ask enabled in the parents' cgroup.subtree_control,
// cgroup.controllers as the kernel fills it) and the unit records.
func (s *Systemd) realize(name string, props []property) error {
	chain := []string{name}
	for p := parentSlice(name); p != "-.slice"; p = parentSlice(p) {
		chain = append([]string{p}, chain...)
	}
	var enable []string
	for _, p := range props {
		if c, ok := v2Accounting[p.Name]; ok {
			if b, _ := p.Value.Value().(bool); b {
				enable = append(enable, c)
			}
		}
	}
	for _, unit := range chain {
		if _, ok := s.units[unit]; !ok {
			s.units[unit] = &Unit{Name: unit, Properties: map[string]dbus.Variant{}, Implicit: true}
		}
		if err := s.mkdirs(unit, enable); err != nil {
			return err
		}
	}
	u := s.units[name]
	u.Implicit = false
	for _, p := range props {
		u.Properties[p.Name] = p.Value
	}
	return nil
}

// mkdirs makes the unit's cgroup. On a real tree the kernel fills a new
// cgroup; on a fake one the fake writes what the kernel would (a plain
// directory has nothing): cgroup.procs, on v1 cpuset's empty cpuset.cpus
// and cpuset.mems, which a client fills from the parent as on a real one,
// on v2 cgroup.controllers (the parent's cgroup.subtree_control) and an
// empty cgroup.subtree_control. On a fake v1 tree it makes the cgroup in
// every hierarchy (there is no rmdir of plain directories for the client).
func (s *Systemd) mkdirs(unit string, enable []string) error {
	hier := v1Hierarchies
	if s.fakeTree {
		hier = nil
	}
	dirs, err := s.dirsOf(unit, hier)
	if err != nil {
		return err
	}
	for _, d := range dirs {
		parent := filepath.Dir(d)
		if s.cfg.CgroupVersion == 2 {
			if err := s.enableControllers(parent, enable); err != nil {
				return err
			}
		}
		if err := os.Mkdir(d, 0o755); err != nil {
			if os.IsExist(err) {
				continue
			}
			return err
		}
		if !s.fakeTree {
			continue
		}
		files := map[string][]byte{"cgroup.procs": nil}
		if _, err := os.Stat(filepath.Join(parent, "cpuset.cpus")); err == nil && s.cfg.CgroupVersion == 1 {
			files["cpuset.cpus"], files["cpuset.mems"] = nil, nil
		}
		if s.cfg.CgroupVersion == 2 {
			files["cgroup.controllers"], _ = os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
			files["cgroup.subtree_control"] = nil
		}
		for f, data := range files {
			if err := os.WriteFile(filepath.Join(d, f), data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// onCgroupfs says whether root is a real cgroup tree (v1: its hierarchies
// are cgroup mounts).
func onCgroupfs(root string, version int) bool {
	dir := root
	if version == 1 {
		dir = filepath.Join(root, "cpu")
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false
	}
	return st.Type == unix.CGROUP_SUPER_MAGIC || st.Type == unix.CGROUP2_SUPER_MAGIC
}

// enableControllers enables in dir's cgroup.subtree_control those of ctrs
// that dir's cgroup.controllers offers: on a real tree as "+c", on a fake
// one written as the kernel shows the file (space separated, no '+').
func (s *Systemd) enableControllers(dir string, ctrs []string) error {
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("cgroup v2 tree: %w", err)
	}
	cur, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	on := strings.Fields(string(cur))
	var add []string
	for _, c := range ctrs {
		if slices.Contains(strings.Fields(string(avail)), c) && !slices.Contains(on, c) {
			add = append(add, c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if !s.fakeTree {
		return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+strings.Join(add, " +")), 0o644)
	}
	on = append(on, add...)
	sort.Strings(on)
	return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(on, " ")), 0o644)
}

// job answers a job method: a job path, and JobRemoved with result, which
// the client's listener takes once the call returned (go-systemd holds its
// job table's lock across the call).
func (s *Systemd) job(method, unit, result string) dbus.ObjectPath {
	s.jobID++
	path := dbus.ObjectPath("/org/freedesktop/systemd1/job/" + strconv.FormatUint(uint64(s.jobID), 10))
	if s.hold {
		s.record(Call{Method: method, Unit: unit})
		return path
	}
	s.record(Call{Method: method, Unit: unit, Result: result})
	_ = s.conn.Emit(ManagerPath, ManagerIf+".JobRemoved", s.jobID, path, unit, result)
	return path
}

func noSuchUnit(name string) *dbus.Error {
	return dbus.NewError(ErrNoSuchUnit, []any{fmt.Sprintf("Unit %s not loaded.", name)})
}

// stop stops the slice and every slice in it: their cgroups are removed,
// deepest first. A cgroup that holds a process fails the job and stays
// (systemd would kill the processes; a fake must not).
func (s *Systemd) stop(name string) (dbus.ObjectPath, *dbus.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.injected("StopUnit")
	if e == nil {
		if _, ok := s.units[name]; !ok {
			e = noSuchUnit(name)
		}
	}
	if e != nil {
		s.record(Call{Method: "StopUnit", Unit: name, Err: e.Name})
		return "", e
	}
	var victims []string
	prefix := strings.TrimSuffix(name, ".slice") + "-"
	for u := range s.units {
		if u == name || strings.HasPrefix(u, prefix) {
			victims = append(victims, u)
		}
	}
	// deepest first: longer names are deeper slices
	sort.Slice(victims, func(i, j int) bool { return len(victims[i]) > len(victims[j]) })
	result := "done"
	for _, u := range victims {
		if err := s.removeDirs(u); err != nil {
			result = "failed"
			break
		}
		delete(s.units, u)
	}
	return s.job("StopUnit", name, result), nil
}

var errHoldsProcess = errors.New("cgroup holds a process")

// removeDirs removes the unit's cgroup. On v1 it does so in every hierarchy
// of the tree: systemd removes it in those it manages and the client's
// rmdir in the others, which cannot remove a fake tree's directories (they
// hold plain files).
func (s *Systemd) removeDirs(unit string) error {
	hier := v1Hierarchies
	if s.fakeTree {
		hier = nil
	}
	dirs, err := s.dirsOf(unit, hier)
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if procs, _ := os.ReadFile(filepath.Join(d, "cgroup.procs")); strings.TrimSpace(string(procs)) != "" {
			return fmt.Errorf("%s: %w", d, errHoldsProcess)
		}
	}
	for _, d := range dirs {
		err := os.Remove(d) // a real cgroupfs removes a cgroup with rmdir
		if err != nil && !os.IsNotExist(err) && s.fakeTree {
			err = os.RemoveAll(d)
		}
		if err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

func (s *Systemd) setProperties(name string, props []property) *dbus.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.injected("SetUnitProperties")
	if e == nil {
		if _, ok := s.units[name]; !ok {
			e = noSuchUnit(name)
		} else {
			e = checkProperties(name, props)
		}
	}
	s.record(Call{Method: "SetUnitProperties", Unit: name, Err: errName(e)})
	if e != nil {
		return e
	}
	u := s.units[name]
	for _, p := range props {
		u.Properties[p.Name] = p.Value
	}
	return nil
}

func (s *Systemd) resetFailed(name string) *dbus.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.injected("ResetFailedUnit")
	if e == nil {
		if _, ok := s.units[name]; !ok {
			e = noSuchUnit(name)
		}
	}
	s.record(Call{Method: "ResetFailedUnit", Unit: name, Err: errName(e)})
	return e
}

func (s *Systemd) getUnit(name string) (dbus.ObjectPath, *dbus.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.injected("GetUnit")
	if e == nil {
		if _, ok := s.units[name]; !ok {
			e = noSuchUnit(name)
		}
	}
	s.record(Call{Method: "GetUnit", Unit: name, Err: errName(e)})
	if e != nil {
		return "", e
	}
	return UnitPath(name), nil
}
