package host

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Stats reads the node's own figures in the Summary API's terms
// (k8s.io/kubelet/pkg/apis/stats/v1alpha1), as cadvisor reads them for the
// upstream kubelet: CPU and memory of the root cgroup (v1: cpuacct and
// memory controllers; v2: the root's cpu.stat and memory.stat, with
// /proc/meminfo for usage), the network interfaces of /proc/net/dev, the
// filesystem under RootDir (statfs), and the pid limit and process count.
// Every read is a few small files: cheap enough for each request.
type Stats struct {
	// RootDir is the kubelet's root dir: the node filesystem is the one
	// holding it.
	RootDir string
	// ProcDir and CgroupDir default to /proc and /sys/fs/cgroup (tests
	// point elsewhere).
	ProcDir, CgroupDir string
	// Now defaults to time.Now.
	Now func() time.Time
}

func (s *Stats) proc() string {
	if s.ProcDir == "" {
		return "/proc"
	}
	return s.ProcDir
}

func (s *Stats) cgroup() string {
	if s.CgroupDir == "" {
		return "/sys/fs/cgroup"
	}
	return s.CgroupDir
}

func (s *Stats) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

// userHZ is the unit of /proc/stat's CPU times (USER_HZ, 100 on Linux).
const userHZ = 100

// NodeStats returns the node's start time (boot), cumulative CPU, memory,
// swap, network, node filesystem and rlimit figures. NodeName is the
// caller's. It returns what it could read, and an error naming what it
// could not (nil stats only when nothing could be read).
func (s *Stats) NodeStats(_ context.Context) (*statsapi.NodeStats, error) {
	t := metav1.NewTime(s.now())
	ns := &statsapi.NodeStats{}
	var errs []error
	note := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	procStat, err := readKeyed(filepath.Join(s.proc(), "stat"))
	note("boot time", err)
	if bt, ok := procStat["btime"]; ok && len(bt) > 0 {
		if sec, err := strconv.ParseInt(bt[0], 10, 64); err == nil {
			ns.StartTime = metav1.NewTime(time.Unix(sec, 0))
		}
	}
	cpu, err := s.cpuUsage(procStat)
	note("cpu", err)
	if err == nil {
		ns.CPU = &statsapi.CPUStats{Time: t, UsageCoreNanoSeconds: &cpu}
	}
	mem, swap, err := s.memory(t)
	note("memory", err)
	ns.Memory, ns.Swap = mem, swap
	nw, err := s.network(t)
	note("network", err)
	ns.Network = nw
	if s.RootDir != "" {
		fs, err := statfsUp(s.RootDir, t)
		note("node filesystem", err)
		ns.Fs = fs
	}
	rl, err := s.rlimit(t)
	note("rlimit", err)
	ns.Rlimit = rl
	if ns.CPU == nil && ns.Memory == nil && ns.Network == nil && ns.Fs == nil && ns.Rlimit == nil {
		return nil, fmt.Errorf("node stats: %w", errors.Join(errs...))
	}
	if len(errs) > 0 {
		return ns, fmt.Errorf("node stats: %w", errors.Join(errs...))
	}
	return ns, nil
}

// FsInfo returns the capacity, usage and inodes of the filesystem holding
// path (statfs), such as the runtime's image filesystem.
func (s *Stats) FsInfo(_ context.Context, path string) (*statsapi.FsStats, error) {
	return statfs(path, metav1.NewTime(s.now()))
}

// SystemContainers returns the "kubelet" system container: this process's
// CPU time and resident memory (the upstream kubelet reports its cgroup's;
// actorlet runs in no cgroup of its own).
func (s *Stats) SystemContainers(_ context.Context) ([]statsapi.ContainerStats, error) {
	t := metav1.NewTime(s.now())
	self := filepath.Join(s.proc(), "self")
	b, err := os.ReadFile(filepath.Join(self, "stat"))
	if err != nil {
		return nil, fmt.Errorf("kubelet system container: %w", err)
	}
	// Fields after the command (which may hold spaces) in parentheses.
	rest := string(b)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	// f[0] is field 3 (state): utime is field 14, stime 15, starttime 22.
	if len(f) < 20 {
		return nil, fmt.Errorf("kubelet system container: short %s/stat", self)
	}
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	startTicks, _ := strconv.ParseUint(f[19], 10, 64)
	cpu := (utime + stime) * uint64(time.Second/userHZ)
	c := statsapi.ContainerStats{
		Name: statsapi.SystemContainerKubelet,
		CPU:  &statsapi.CPUStats{Time: t, UsageCoreNanoSeconds: &cpu},
	}
	if procStat, err := readKeyed(filepath.Join(s.proc(), "stat")); err == nil && len(procStat["btime"]) > 0 {
		if bt, err := strconv.ParseInt(procStat["btime"][0], 10, 64); err == nil {
			c.StartTime = metav1.NewTime(time.Unix(bt, 0).Add(time.Duration(startTicks) * time.Second / userHZ))
		}
	}
	if st, err := readKeyed(filepath.Join(self, "status")); err == nil {
		if rss, ok := kib(st["VmRSS:"]); ok {
			c.Memory = &statsapi.MemoryStats{Time: t, UsageBytes: &rss, WorkingSetBytes: ptrTo(rss), RSSBytes: ptrTo(rss)}
		}
	}
	return []statsapi.ContainerStats{c}, nil
}

