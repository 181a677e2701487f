package cgroup

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"github.com/opencontainers/cgroups/fs2"
	"golang.org/x/sys/unix"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/podspec"
)

// set writes r's non-nil values, one controller at a time so that an
// error names the files and values of the write that failed. A value for
// a controller the host lacks is skipped (the manager named those at
// construction).
func (m *Cgroupfs) set(name podspec.CgroupName, r *podspec.CgroupResources) error {
	if r == nil {
		return nil
	}
	if m.version == 2 {
		return m.setV2(name, r)
	}
	return m.setV1(name, r)
}

func (m *Cgroupfs) skipped(name podspec.CgroupName, controller string) {
	m.log.Debug("cgroup value skipped: controller not available", "cgroup", name.Cgroupfs(), "controller", controller)
}

func (m *Cgroupfs) setV1(name podspec.CgroupName, r *podspec.CgroupResources) error {
	dirs := m.dirs(name)
	cg := name.Cgroupfs()
	if r.CPUShares != nil || r.CPUQuota != nil || r.CPUPeriod != nil {
		dir, ok := dirs["cpu"]
		if !ok {
			m.skipped(name, "cpu")
		} else {
			res := &cgroups.Resources{}
			var what []string
			if r.CPUShares != nil {
				res.CpuShares = *r.CPUShares
				what = append(what, fmt.Sprintf("cpu.shares=%d", *r.CPUShares))
			}
			if r.CPUPeriod != nil {
				res.CpuPeriod = *r.CPUPeriod
				what = append(what, fmt.Sprintf("cpu.cfs_period_us=%d", *r.CPUPeriod))
			}
			if r.CPUQuota != nil {
				res.CpuQuota = *r.CPUQuota
				what = append(what, fmt.Sprintf("cpu.cfs_quota_us=%d", *r.CPUQuota))
			}
			if err := (&fs.CpuGroup{}).Set(dir, res); err != nil {
				return newWriteError(cg, dir, strings.Join(what, " "), err)
			}
		}
	}
	if r.Memory != nil {
		dir, ok := dirs["memory"]
		if !ok {
			m.skipped(name, "memory")
		} else if err := (&fs.MemoryGroup{}).Set(dir, &cgroups.Resources{Memory: *r.Memory}); err != nil {
			return m.memoryError(name, dir, "memory.limit_in_bytes", "memory.usage_in_bytes", *r.Memory, err)
		}
	}
	if r.PidsLimit != nil {
		dir, ok := dirs["pids"]
		if !ok {
			m.skipped(name, "pids")
		} else if err := (&fs.PidsGroup{}).Set(dir, &cgroups.Resources{PidsLimit: r.PidsLimit}); err != nil {
			return newWriteError(cg, dir, "pids.max="+pidsValue(*r.PidsLimit), err)
		}
	}
	if limits := m.hugetlbLimits(r); limits != nil {
		dir, ok := dirs["hugetlb"]
		if !ok {
			m.skipped(name, "hugetlb")
		} else if err := (&fs.HugetlbGroup{}).Set(dir, &cgroups.Resources{HugetlbLimit: limits}); err != nil {
			return newWriteError(cg, dir, hugetlbWhat(func(s string) string { return "hugetlb." + s + ".limit_in_bytes" }, limits), err)
		}
	}
	return nil
}

func pidsValue(limit int64) string {
	if limit < 0 {
		return "max"
	}
	return strconv.FormatInt(limit, 10)
}

// memoryError classifies a refused memory limit. The library turns the
// kernel's EBUSY on v1 into a message of its own and refuses a v2 limit
// below usage before writing (what upstream does before lowering a pod's
// limit): both are a limit below the cgroup's usage, read here to say so.
func (m *Cgroupfs) memoryError(name podspec.CgroupName, dir, file, usageFile string, limit int64, err error) error {
	we := newWriteError(name.Cgroupfs(), dir, fmt.Sprintf("%s=%d", file, limit), err)
	if we.errno != 0 || limit <= 0 {
		return we
	}
	usage, uerr := readInt(dir, usageFile)
	if uerr == nil && usage >= limit {
		we.class, we.errno = errdefs.ErrFailedPrecondition, unix.EBUSY
		we.reason = fmt.Sprintf("EBUSY: the limit is below the cgroup's memory usage %d", usage)
	}
	return we
}

