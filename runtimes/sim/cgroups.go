package sim

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/podspec"
)

// The simulated node's cgroups: an in-memory tree that a node agent
// drives as it drives the host's (the kubepods, QoS and pod<uid> cgroups)
// and whose values act on the simulated containers: a sandbox's cgroup
// parent (RunPodSandbox's linux.cgroup_parent) links the pod to its
// cgroup, so a memory limit on it or on any cgroup above it OOM-kills
// when the containers under it together use more (alloc), and a pids
// limit makes spawn fail. Containers' own cgroups are not nodes of the
// tree: a container's values are its CRI resources.

// DefaultCgroupVersion is the version the simulated cgroups behave as
// unless Config.CgroupVersion says otherwise.
const DefaultCgroupVersion = 2

// Kernel defaults a cgroup reads back before anything is written.
const (
	cgDefaultShares = 1024
	cgDefaultPeriod = 100_000 // µs
	cgMinPeriod     = 1_000   // µs, the kernel's bounds on cpu.cfs_period_us
	cgMaxPeriod     = 1_000_000
	cgMinQuota      = 1_000 // µs
	firstPid        = 1000  // simulated pids count up from here
)

// cgNode is one cgroup: the values written to it (nil: never written,
// the kernel's default) and its children by name.
type cgNode struct {
	res      podspec.CgroupResources
	children map[string]*cgNode
}

// Cgroups is the runtime's cgroup tree, with the methods of the agent's
// cgroup Manager (actors/cgroup): the agent's CgroupActor drives it when
// the runtime is the embedded sim. The driver is cgroupfs (what the sim's
// RuntimeConfig reports); a sandbox's systemd-style parent
// (/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice)
// links it to the same cgroup. Safe for concurrent use.
type Cgroups struct {
	r *Runtime
}

// Cgroups is the runtime's cgroup tree.
func (r *Runtime) Cgroups() *Cgroups { return &Cgroups{r: r} }

// Version is Config.CgroupVersion: 1 refuses a memory limit below what
// the cgroup uses (EBUSY, as the v1 kernel does after failing to
// reclaim), 2 takes it and OOM-kills (memory.max).
func (g *Cgroups) Version() int { return g.r.cgVersion() }

// Driver is cgroupfs.
func (g *Cgroups) Driver() podspec.CgroupDriver { return podspec.CgroupDriverCgroupfs }

// Exists says whether the cgroup is there (the root always is).
func (g *Cgroups) Exists(name podspec.CgroupName) bool {
	g.r.mu.RLock()
	defer g.r.mu.RUnlock()
	return g.r.cgLookupLocked(name) != nil
}

// Create makes the cgroup and its missing parents and writes r's values;
// an existing cgroup is updated. Invalid values make nothing.
func (g *Cgroups) Create(name podspec.CgroupName, res *podspec.CgroupResources) error {
	if err := validCgroupName(name); err != nil {
		return err
	}
	if err := validCgroupResources(name, res); err != nil {
		return err
	}
	g.r.mu.Lock()
	defer g.r.mu.Unlock()
	g.r.cgEnsureLocked(name)
	return g.r.cgUpdateLocked(name, res)
}

// Update writes r's non-nil values. A memory limit below what the
// cgroup's containers use is refused on v1 (nothing is written) and
// OOM-kills on v2 (the largest containers first, until the rest fit).
func (g *Cgroups) Update(name podspec.CgroupName, res *podspec.CgroupResources) error {
	if err := validCgroupName(name); err != nil {
		return err
	}
	if err := validCgroupResources(name, res); err != nil {
		return err
	}
	g.r.mu.Lock()
	defer g.r.mu.Unlock()
	return g.r.cgUpdateLocked(name, res)
}

