// Package stats is actorlet's stats provider: it builds upstream's Summary
// API (k8s.io/kubelet/pkg/apis/stats/v1alpha1), served at /stats/summary
// and read by the EvictionActor, the way upstream's CRI stats provider does
// (pkg/kubelet/stats/cri_stats_provider.go): pods and containers from the
// CRI runtime (ListPodSandbox, ListContainers, ListContainerStats,
// ListPodSandboxStats where the runtime has it, ImageFsInfo), the node from
// a node source (the host's cgroups, /proc and statfs, or the simulated
// runtime's node), and volume and log usage measured in the background at a
// period (as upstream's fsResourceAnalyzer), never per request. It also
// serves upstream's /metrics/resource from a Summary (resource.go).
//
// The interfaces it needs are declared here and satisfied by adapters/cri's
// Client, adapters/host's Stats and runtimes/sim's Runtime.
package stats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/errdefs"
)

// Runtime is the CRI part of the stats: adapters/cri's Client satisfies it.
type Runtime interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
	// ListPodSandboxStats may answer errdefs.ErrUnimplemented (containerd
	// 1.6): pods' figures are then their containers' sums.
	ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error)
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// NodeSource is the node's own figures: adapters/host's Stats, or the
// simulated runtime (sim.Runtime) when actorlet runs on it.
type NodeSource interface {
	// NodeStats returns the node's start time, CPU (cumulative; the rate
	// is computed here when absent), memory, network, node filesystem and
	// rlimit. A partial answer comes with an error and is used.
	NodeStats(ctx context.Context) (*statsapi.NodeStats, error)
	// FsInfo returns the capacity, availability and inodes of the
	// filesystem at a mountpoint the runtime names (image filesystem,
	// writable layers).
	FsInfo(ctx context.Context, mountpoint string) (*statsapi.FsStats, error)
}

// SystemSource gives system containers (the "kubelet" one): adapters/host's
// Stats satisfies it.
type SystemSource interface {
	SystemContainers(ctx context.Context) ([]statsapi.ContainerStats, error)
}

// Defaults.
const (
	// DefaultVolumePeriod is how often volume and log usage is measured
	// (upstream's --volume-stats-agg-period).
	DefaultVolumePeriod = time.Minute
	// DefaultCPUWindow is the shortest window a CPU rate (usageNanoCores)
	// is computed over.
	DefaultCPUWindow = time.Second
	// DefaultPodLogsDir is upstream's podLogsDir.
	DefaultPodLogsDir = "/var/log/pods"
)

