package sim

import (
	"context"
	"sort"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Plausible, small numbers: a running container uses 1% of a core and
// 4 MiB (plus what it alloc'd: usage.go); a sandbox's pause process 512 KiB.
const (
	ctrNanoCores   = 10_000_000
	ctrMemoryBytes = 4 << 20
	pauseMemory    = 512 << 10
)

func u64(v uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: v} }

// containerStats builds stats; the caller holds r.mu (shared is enough:
// the stats calls only read, and at 10,000 pods a list of every pod's
// stats under the exclusive lock held every pod start behind it). Memory is the
// container's working set (4 MiB plus what it alloc'd) while it runs; the
// writable layer holds its files and what it fill'd.
func (r *Runtime) containerStats(c *container, ts int64) *runtimeapi.ContainerStats {
	var cores uint64
	if c.running() {
		cores = ctrNanoCores
	}
	ws := c.workingSet()
	mem := &runtimeapi.MemoryUsage{Timestamp: ts, WorkingSetBytes: u64(ws), UsageBytes: u64(ws), RssBytes: u64(c.rss()),
		PageFaults: u64(0), MajorPageFaults: u64(0)}
	if limit := c.linuxRes.GetMemoryLimitInBytes(); limit > 0 {
		mem.AvailableBytes = u64(sub0(uint64(limit), ws))
	}
	fsBytes, inodes := c.writableLayer()
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{Id: c.id, Metadata: c.meta, Labels: c.labels, Annotations: c.annotations},
		Cpu:        &runtimeapi.CpuUsage{Timestamp: ts, UsageCoreNanoSeconds: u64(c.cpuNanos(ts)), UsageNanoCores: u64(cores)},
		Memory:     mem,
		WritableLayer: &runtimeapi.FilesystemUsage{Timestamp: ts,
			FsId:      &runtimeapi.FilesystemIdentifier{Mountpoint: ContainerFsMountpoint},
			UsedBytes: u64(fsBytes), InodesUsed: u64(inodes)},
	}
}

// ContainerStats returns one container's stats.
func (r *Runtime) ContainerStats(_ context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	c, err := r.rlockContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	return &runtimeapi.ContainerStatsResponse{Stats: r.containerStats(c, now())}, nil
}

// ListContainerStats returns stats of the containers matching the filter.
func (r *Runtime) ListContainerStats(_ context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	f := req.GetFilter()
	r.mu.RLock()
	defer r.mu.RUnlock()
	ts := now()
	cs := r.filterContainers(f.GetId(), f.GetPodSandboxId(), f.GetLabelSelector(), nil)
	out := make([]*runtimeapi.ContainerStats, 0, len(cs))
	for _, c := range cs {
		out = append(out, r.containerStats(c, ts))
	}
	return &runtimeapi.ListContainerStatsResponse{Stats: out}, nil
}

func (r *Runtime) sandboxStats(sb *sandbox, ts int64) *runtimeapi.PodSandboxStats {
	var cpuNanos, cores, mem, rss uint64
	var procs uint64
	ctrs := make([]*runtimeapi.ContainerStats, 0, len(sb.containers))
	for _, c := range sb.sortedContainers() {
		st := r.containerStats(c, ts)
		ctrs = append(ctrs, st)
		cpuNanos += st.Cpu.UsageCoreNanoSeconds.Value
		cores += st.Cpu.UsageNanoCores.Value
		mem += st.Memory.WorkingSetBytes.Value
		rss += st.Memory.RssBytes.Value
		procs += c.pidCount()
	}
	if sb.state == runtimeapi.PodSandboxState_SANDBOX_READY {
		mem += pauseMemory
		rss += pauseMemory
		procs++
	}
	return &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{Id: sb.id, Metadata: sb.meta, Labels: sb.labels, Annotations: sb.annotations},
		Linux: &runtimeapi.LinuxPodSandboxStats{
			Cpu:    &runtimeapi.CpuUsage{Timestamp: ts, UsageCoreNanoSeconds: u64(cpuNanos), UsageNanoCores: u64(cores)},
			Memory: &runtimeapi.MemoryUsage{Timestamp: ts, WorkingSetBytes: u64(mem), UsageBytes: u64(mem), RssBytes: u64(rss)},
			Network: &runtimeapi.NetworkUsage{Timestamp: ts, DefaultInterface: &runtimeapi.NetworkInterfaceUsage{
				Name: "eth0", RxBytes: u64(procs * 1024), TxBytes: u64(procs * 512), RxErrors: u64(0), TxErrors: u64(0)}},
			Process:    &runtimeapi.ProcessUsage{Timestamp: ts, ProcessCount: u64(procs)},
			Containers: ctrs,
		},
	}
}

// PodSandboxStats returns one sandbox's stats.
func (r *Runtime) PodSandboxStats(_ context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	sb, err := r.rlockSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	return &runtimeapi.PodSandboxStatsResponse{Stats: r.sandboxStats(sb, now())}, nil
}

// ListPodSandboxStats returns stats of the sandboxes matching the filter.
func (r *Runtime) ListPodSandboxStats(_ context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	f := req.GetFilter()
	r.mu.RLock()
	defer r.mu.RUnlock()
	ts := now()
	var sbs []*sandbox
	all := r.sandboxes
	if ids, ok := r.sbLabels.candidates(f.GetLabelSelector()); ok && f.GetId() == "" {
		all = make(map[string]*sandbox, len(ids))
		for _, id := range ids {
			all[id] = r.sandboxes[id]
		}
	}
	for id, sb := range all {
		if f.GetId() != "" && !strings.HasPrefix(id, f.GetId()) {
			continue
		}
		if !matchLabels(sb.labels, f.GetLabelSelector()) {
			continue
		}
		sbs = append(sbs, sb)
	}
	sort.Slice(sbs, func(i, j int) bool { return sbs[i].seq < sbs[j].seq })
	out := make([]*runtimeapi.PodSandboxStats, 0, len(sbs))
	for _, sb := range sbs {
		out = append(out, r.sandboxStats(sb, ts))
	}
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: out}, nil
}