// Read returns the cgroup's values, every field set: what was written,
// else the kernel's default (shares 1024, period 100 ms, no quota, no
// memory or pids limit).
func (g *Cgroups) Read(name podspec.CgroupName) (*podspec.CgroupResources, error) {
	g.r.mu.RLock()
	defer g.r.mu.RUnlock()
	n := g.r.cgLookupLocked(name)
	if n == nil {
		return nil, cgNotFound(name)
	}
	out := &podspec.CgroupResources{
		CPUShares: ptrOr(n.res.CPUShares, cgDefaultShares),
		CPUQuota:  ptrOr(n.res.CPUQuota, -1),
		CPUPeriod: ptrOr(n.res.CPUPeriod, cgDefaultPeriod),
		Memory:    ptrOr(n.res.Memory, -1),
		PidsLimit: ptrOr(n.res.PidsLimit, -1),
	}
	if len(n.res.HugePageLimit) > 0 {
		out.HugePageLimit = maps.Clone(n.res.HugePageLimit)
	}
	return out, nil
}

// Destroy removes the cgroup and its children. One that holds a
// simulated process (a ready sandbox's pause, a running container's
// processes) anywhere under it is refused with ErrFailedPrecondition and
// left as it is. Destroying a cgroup that is not there is not an error
// (as rmdir of a cgroup already gone is not, to a kubelet); the root
// cannot be destroyed.
func (g *Cgroups) Destroy(name podspec.CgroupName) error {
	if err := validCgroupName(name); err != nil {
		return err
	}
	if len(name) == 0 {
		return errdefs.Wrap(errdefs.ErrInvalidArgument, errors.New("sim cgroups: the root cgroup cannot be destroyed: invalid argument"))
	}
	g.r.mu.Lock()
	defer g.r.mu.Unlock()
	parent := g.r.cgLookupLocked(name[:len(name)-1])
	if parent == nil || parent.children[name[len(name)-1]] == nil {
		return nil
	}
	if pids := g.r.cgPidsLocked(cgKey(name)); len(pids) > 0 {
		return errdefs.Wrap(errdefs.ErrFailedPrecondition,
			fmt.Errorf("sim cgroups: %s holds %d processes (pids %v): device or resource busy", name.Cgroupfs(), len(pids), pids))
	}
	delete(parent.children, name[len(name)-1])
	return nil
}

// Pids are the simulated processes in the cgroup and its children,
// ascending: each ready sandbox's pause process and each running
// container's main process and what it spawned.
func (g *Cgroups) Pids(name podspec.CgroupName) ([]int, error) {
	g.r.mu.RLock()
	defer g.r.mu.RUnlock()
	if g.r.cgLookupLocked(name) == nil {
		return nil, cgNotFound(name)
	}
	return g.r.cgPidsLocked(cgKey(name)), nil
}

// Children are the cgroup's child cgroups' names, sorted.
func (g *Cgroups) Children(name podspec.CgroupName) ([]podspec.CgroupName, error) {
	g.r.mu.RLock()
	defer g.r.mu.RUnlock()
	n := g.r.cgLookupLocked(name)
	if n == nil {
		return nil, cgNotFound(name)
	}
	out := make([]podspec.CgroupName, 0, len(n.children))
	for _, c := range slices.Sorted(maps.Keys(n.children)) {
		out = append(out, name.Child(c))
	}
	return out, nil
}

// ---- the tree (the caller holds r.mu)

func ptrOr[T any](p *T, def T) *T {
	if p != nil {
		v := *p
		return &v
	}
	return &def
}

func cgNotFound(name podspec.CgroupName) error {
	return errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("sim cgroups: %s: no such cgroup", name.Cgroupfs()))
}

// cgKey is a name as the tree's key: its parts joined with '/' ("" for
// the root).
func cgKey(name podspec.CgroupName) string { return strings.Join(name, "/") }

// under says whether the cgroup keyed k is the one keyed anc or below it.
func under(k, anc string) bool {
	return anc == "" || k == anc || strings.HasPrefix(k, anc+"/")
}