func ptrTo[T any](v T) *T { return &v }

// cgroupV2 reports a unified hierarchy at the cgroup mount.
func (s *Stats) cgroupV2() bool {
	_, err := os.Stat(filepath.Join(s.cgroup(), "cgroup.controllers"))
	return err == nil
}

// cpuUsage is the node's cumulative CPU time in ns: the root cgroup's
// (cpuacct.usage on v1, cpu.stat usage_usec on v2), else /proc/stat's busy
// times.
func (s *Stats) cpuUsage(procStat map[string][]string) (uint64, error) {
	if s.cgroupV2() {
		if st, err := readKeyed(filepath.Join(s.cgroup(), "cpu.stat")); err == nil {
			if us, ok := uintField(st["usage_usec"]); ok {
				return us * 1000, nil
			}
		}
	} else {
		for _, dir := range []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu"} {
			if v, err := readUint(filepath.Join(s.cgroup(), dir, "cpuacct.usage")); err == nil {
				return v, nil
			}
		}
	}
	f := procStat["cpu"]
	if len(f) < 8 {
		return 0, errors.New("no cgroup cpu usage and no cpu line in /proc/stat")
	}
	// user nice system idle iowait irq softirq steal: all but idle and iowait.
	var ticks uint64
	for i, v := range f[:8] {
		if i == 3 || i == 4 {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat cpu %q: %w", v, err)
		}
		ticks += n
	}
	return ticks * uint64(time.Second/userHZ), nil
}

// memory reads the node's memory as cadvisor does for the root cgroup:
// working set = usage - inactive_file, available = capacity - working set.
func (s *Stats) memory(t metav1.Time) (*statsapi.MemoryStats, *statsapi.SwapStats, error) {
	info, err := readKeyed(filepath.Join(s.proc(), "meminfo"))
	if err != nil {
		return nil, nil, err
	}
	total, ok := kib(info["MemTotal:"])
	if !ok {
		return nil, nil, errors.New("no MemTotal in meminfo")
	}
	var usage, inactiveFile, rss, pgfault, pgmajfault uint64
	var haveStat bool
	if s.cgroupV2() {
		free, _ := kib(info["MemFree:"])
		usage = total - min(free, total)
		if st, err := readKeyed(filepath.Join(s.cgroup(), "memory.stat")); err == nil {
			inactiveFile, _ = uintField(st["inactive_file"])
			rss, _ = uintField(st["anon"])
			pgfault, _ = uintField(st["pgfault"])
			pgmajfault, _ = uintField(st["pgmajfault"])
			haveStat = true
		}
	} else {
		dir := filepath.Join(s.cgroup(), "memory")
		usage, err = readUint(filepath.Join(dir, "memory.usage_in_bytes"))
		if err != nil {
			return nil, nil, err
		}
		if st, err := readKeyed(filepath.Join(dir, "memory.stat")); err == nil {
			inactiveFile, _ = uintField(st["total_inactive_file"])
			rss, _ = uintField(st["total_rss"])
			pgfault, _ = uintField(st["total_pgfault"])
			pgmajfault, _ = uintField(st["total_pgmajfault"])
			haveStat = true
		}
	}
	if !haveStat {
		inactiveFile, _ = kib(info["Inactive(file):"])
		rss, _ = kib(info["AnonPages:"])
	}
	ws := usage - min(inactiveFile, usage)
	mem := &statsapi.MemoryStats{Time: t,
		AvailableBytes: ptrTo(total - min(ws, total)), UsageBytes: &usage, WorkingSetBytes: &ws, RSSBytes: &rss}
	if haveStat {
		mem.PageFaults, mem.MajorPageFaults = &pgfault, &pgmajfault
	}
	var swap *statsapi.SwapStats
	if swTotal, ok := kib(info["SwapTotal:"]); ok {
		swFree, _ := kib(info["SwapFree:"])
		swap = &statsapi.SwapStats{Time: t, SwapUsageBytes: ptrTo(swTotal - min(swFree, swTotal)), SwapAvailableBytes: &swFree}
	}
	return mem, swap, nil
}