func (m *Cgroupfs) has(controller string) bool {
	for _, c := range m.needed {
		if c == controller {
			return true
		}
	}
	return false
}

func (m *Cgroupfs) setV2(name podspec.CgroupName, r *podspec.CgroupResources) error {
	dir := m.dirs(name)[""]
	cg := name.Cgroupfs()
	lib := func(res *cgroups.Resources) error {
		mgr, err := fs2.NewManager(&cgroups.Cgroup{Resources: &cgroups.Resources{}}, dir)
		if err != nil {
			return err
		}
		return mgr.Set(res)
	}
	if r.CPUShares != nil || r.CPUQuota != nil || r.CPUPeriod != nil {
		if !m.has("cpu") {
			m.skipped(name, "cpu")
		} else {
			res := &cgroups.Resources{}
			var what []string
			if r.CPUShares != nil {
				res.CpuWeight = CPUSharesToWeight(*r.CPUShares)
				what = append(what, fmt.Sprintf("cpu.weight=%d", res.CpuWeight))
			}
			if r.CPUQuota != nil || r.CPUPeriod != nil {
				// cpu.max holds both: keep the one r leaves alone.
				quota, period, err := readCPUMax(dir)
				if err != nil && !errors.Is(err, os.ErrNotExist) {
					return classifyErr(fmt.Errorf("cgroup %s: %w", cg, err))
				}
				if r.CPUQuota != nil {
					quota = *r.CPUQuota
				}
				if r.CPUPeriod != nil {
					period = *r.CPUPeriod
				}
				if quota == 0 {
					quota = -1
				}
				if period == 0 {
					period = defaultCPUPeriod
				}
				res.CpuQuota, res.CpuPeriod = quota, period
				what = append(what, fmt.Sprintf("cpu.max=%s %d", quotaValue(quota), period))
			}
			if err := lib(res); err != nil {
				return newWriteError(cg, dir, strings.Join(what, " "), err)
			}
		}
	}
	if r.Memory != nil {
		if !m.has("memory") {
			m.skipped(name, "memory")
		} else if err := lib(&cgroups.Resources{Memory: *r.Memory, MemoryCheckBeforeUpdate: true}); err != nil {
			return m.memoryError(name, dir, "memory.max", "memory.current", *r.Memory, err)
		}
	}
	if r.PidsLimit != nil {
		if !m.has("pids") {
			m.skipped(name, "pids")
		} else if err := lib(&cgroups.Resources{PidsLimit: r.PidsLimit}); err != nil {
			return newWriteError(cg, dir, "pids.max="+pidsValue(*r.PidsLimit), err)
		}
	}
	if limits := m.hugetlbLimits(r); limits != nil {
		if !m.has("hugetlb") {
			m.skipped(name, "hugetlb")
		} else if err := lib(&cgroups.Resources{HugetlbLimit: limits}); err != nil {
			return newWriteError(cg, dir, hugetlbWhat(func(s string) string { return "hugetlb." + s + ".max" }, limits), err)
		}
	}
	return nil
}

// defaultCPUPeriod is the kernel's cpu.max period where none is set.
const defaultCPUPeriod = 100000

func quotaValue(q int64) string {
	if q < 0 {
		return "max"
	}
	return strconv.FormatInt(q, 10)
}