func validCgroupName(name podspec.CgroupName) error {
	for _, p := range name {
		if p == "" || p == "." || p == ".." || strings.ContainsAny(p, "/\x00") {
			return errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("sim cgroups: invalid cgroup name %q", []string(name)))
		}
	}
	return nil
}

// validCgroupResources refuses what the kernel refuses with EINVAL.
func validCgroupResources(name podspec.CgroupName, r *podspec.CgroupResources) error {
	if r == nil {
		return nil
	}
	bad := func(what string, v any) error {
		return errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("sim cgroups: %s: %s %v: invalid argument", name.Cgroupfs(), what, v))
	}
	switch {
	case r.CPUQuota != nil && *r.CPUQuota != -1 && *r.CPUQuota < cgMinQuota:
		return bad("cpu quota (µs)", *r.CPUQuota)
	case r.CPUPeriod != nil && (*r.CPUPeriod < cgMinPeriod || *r.CPUPeriod > cgMaxPeriod):
		return bad("cpu period (µs)", *r.CPUPeriod)
	case r.Memory != nil && *r.Memory < -1:
		return bad("memory limit", *r.Memory)
	case r.PidsLimit != nil && *r.PidsLimit < -1:
		return bad("pids limit", *r.PidsLimit)
	}
	for size, limit := range r.HugePageLimit {
		if size <= 0 || limit < -1 {
			return bad("hugepage limit", fmt.Sprintf("%d=%d", size, limit))
		}
	}
	return nil
}

func (r *Runtime) cgVersion() int {
	if r.cfg.CgroupVersion == 1 {
		return 1
	}
	return DefaultCgroupVersion
}

func (r *Runtime) cgLookupLocked(name podspec.CgroupName) *cgNode {
	n := r.cgRoot
	for _, p := range name {
		if n = n.children[p]; n == nil {
			return nil
		}
	}
	return n
}

// cgEnsureLocked makes the cgroup and its missing parents, as mkdir -p
// (and runc for a container's cgroup parent) does.
func (r *Runtime) cgEnsureLocked(name podspec.CgroupName) *cgNode {
	n := r.cgRoot
	for _, p := range name {
		c := n.children[p]
		if c == nil {
			c = &cgNode{children: map[string]*cgNode{}}
			n.children[p] = c
		}
		n = c
	}
	return n
}

func (r *Runtime) cgUpdateLocked(name podspec.CgroupName, res *podspec.CgroupResources) error {
	n := r.cgLookupLocked(name)
	if n == nil {
		return cgNotFound(name)
	}
	if res == nil {
		return nil
	}
	key := cgKey(name)
	if err := r.cgQuotaFitsLocked(name, n, res); err != nil {
		return err
	}
	if m := res.Memory; m != nil && *m >= 0 && r.cgVersion() == 1 {
		if used := r.cgMemoryLocked(key); used > uint64(*m) {
			return errdefs.Wrap(errdefs.ErrFailedPrecondition, fmt.Errorf(
				"sim cgroups: write %d to %s/memory.limit_in_bytes: device or resource busy (usage %d)", *m, name.Cgroupfs(), used))
		}
	}
	set := func(dst **int64, v *int64) {
		if v != nil {
			x := *v
			*dst = &x
		}
	}
	if res.CPUShares != nil {
		// The kernel's bounds: it clamps what is written (v1), and a v2
		// weight converted from shares stays in 1..10000.
		v := min(max(*res.CPUShares, 2), 262144)
		n.res.CPUShares = &v
	}
	if res.CPUPeriod != nil {
		v := *res.CPUPeriod
		n.res.CPUPeriod = &v
	}
	set(&n.res.CPUQuota, res.CPUQuota)
	set(&n.res.Memory, res.Memory)
	set(&n.res.PidsLimit, res.PidsLimit)
	if len(res.HugePageLimit) > 0 {
		if n.res.HugePageLimit == nil {
			n.res.HugePageLimit = map[int64]int64{}
		}
		maps.Copy(n.res.HugePageLimit, res.HugePageLimit)
	}
	if res.Memory != nil {
		r.cgEnforceMemoryLocked(nil, key) // v2: memory.max below usage OOM-kills
	}
	return nil
}