// ignoredInterface: loopback and the virtual interfaces cadvisor leaves out
// of the node's network.
func ignoredInterface(name string) bool {
	for _, p := range []string{"lo", "veth", "docker", "nerdctl"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// network reads /proc/net/dev; the default interface is eth0 as upstream,
// else the one of the default route.
func (s *Stats) network(t metav1.Time) (*statsapi.NetworkStats, error) {
	f, err := os.Open(filepath.Join(s.proc(), "net", "dev"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	ns := &statsapi.NetworkStats{Time: t}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue // the two header lines
		}
		name = strings.TrimSpace(name)
		fields := strings.Fields(rest)
		if ignoredInterface(name) || len(fields) < 11 {
			continue
		}
		num := func(i int) *uint64 {
			v, _ := strconv.ParseUint(fields[i], 10, 64)
			return &v
		}
		// receive: bytes packets errs ...; transmit (from field 8): bytes packets errs ...
		ns.Interfaces = append(ns.Interfaces, statsapi.InterfaceStats{Name: name,
			RxBytes: num(0), RxErrors: num(2), TxBytes: num(8), TxErrors: num(10)})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	def := "eth0"
	if !hasInterface(ns.Interfaces, def) {
		def = s.defaultRouteInterface()
	}
	for _, i := range ns.Interfaces {
		if i.Name == def {
			ns.InterfaceStats = i
		}
	}
	return ns, nil
}

func hasInterface(is []statsapi.InterfaceStats, name string) bool {
	for _, i := range is {
		if i.Name == name {
			return true
		}
	}
	return false
}

// defaultRouteInterface is the interface of the IPv4 default route, or "".
func (s *Stats) defaultRouteInterface() string {
	b, err := os.ReadFile(filepath.Join(s.proc(), "net", "route"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 2 && f[1] == "00000000" {
			return f[0]
		}
	}
	return ""
}

// rlimit: the task limit (min of pid_max and threads-max) and the number of
// tasks (/proc/loadavg's total, else sysinfo), as upstream.
func (s *Stats) rlimit(t metav1.Time) (*statsapi.RlimitStats, error) {
	rl := &statsapi.RlimitStats{Time: t}
	maxTasks := int64(-1)
	for _, name := range []string{"pid_max", "threads-max"} {
		v, err := readUint(filepath.Join(s.proc(), "sys", "kernel", name))
		if err == nil && (maxTasks < 0 || int64(v) < maxTasks) {
			maxTasks = int64(v)
		}
	}
	if maxTasks >= 0 {
		rl.MaxPID = &maxTasks
	}
	if b, err := os.ReadFile(filepath.Join(s.proc(), "loadavg")); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 4 {
			if _, total, ok := strings.Cut(f[3], "/"); ok {
				if n, err := strconv.ParseInt(total, 10, 64); err == nil {
					rl.NumOfRunningProcesses = &n
				}
			}
		}
	}
	if rl.NumOfRunningProcesses == nil && s.ProcDir == "" {
		var si syscall.Sysinfo_t
		if err := syscall.Sysinfo(&si); err == nil {
			rl.NumOfRunningProcesses = ptrTo(int64(si.Procs))
		}
	}
	if rl.MaxPID == nil && rl.NumOfRunningProcesses == nil {
		return nil, errors.New("neither kernel/pid_max nor a process count")
	}
	return rl, nil
}

// statfs reads the filesystem holding path.
func statfs(path string, t metav1.Time) (*statsapi.FsStats, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return nil, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := uint64(st.Bsize)
	return &statsapi.FsStats{Time: t,
		CapacityBytes:  ptrTo(st.Blocks * bs),
		AvailableBytes: ptrTo(st.Bavail * bs),
		UsedBytes:      ptrTo((st.Blocks - min(st.Bfree, st.Blocks)) * bs),
		Inodes:         ptrTo(st.Files),
		InodesFree:     ptrTo(st.Ffree),
		InodesUsed:     ptrTo(st.Files - min(st.Ffree, st.Files)),
	}, nil
}

// statfsUp is statfs of dir or, before it exists (a first start), of its
// nearest existing parent.
func statfsUp(dir string, t metav1.Time) (*statsapi.FsStats, error) {
	p := filepath.Clean(dir)
	for {
		fs, err := statfs(p, t)
		if err == nil || !errors.Is(err, syscall.ENOENT) || filepath.Dir(p) == p {
			return fs, err
		}
		p = filepath.Dir(p)
	}
}

// readKeyed reads a "key value..." file (/proc/stat, memory.stat,
// /proc/meminfo with its "Key:" keys) into a map of the fields after the
// key.
func readKeyed(path string) (map[string][]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			m[f[0]] = f[1:]
		}
	}
	return m, nil
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

func uintField(f []string) (uint64, bool) {
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseUint(f[0], 10, 64)
	return v, err == nil
}

// kib reads a meminfo value ("123 kB") in bytes.
func kib(f []string) (uint64, bool) {
	v, ok := uintField(f)
	return v * 1024, ok
}