// Config wires a Provider.
type Config struct {
	// NodeName is the Summary's node name.
	NodeName string
	// Runtime is the CRI runtime. Required.
	Runtime Runtime
	// Node is the node's own figures. Required.
	Node NodeSource
	// System adds system containers (kubelet); optional.
	System SystemSource
	// RootDir is the kubelet's root dir: pod volumes are measured under
	// <RootDir>/pods/<uid>/volumes/<plugin>/<volume>. Empty: no volumes.
	RootDir string
	// PodLogsDir holds <namespace>_<name>_<uid>/<container>/ logs.
	// Default DefaultPodLogsDir.
	PodLogsDir string
	// VolumePeriod is the period of the background measurement of volumes
	// and logs. Default DefaultVolumePeriod.
	VolumePeriod time.Duration
	// CPUWindow is the shortest window of a computed CPU rate. Default
	// DefaultCPUWindow.
	CPUWindow time.Duration
	// Clock drives the background measurement. Default the real clock.
	Clock clock.WithTicker
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Provider builds Summaries. It is safe for concurrent use.
type Provider struct {
	cfg Config
	log *slog.Logger
	cpu *cpuCache
	fs  *fsAnalyzer

	mu             sync.Mutex
	noSandboxStats bool              // the runtime answered Unimplemented
	lastWarn       map[string]string // what -> last error logged
}

// New returns a Provider; Run starts its background measurement of volumes
// and logs. A Provider without Runtime or Node answers Summary with an
// error.
func New(cfg Config) *Provider {
	if cfg.PodLogsDir == "" {
		cfg.PodLogsDir = DefaultPodLogsDir
	}
	if cfg.VolumePeriod <= 0 {
		cfg.VolumePeriod = DefaultVolumePeriod
	}
	if cfg.CPUWindow <= 0 {
		cfg.CPUWindow = DefaultCPUWindow
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger.With("component", "stats")
	return &Provider{
		cfg:      cfg,
		log:      log,
		cpu:      newCPUCache(cfg.CPUWindow),
		fs:       newFsAnalyzer(cfg.RootDir, cfg.PodLogsDir, cfg.Clock, log),
		lastWarn: map[string]string{},
	}
}

// Run measures volumes and logs now and then every VolumePeriod until ctx
// is done.
func (p *Provider) Run(ctx context.Context) {
	p.fs.run(ctx, p.cfg.VolumePeriod)
}

// warn logs err under what when it differs from the last one logged there
// (a failing source is logged once, not at every request).
func (p *Provider) warn(what string, err error) {
	p.mu.Lock()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	changed := p.lastWarn[what] != msg
	p.lastWarn[what] = msg
	p.mu.Unlock()
	switch {
	case changed && err != nil:
		p.log.Warn("stats source failing; the summary goes on without it", "source", what, "err", err)
	case changed:
		p.log.Info("stats source back", "source", what)
	}
}

// Summary returns the node's and its pods' stats. It fails when the runtime
// cannot list sandboxes, containers or container stats; a failing node
// source or image filesystem leaves its part out (and is logged).
func (p *Provider) Summary(ctx context.Context) (*statsapi.Summary, error) {
	rt, node := p.cfg.Runtime, p.cfg.Node
	if rt == nil || node == nil {
		return nil, errdefs.Wrap(errdefs.ErrFailedPrecondition, errors.New("stats: no runtime or node source configured"))
	}
	sandboxes, err := rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	containers, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	// As upstream's PodAndContainerStatsFromCRI: where the runtime serves
	// sandbox stats with their containers' (the sim, containerd 2), those are
	// the containers' figures, and ListContainerStats is not asked again for
	// the same numbers (at 1,000 pods it was half of a Summary's cost).
	sbStats := p.sandboxStats(ctx, rt)
	cstats := containersOf(sbStats, containers)
	if cstats == nil {
		if cstats, err = rt.ListContainerStats(ctx, nil); err != nil {
			return nil, fmt.Errorf("stats: %w", err)
		}
	}

	ns, err := node.NodeStats(ctx)
	p.warn("node", err)
	if ns == nil {
		ns = &statsapi.NodeStats{}
	}
	ns.NodeName = p.cfg.NodeName
	fsInfo := p.fsInfoCache(ctx, node)
	imageFs, containerFs := p.runtimeFs(ctx, rt, fsInfo)
	if imageFs != nil {
		ns.Runtime = &statsapi.RuntimeStats{ImageFs: imageFs, ContainerFs: containerFs}
	}
	if ns.CPU != nil && ns.CPU.UsageNanoCores == nil && ns.CPU.UsageCoreNanoSeconds != nil {
		ns.CPU.UsageNanoCores = p.cpu.rate("node", ns.CPU.Time.Time, *ns.CPU.UsageCoreNanoSeconds)
	}

	pods := p.podStats(sandboxes, containers, cstats, sbStats, ns.Fs, fsInfo)
	ns.SystemContainers = p.systemContainers(ctx, ns, pods)
	p.cpu.sweep(p.cfg.Clock.Now())
	return &statsapi.Summary{Node: *ns, Pods: pods}, nil
}

// containersOf are the container stats inside the sandbox stats when they
// cover every running container; nil otherwise (no sandbox stats, a
// runtime that leaves the containers out, a sandbox missing).
func containersOf(sb map[string]*runtimeapi.PodSandboxStats, running []*runtimeapi.Container) []*runtimeapi.ContainerStats {
	if len(sb) == 0 {
		return nil
	}
	var out []*runtimeapi.ContainerStats
	have := map[string]bool{}
	for _, s := range sb {
		for _, c := range s.GetLinux().GetContainers() {
			out = append(out, c)
			have[c.GetAttributes().GetId()] = true
		}
	}
	for _, c := range running {
		if !have[c.GetId()] {
			return nil
		}
	}
	return out
}

// sandboxStats lists sandbox stats by sandbox ID; nil when the runtime has
// none.
func (p *Provider) sandboxStats(ctx context.Context, rt Runtime) map[string]*runtimeapi.PodSandboxStats {
	p.mu.Lock()
	skip := p.noSandboxStats
	p.mu.Unlock()
	if skip {
		return nil
	}
	list, err := rt.ListPodSandboxStats(ctx, nil)
	if errors.Is(err, errdefs.ErrUnimplemented) {
		p.mu.Lock()
		p.noSandboxStats = true
		p.mu.Unlock()
		p.log.Info("the runtime has no pod sandbox stats; pods' figures are their containers' sums")
		return nil
	}
	p.warn("pod sandbox stats", err)
	if err != nil {
		return nil
	}
	out := make(map[string]*runtimeapi.PodSandboxStats, len(list))
	for _, s := range list {
		if id := s.GetAttributes().GetId(); id != "" {
			out[id] = s
		}
	}
	return out
}

// fsInfoCache returns a lookup of filesystem figures by mountpoint, each
// asked of the node source once per summary.
func (p *Provider) fsInfoCache(ctx context.Context, node NodeSource) func(string) *statsapi.FsStats {
	cache := map[string]*statsapi.FsStats{}
	return func(mount string) *statsapi.FsStats {
		if mount == "" {
			return nil
		}
		if fs, ok := cache[mount]; ok {
			return fs
		}
		fs, err := node.FsInfo(ctx, mount)
		p.warn("filesystem "+mount, err)
		if err != nil {
			fs = nil
		}
		cache[mount] = fs
		return fs
	}
}

// runtimeFs builds the image filesystem's and the container filesystem's
// stats: usage from the runtime, capacity from the node source (as
// upstream: CRI has no capacities). Without a container filesystem of its
// own, the runtime keeps writable layers on the image filesystem.
func (p *Provider) runtimeFs(ctx context.Context, rt Runtime, fsInfo func(string) *statsapi.FsStats) (imageFs, containerFs *statsapi.FsStats) {
	resp, err := rt.ImageFsInfo(ctx)
	p.warn("image filesystem", err)
	if err != nil || len(resp.GetImageFilesystems()) == 0 {
		return nil, nil
	}
	u := resp.GetImageFilesystems()[0]
	imageFs = fsFromCRI(u, fsInfo(u.GetFsId().GetMountpoint()))
	if cfs := resp.GetContainerFilesystems(); len(cfs) > 0 {
		containerFs = fsFromCRI(cfs[0], fsInfo(cfs[0].GetFsId().GetMountpoint()))
	} else {
		c := *imageFs
		containerFs = &c
	}
	return imageFs, containerFs
}

// fsFromCRI combines a runtime's usage of a filesystem with its capacity.
func fsFromCRI(u *runtimeapi.FilesystemUsage, info *statsapi.FsStats) *statsapi.FsStats {
	if u == nil {
		return nil
	}
	fs := &statsapi.FsStats{Time: nsTime(u.GetTimestamp()), UsedBytes: val(u.GetUsedBytes()), InodesUsed: val(u.GetInodesUsed())}
	if info != nil {
		fs.CapacityBytes, fs.AvailableBytes = info.CapacityBytes, info.AvailableBytes
		fs.Inodes, fs.InodesFree = info.Inodes, info.InodesFree
	}
	return fs
}

// keptSandboxes drops the terminated sandboxes of a pod that has a ready
// one, and keeps only the newest of a pod that has none, as upstream's
// removeTerminatedPods.
func keptSandboxes(all []*runtimeapi.PodSandbox) []*runtimeapi.PodSandbox {
	byPod := map[string][]*runtimeapi.PodSandbox{}
	var order []string
	for _, sb := range all {
		md := sb.GetMetadata()
		if md == nil {
			continue
		}
		key := md.GetNamespace() + "/" + md.GetName() + "/" + md.GetUid()
		if _, ok := byPod[key]; !ok {
			order = append(order, key)
		}
		byPod[key] = append(byPod[key], sb)
	}
	var out []*runtimeapi.PodSandbox
	for _, key := range order {
		sbs := byPod[key]
		var ready []*runtimeapi.PodSandbox
		newest := sbs[0]
		for _, sb := range sbs {
			if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
				ready = append(ready, sb)
			}
			if sb.GetCreatedAt() > newest.GetCreatedAt() {
				newest = sb
			}
		}
		if len(ready) > 0 {
			out = append(out, ready...)
		} else {
			out = append(out, newest)
		}
	}
	return out
}

// podStats builds every kept pod's stats: pods that are ready or run a
// container.
func (p *Provider) podStats(sandboxes []*runtimeapi.PodSandbox, running []*runtimeapi.Container,
	cstats []*runtimeapi.ContainerStats, sbStats map[string]*runtimeapi.PodSandboxStats,
	nodeFs *statsapi.FsStats, fsInfo func(string) *statsapi.FsStats) []statsapi.PodStats {
	statsByID := make(map[string]*runtimeapi.ContainerStats, len(cstats))
	for _, s := range cstats {
		statsByID[s.GetAttributes().GetId()] = s
	}
	bySandbox := make(map[string][]*runtimeapi.Container, len(sandboxes))
	for _, c := range running {
		bySandbox[c.GetPodSandboxId()] = append(bySandbox[c.GetPodSandboxId()], c)
	}
	volumes := p.fs.snapshot()
	kept := keptSandboxes(sandboxes)
	sort.Slice(kept, func(i, j int) bool {
		a, b := kept[i].GetMetadata(), kept[j].GetMetadata()
		if a.GetNamespace() != b.GetNamespace() {
			return a.GetNamespace() < b.GetNamespace()
		}
		if a.GetName() != b.GetName() {
			return a.GetName() < b.GetName()
		}
		return kept[i].GetCreatedAt() < kept[j].GetCreatedAt()
	})
	pods := make([]statsapi.PodStats, 0, len(kept))
	for _, sb := range kept {
		ctrs := bySandbox[sb.GetId()]
		if sb.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY && len(ctrs) == 0 {
			continue
		}
		pods = append(pods, p.onePod(sb, ctrs, statsByID, sbStats[sb.GetId()], volumes[sb.GetMetadata().GetUid()], nodeFs, fsInfo))
	}
	return pods
}

func (p *Provider) onePod(sb *runtimeapi.PodSandbox, ctrs []*runtimeapi.Container, statsByID map[string]*runtimeapi.ContainerStats,
	sbs *runtimeapi.PodSandboxStats, vol *podFs, nodeFs *statsapi.FsStats, fsInfo func(string) *statsapi.FsStats) statsapi.PodStats {
	md := sb.GetMetadata()
	ps := statsapi.PodStats{
		PodRef:    statsapi.PodReference{Name: md.GetName(), Namespace: md.GetNamespace(), UID: md.GetUid()},
		StartTime: nsTime(sb.GetCreatedAt()),
	}
	sort.Slice(ctrs, func(i, j int) bool { return ctrs[i].GetMetadata().GetName() < ctrs[j].GetMetadata().GetName() })
	ps.Containers = make([]statsapi.ContainerStats, 0, len(ctrs))
	var eph fsSum
	for _, c := range ctrs {
		st, ok := statsByID[c.GetId()]
		if !ok {
			continue // gone between the two lists
		}
		cs := statsapi.ContainerStats{
			Name:      c.GetMetadata().GetName(),
			StartTime: nsTime(c.GetCreatedAt()),
			CPU:       p.cpuStats("c/"+c.GetId(), st.GetCpu()),
			Memory:    memoryStats(st.GetMemory()),
			Swap:      swapStats(st.GetSwap()),
		}
		if wl := st.GetWritableLayer(); wl != nil {
			cs.Rootfs = fsFromCRI(wl, fsInfo(wl.GetFsId().GetMountpoint()))
			eph.add(cs.Rootfs.UsedBytes, cs.Rootfs.InodesUsed)
		}
		cs.Logs = vol.logs(cs.Name, nodeFs)
		ps.Containers = append(ps.Containers, cs)
	}
	if vol != nil {
		eph.addValues(vol.logsTotal.bytes, vol.logsTotal.inodes)
		ps.VolumeStats = vol.volumeStats(nodeFs)
		eph.addValues(vol.ephemeral.bytes, vol.ephemeral.inodes)
	}
	ps.EphemeralStorage = eph.fsStats(nodeFs)
	if l := sbs.GetLinux(); l != nil {
		ps.CPU = p.cpuStats("p/"+sb.GetId(), l.GetCpu())
		ps.Memory = memoryStats(l.GetMemory())
		ps.Network = networkStats(l.GetNetwork())
		if n := l.GetProcess().GetProcessCount(); n != nil {
			ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: val(n)}
		}
	}
	if ps.CPU == nil {
		ps.CPU = sumCPU(ps.Containers)
	}
	if ps.Memory == nil {
		ps.Memory = sumMemory(ps.Containers)
	}
	return ps
}