// cpuShare is a quota over its period in cores; 0 for no quota.
func cpuShare(quota int64, period uint64) float64 {
	if quota <= 0 {
		return 0
	}
	if period == 0 {
		period = cgDefaultPeriod
	}
	return float64(quota) / float64(period)
}

// share is n's CPU quota in cores (0: none).
func (n *cgNode) share() float64 {
	if n.res.CPUQuota == nil {
		return 0
	}
	var p uint64
	if n.res.CPUPeriod != nil {
		p = *n.res.CPUPeriod
	}
	return cpuShare(*n.res.CPUQuota, p)
}

// cgQuotaFitsLocked is cgroup v1's hierarchical CFS check (the kernel
// answers EINVAL): a cgroup's quota may not be below a quota under it
// (a child cgroup's, a running container's) nor above one over it. v2
// has no such check (the lowest limit on the path applies).
func (r *Runtime) cgQuotaFitsLocked(name podspec.CgroupName, n *cgNode, res *podspec.CgroupResources) error {
	if r.cgVersion() != 1 || (res.CPUQuota == nil && res.CPUPeriod == nil) {
		return nil
	}
	next := *n
	if res.CPUQuota != nil {
		next.res.CPUQuota = res.CPUQuota
	}
	if res.CPUPeriod != nil {
		next.res.CPUPeriod = res.CPUPeriod
	}
	mine := next.share()
	if mine == 0 {
		return nil
	}
	einval := func(what string) error {
		return errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf(
			"sim cgroups: write %s/cpu.cfs_quota_us: invalid argument (cgroup v1: a quota of %.3f cores is below %s)", name.Cgroupfs(), mine, what))
	}
	var below func(c *cgNode, path string) error
	below = func(c *cgNode, path string) error {
		for part, ch := range c.children {
			if sh := ch.share(); sh > mine {
				return einval(fmt.Sprintf("%s/%s's %.3f", path, part, sh))
			}
			if err := below(ch, path+"/"+part); err != nil {
				return err
			}
		}
		return nil
	}
	if err := below(n, name.Cgroupfs()); err != nil {
		return err
	}
	key := cgKey(name)
	for _, sb := range r.sandboxes {
		if !under(sb.cgKey, key) {
			continue
		}
		for _, c := range sb.containers {
			if sh := cpuShare(c.linuxRes.GetCpuQuota(), uint64(max(c.linuxRes.GetCpuPeriod(), 0))); c.running() && sh > mine {
				return einval(fmt.Sprintf("container %s's %.3f", c.id, sh))
			}
		}
	}
	for i := len(name) - 1; i >= 0; i-- {
		if p := r.cgLookupLocked(name[:i]); p != nil {
			if sh := p.share(); sh > 0 && mine > sh {
				return errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf(
					"sim cgroups: write %s/cpu.cfs_quota_us: invalid argument (cgroup v1: a quota of %.3f cores is above %s's %.3f)", name.Cgroupfs(), mine, name[:i].Cgroupfs(), sh))
			}
		}
	}
	return nil
}

// cgContainerQuotaFitsLocked is the same check for a container's own
// cgroup under its sandbox's: its quota may not pass a quota above it.
func (r *Runtime) cgContainerQuotaFitsLocked(c *container, res *runtimeapi.LinuxContainerResources) (string, bool) {
	if r.cgVersion() != 1 {
		return "", true
	}
	sh := cpuShare(res.GetCpuQuota(), uint64(max(res.GetCpuPeriod(), 0)))
	if sh == 0 {
		return "", true
	}
	full := ""
	r.cgLimitsLocked(c.sb, func(key string, n *cgNode) bool {
		if ps := n.share(); ps > 0 && sh > ps {
			full = "/" + key
			return false
		}
		return true
	})
	return full, full == ""
}