// Read returns the cgroup's values that it can read: a controller the
// host lacks leaves its fields nil. No limit reads as -1; on v2 the
// shares are CPUWeightToShares of cpu.weight (compare with SameCPUWeight).
// ErrNotFound when the cgroup is not there.
func (m *Cgroupfs) Read(name podspec.CgroupName) (*podspec.CgroupResources, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if !m.anyDir(name) {
		return nil, notFound(name)
	}
	out := &podspec.CgroupResources{}
	var errs []error
	// keep records a value read; a file that is not there is no value.
	keep := func(err error) bool {
		if err == nil {
			return true
		}
		if !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		return false
	}
	if m.version == 2 {
		dir := m.dirs(name)[""]
		if w, err := readInt(dir, "cpu.weight"); keep(err) {
			out.CPUShares = ptr(CPUWeightToShares(uint64(w)))
		}
		if q, p, err := readCPUMax(dir); keep(err) {
			out.CPUQuota, out.CPUPeriod = &q, &p
		}
		if v, err := readInt(dir, "memory.max"); keep(err) {
			out.Memory = &v
		}
		if v, err := readInt(dir, "pids.max"); keep(err) {
			out.PidsLimit = &v
		}
		m.readHugetlb(dir, ".max", out, keep)
	} else {
		dirs := m.dirs(name)
		if dir, ok := dirs["cpu"]; ok {
			if v, err := readInt(dir, "cpu.shares"); keep(err) {
				out.CPUShares = ptr(uint64(v))
			}
			if v, err := readInt(dir, "cpu.cfs_quota_us"); keep(err) {
				out.CPUQuota = &v
			}
			if v, err := readInt(dir, "cpu.cfs_period_us"); keep(err) {
				out.CPUPeriod = ptr(uint64(v))
			}
		}
		if dir, ok := dirs["memory"]; ok {
			if v, err := readInt(dir, "memory.limit_in_bytes"); keep(err) {
				out.Memory = &v
			}
		}
		if dir, ok := dirs["pids"]; ok {
			if v, err := readInt(dir, "pids.max"); keep(err) {
				out.PidsLimit = &v
			}
		}
		if dir, ok := dirs["hugetlb"]; ok {
			m.readHugetlb(dir, ".limit_in_bytes", out, keep)
		}
	}
	if len(errs) > 0 {
		return out, classifyErr(fmt.Errorf("cgroup %s: %w", name.Cgroupfs(), errors.Join(errs...)))
	}
	return out, nil
}

func (m *Cgroupfs) readHugetlb(dir, suffix string, out *podspec.CgroupResources, keep func(error) bool) {
	for _, s := range m.hugePageSizes {
		size, err := hugePageSizeBytes(s)
		if err != nil {
			continue
		}
		if v, err := readInt(dir, "hugetlb."+s+suffix); keep(err) {
			if out.HugePageLimit == nil {
				out.HugePageLimit = map[int64]int64{}
			}
			out.HugePageLimit[size] = v
		}
	}
}

// MemoryUsage is the cgroup's memory usage in bytes (v1
// memory.usage_in_bytes, v2 memory.current): what a pod's memory limit
// may not go below.
func (m *Cgroupfs) MemoryUsage(name podspec.CgroupName) (int64, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	dir, file := m.dirs(name)[""], "memory.current"
	if m.version == 1 {
		var ok bool
		if dir, ok = m.dirs(name)["memory"]; !ok {
			return 0, errdefs.Wrap(errdefs.ErrNotFound, errors.New("no memory controller mounted"))
		}
		file = "memory.usage_in_bytes"
	}
	v, err := readInt(dir, file)
	if err != nil {
		return 0, classifyErr(fmt.Errorf("cgroup %s: %w", name.Cgroupfs(), err))
	}
	return v, nil
}

func ptr[T any](v T) *T { return &v }

// unlimited is the smallest value a v1 limit file shows for "no limit"
// (the kernel's page counter maximum, in bytes).
var unlimited = math.MaxInt64 - int64(os.Getpagesize()) + 1

// readInt reads a one-number cgroup file: "max" and v1's page counter
// maximum are -1.
func readInt(dir, file string) (int64, error) {
	s, err := cgroups.ReadFile(dir, file)
	if err != nil {
		return 0, err
	}
	s = strings.TrimSpace(s)
	if s == "max" {
		return -1, nil
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		if u >= uint64(unlimited) {
			return -1, nil
		}
		return int64(u), nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s/%s: %q is not a number", dir, file, s)
	}
	return v, nil
}

// readCPUMax reads v2 cpu.max: the quota (-1 for max) and the period.
func readCPUMax(dir string) (int64, uint64, error) {
	s, err := cgroups.ReadFile(dir, "cpu.max")
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("%s/cpu.max: %q is not \"QUOTA PERIOD\"", dir, strings.TrimSpace(s))
	}
	quota := int64(-1)
	if f[0] != "max" {
		if quota, err = strconv.ParseInt(f[0], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("%s/cpu.max: quota %q is not a number", dir, f[0])
		}
	}
	period, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("%s/cpu.max: period %q is not a number", dir, f[1])
	}
	return quota, period, nil
}