// systemContainers: the source's (kubelet) plus "pods", the sum of the
// pods' CPU and memory.
func (p *Provider) systemContainers(ctx context.Context, ns *statsapi.NodeStats, pods []statsapi.PodStats) []statsapi.ContainerStats {
	var out []statsapi.ContainerStats
	if p.cfg.System != nil {
		sys, err := p.cfg.System.SystemContainers(ctx)
		p.warn("system containers", err)
		for _, c := range sys {
			if c.CPU != nil && c.CPU.UsageNanoCores == nil && c.CPU.UsageCoreNanoSeconds != nil {
				c.CPU.UsageNanoCores = p.cpu.rate("s/"+c.Name, c.CPU.Time.Time, *c.CPU.UsageCoreNanoSeconds)
			}
			out = append(out, c)
		}
	}
	podsC := statsapi.ContainerStats{Name: statsapi.SystemContainerPods, StartTime: ns.StartTime}
	asContainers := make([]statsapi.ContainerStats, len(pods))
	for i := range pods {
		asContainers[i] = statsapi.ContainerStats{CPU: pods[i].CPU, Memory: pods[i].Memory}
	}
	podsC.CPU, podsC.Memory = sumCPU(asContainers), sumMemory(asContainers)
	if podsC.Memory != nil && ns.Memory != nil && ns.Memory.AvailableBytes != nil && ns.Memory.WorkingSetBytes != nil && podsC.Memory.WorkingSetBytes != nil {
		capacity := *ns.Memory.AvailableBytes + *ns.Memory.WorkingSetBytes
		podsC.Memory.AvailableBytes = ptr(capacity - min(capacity, *podsC.Memory.WorkingSetBytes))
	}
	return append(out, podsC)
}