// cgMemoryLocked is the memory the cgroup keyed k and its children use:
// the pause processes of ready sandboxes and the running containers'
// working sets.
func (r *Runtime) cgMemoryLocked(k string) uint64 {
	var used uint64
	for _, sb := range r.sandboxes {
		if !under(sb.cgKey, k) {
			continue
		}
		if sb.state == runtimeapi.PodSandboxState_SANDBOX_READY {
			used += pauseMemory
		}
		for _, c := range sb.containers {
			used += c.workingSet()
		}
	}
	return used
}

// cgPidsLocked lists the simulated processes under the cgroup keyed k.
func (r *Runtime) cgPidsLocked(k string) []int {
	var pids []int
	for _, sb := range r.sandboxes {
		if !under(sb.cgKey, k) {
			continue
		}
		if sb.pausePid != 0 {
			pids = append(pids, sb.pausePid)
		}
		for _, c := range sb.containers {
			if c.running() {
				pids = append(pids, c.pids...)
			}
		}
	}
	slices.Sort(pids)
	return pids
}

// cgLimitsLocked calls each with the sandbox's cgroup and every cgroup
// above it that exists, deepest first, until each returns false.
func (r *Runtime) cgLimitsLocked(sb *sandbox, each func(key string, n *cgNode) bool) {
	if sb.cgKey == "" {
		return
	}
	parts := strings.Split(sb.cgKey, "/")
	for i := len(parts); i > 0; i-- {
		n := r.cgLookupLocked(parts[:i])
		if n == nil {
			continue
		}
		if !each(strings.Join(parts[:i], "/"), n) {
			return
		}
	}
}

// cgEnforceMemoryLocked OOM-kills, as the kernel's memory controller
// does, while a cgroup above c's sandbox (or the cgroup keyed only, when
// c is nil) uses more than its memory limit: the running container using
// the most memory under it goes first (c on a tie). It reports whether c
// was killed.
func (r *Runtime) cgEnforceMemoryLocked(c *container, only string) bool {
	check := func(key string, n *cgNode) bool {
		if n.res.Memory == nil || *n.res.Memory < 0 {
			return true
		}
		for r.cgMemoryLocked(key) > uint64(*n.res.Memory) {
			v := r.cgVictimLocked(key, c)
			if v == nil {
				return true
			}
			r.killContainerLocked(v, exitKilled, "OOMKilled")
		}
		return true
	}
	if c == nil {
		if n := r.cgLookupLocked(strings.Split(only, "/")); n != nil && only != "" {
			check(only, n)
		}
		return false
	}
	r.cgLimitsLocked(c.sb, check)
	return !c.running()
}

// cgVictimLocked is the running container under the cgroup keyed k with
// the largest working set (prefer on a tie), nil when none runs.
func (r *Runtime) cgVictimLocked(k string, prefer *container) *container {
	var v *container
	for _, sb := range r.sandboxes {
		if !under(sb.cgKey, k) {
			continue
		}
		for _, c := range sb.containers {
			if !c.running() {
				continue
			}
			if v == nil || c.workingSet() > v.workingSet() || (c == prefer && c.workingSet() == v.workingSet()) {
				v = c
			}
		}
	}
	return v
}

// cgPidsRoomLocked says whether n more processes fit every pids limit
// above the sandbox; else the limit's cgroup.
func (r *Runtime) cgPidsRoomLocked(sb *sandbox, n uint64) (string, bool) {
	full := ""
	r.cgLimitsLocked(sb, func(key string, node *cgNode) bool {
		if node.res.PidsLimit == nil || *node.res.PidsLimit < 0 {
			return true
		}
		if uint64(len(r.cgPidsLocked(key)))+n > uint64(*node.res.PidsLimit) {
			full = "/" + key
			return false
		}
		return true
	})
	return full, full == ""
}

// newPidsLocked hands out n simulated pids.
func (r *Runtime) newPidsLocked(n uint64) []int {
	out := make([]int, 0, n)
	for range n {
		if r.nextPid < firstPid {
			r.nextPid = firstPid
		}
		out = append(out, r.nextPid)
		r.nextPid++
	}
	return out
}

// parseCgroupParent reads a sandbox's cgroup parent as a cgroup name:
// a cgroupfs path (/kubepods/burstable/pod<uid>) or a systemd slice
// path whose last slice names it (kubepods-burstable-pod<uid>.slice,
// '_' in a part standing for '-').
func parseCgroupParent(p string) (podspec.CgroupName, error) {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil, nil
	}
	var name podspec.CgroupName
	if strings.HasSuffix(p, ".slice") {
		last := strings.TrimSuffix(p[strings.LastIndex(p, "/")+1:], ".slice")
		for part := range strings.SplitSeq(last, "-") {
			name = append(name, strings.ReplaceAll(part, "_", "-"))
		}
	} else {
		name = strings.Split(p, "/")
	}
	if err := validCgroupName(name); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "cgroup parent %q: %v", p, err)
	}
	return name, nil
}

// ---- containers' resources (UpdateContainerResources)

// mergeResources is cur with upd's values applied as containerd 2.x
// applies an update to a container's spec: a CPU period, quota or shares,
// a memory limit or a cpuset given (non-zero) replaces the current one,
// the rest stays (oom_score_adj is never updated).
func mergeResources(cur, upd *runtimeapi.LinuxContainerResources) *runtimeapi.LinuxContainerResources {
	out := &runtimeapi.LinuxContainerResources{}
	if cur != nil {
		out = cloneResources(cur)
	}
	if v := upd.GetCpuPeriod(); v != 0 {
		out.CpuPeriod = v
	}
	if v := upd.GetCpuQuota(); v != 0 {
		out.CpuQuota = v
	}
	if v := upd.GetCpuShares(); v != 0 {
		out.CpuShares = v
	}
	if v := upd.GetMemoryLimitInBytes(); v != 0 {
		out.MemoryLimitInBytes = v
	}
	if v := upd.GetMemorySwapLimitInBytes(); v != 0 {
		out.MemorySwapLimitInBytes = v
	}
	if v := upd.GetCpusetCpus(); v != "" {
		out.CpusetCpus = v
	}
	if v := upd.GetCpusetMems(); v != "" {
		out.CpusetMems = v
	}
	if len(upd.GetHugepageLimits()) > 0 {
		out.HugepageLimits = upd.GetHugepageLimits()
	}
	if len(upd.GetUnified()) > 0 {
		out.Unified = maps.Clone(upd.GetUnified())
	}
	return out
}

func cloneResources(r *runtimeapi.LinuxContainerResources) *runtimeapi.LinuxContainerResources {
	return &runtimeapi.LinuxContainerResources{
		CpuPeriod: r.CpuPeriod, CpuQuota: r.CpuQuota, CpuShares: r.CpuShares,
		MemoryLimitInBytes: r.MemoryLimitInBytes, OomScoreAdj: r.OomScoreAdj,
		CpusetCpus: r.CpusetCpus, CpusetMems: r.CpusetMems,
		HugepageLimits: r.HugepageLimits, Unified: r.Unified,
		MemorySwapLimitInBytes: r.MemorySwapLimitInBytes,
	}
}

// addCgroupFlags registers --cgroup-version.
func (c *Config) addCgroupFlags(fs *pflag.FlagSet) {
	fs.IntVar(&c.CgroupVersion, "cgroup-version", c.CgroupVersion,
		"sim runtime: the cgroup version the simulated cgroups behave as (1: a memory limit below usage is refused; 2: it OOM-kills); 0 = 2")
}

func (c Config) validateCgroups() error {
	if c.CgroupVersion != 0 && c.CgroupVersion != 1 && c.CgroupVersion != 2 {
		return fmt.Errorf("sim: cgroup version %d: want 1 or 2", c.CgroupVersion)
	}
	return nil
}