// cpuStats converts a runtime's CPU usage; the rate is the runtime's, else
// computed from the previous sample under key.
func (p *Provider) cpuStats(key string, u *runtimeapi.CpuUsage) *statsapi.CPUStats {
	if u == nil {
		return nil
	}
	cs := &statsapi.CPUStats{Time: nsTime(u.GetTimestamp()), UsageCoreNanoSeconds: val(u.GetUsageCoreNanoSeconds()), UsageNanoCores: val(u.GetUsageNanoCores())}
	if cs.UsageNanoCores == nil && cs.UsageCoreNanoSeconds != nil {
		cs.UsageNanoCores = p.cpu.rate(key, cs.Time.Time, *cs.UsageCoreNanoSeconds)
	}
	return cs
}

// ---- conversions

func ptr(v uint64) *uint64 { return &v }

func val(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	return ptr(v.GetValue())
}

func nsTime(ns int64) metav1.Time {
	if ns <= 0 {
		return metav1.Time{}
	}
	return metav1.NewTime(time.Unix(0, ns))
}

func memoryStats(m *runtimeapi.MemoryUsage) *statsapi.MemoryStats {
	if m == nil {
		return nil
	}
	return &statsapi.MemoryStats{
		Time:            nsTime(m.GetTimestamp()),
		AvailableBytes:  val(m.GetAvailableBytes()),
		UsageBytes:      val(m.GetUsageBytes()),
		WorkingSetBytes: val(m.GetWorkingSetBytes()),
		RSSBytes:        val(m.GetRssBytes()),
		PageFaults:      val(m.GetPageFaults()),
		MajorPageFaults: val(m.GetMajorPageFaults()),
	}
}

func swapStats(s *runtimeapi.SwapUsage) *statsapi.SwapStats {
	if s == nil {
		return nil
	}
	return &statsapi.SwapStats{Time: nsTime(s.GetTimestamp()),
		SwapAvailableBytes: val(s.GetSwapAvailableBytes()), SwapUsageBytes: val(s.GetSwapUsageBytes())}
}

func ifaceStats(i *runtimeapi.NetworkInterfaceUsage) statsapi.InterfaceStats {
	return statsapi.InterfaceStats{Name: i.GetName(), RxBytes: val(i.GetRxBytes()), RxErrors: val(i.GetRxErrors()),
		TxBytes: val(i.GetTxBytes()), TxErrors: val(i.GetTxErrors())}
}

func networkStats(n *runtimeapi.NetworkUsage) *statsapi.NetworkStats {
	if n == nil {
		return nil
	}
	ns := &statsapi.NetworkStats{Time: nsTime(n.GetTimestamp())}
	if d := n.GetDefaultInterface(); d != nil {
		ns.InterfaceStats = ifaceStats(d)
		ns.Interfaces = append(ns.Interfaces, ns.InterfaceStats)
	}
	for _, i := range n.GetInterfaces() {
		if i.GetName() != ns.Name {
			ns.Interfaces = append(ns.Interfaces, ifaceStats(i))
		}
	}
	return ns
}

// addTo adds v to *sum, allocating it.
func addTo(sum **uint64, v *uint64) {
	if v == nil {
		return
	}
	if *sum == nil {
		*sum = ptr(0)
	}
	**sum += *v
}

func later(a *metav1.Time, b metav1.Time) {
	if b.After(a.Time) {
		*a = b
	}
}

// sumCPU adds the containers' CPU (nil when none has any).
func sumCPU(cs []statsapi.ContainerStats) *statsapi.CPUStats {
	var out *statsapi.CPUStats
	for _, c := range cs {
		if c.CPU == nil {
			continue
		}
		if out == nil {
			out = &statsapi.CPUStats{}
		}
		later(&out.Time, c.CPU.Time)
		addTo(&out.UsageCoreNanoSeconds, c.CPU.UsageCoreNanoSeconds)
		addTo(&out.UsageNanoCores, c.CPU.UsageNanoCores)
	}
	return out
}

// sumMemory adds the containers' memory (nil when none has any).
func sumMemory(cs []statsapi.ContainerStats) *statsapi.MemoryStats {
	var out *statsapi.MemoryStats
	for _, c := range cs {
		if c.Memory == nil {
			continue
		}
		if out == nil {
			out = &statsapi.MemoryStats{}
		}
		later(&out.Time, c.Memory.Time)
		addTo(&out.UsageBytes, c.Memory.UsageBytes)
		addTo(&out.WorkingSetBytes, c.Memory.WorkingSetBytes)
		addTo(&out.RSSBytes, c.Memory.RSSBytes)
		addTo(&out.PageFaults, c.Memory.PageFaults)
		addTo(&out.MajorPageFaults, c.Memory.MajorPageFaults)
	}
	return out
}

// fsSum adds usages for a pod's ephemeral storage.
type fsSum struct{ bytes, inodes uint64 }

func (s *fsSum) add(bytes, inodes *uint64) {
	if bytes != nil {
		s.bytes += *bytes
	}
	if inodes != nil {
		s.inodes += *inodes
	}
}

func (s *fsSum) addValues(bytes, inodes uint64) {
	s.bytes += bytes
	s.inodes += inodes
}

// fsStats is the sum on the node filesystem (capacity and availability
// are the node filesystem's, as upstream).
func (s fsSum) fsStats(nodeFs *statsapi.FsStats) *statsapi.FsStats {
	fs := withNodeFs(nodeFs)
	fs.UsedBytes, fs.InodesUsed = ptr(s.bytes), ptr(s.inodes)
	return fs
}

// withNodeFs is an FsStats with the node filesystem's capacity figures.
func withNodeFs(nodeFs *statsapi.FsStats) *statsapi.FsStats {
	fs := &statsapi.FsStats{}
	if nodeFs != nil {
		fs.Time = nodeFs.Time
		fs.CapacityBytes, fs.AvailableBytes = nodeFs.CapacityBytes, nodeFs.AvailableBytes
		fs.Inodes, fs.InodesFree = nodeFs.Inodes, nodeFs.InodesFree
	}
	return fs
}
