package sim

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The simulated node: its sizes (Config), what containers consume on
// command (alloc, fill, spawn: see README.md), and the node's own figures
// (NodeStats, FsInfo) for a stats provider running on the sim.

// Defaults of the simulated node's sizes.
const (
	DefaultNodeMemory      = 16 << 30
	DefaultNodeDisk        = 100 << 30
	DefaultNodePIDs        = 32768
	DefaultImageFsCapacity = 100 << 30
)

// Mountpoints of the simulated filesystems, as ImageFsInfo and the
// containers' writable layers name them; FsInfo answers for both.
const (
	// ImageFsMountpoint is the image filesystem (imagefs-capacity).
	ImageFsMountpoint = "/var/lib/actorlet-sim/images"
	// ContainerFsMountpoint holds the containers' writable layers: it is the
	// node filesystem (node-disk).
	ContainerFsMountpoint = "/var/lib/actorlet-sim/containers"
)

// What the node uses besides its containers (system daemons, the OS).
const (
	baseMemory    = 256 << 20
	baseDisk      = 1 << 30
	basePIDs      = 100
	baseNanoCores = 50_000_000 // 5% of a core
	baseInodes    = 10_000
	bytesPerInode = 16 << 10 // ext4's default ratio
	layerBlock    = 4096     // a writable layer's own size and each file's overhead
)

// nodeConfig is the parsed node part of Config.
type nodeConfig struct {
	memory, disk, pids, imageFs uint64
	sizes                       []sizeRule
}

// sizeRule sets the size of an image: ref exactly, or every tag of ref's
// repository when anyTag.
type sizeRule struct {
	ref    imageRef
	anyTag bool
	size   uint64
}

func orDefault(v, def int64) uint64 {
	if v <= 0 {
		return uint64(def)
	}
	return uint64(v)
}

// newNodeConfig applies defaults; invalid image sizes are ignored (Validate
// reports them).
func newNodeConfig(cfg Config) nodeConfig {
	n := nodeConfig{
		memory:  orDefault(cfg.NodeMemory, DefaultNodeMemory),
		disk:    orDefault(cfg.NodeDisk, DefaultNodeDisk),
		pids:    orDefault(cfg.NodePIDs, DefaultNodePIDs),
		imageFs: orDefault(cfg.ImageFsCapacity, DefaultImageFsCapacity),
	}
	keys := make([]string, 0, len(cfg.ImageSizes))
	for k := range cfg.ImageSizes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if rule, err := parseSizeRule(k, cfg.ImageSizes[k]); err == nil {
			n.sizes = append(n.sizes, rule)
		}
	}
	return n
}

func parseSizeRule(ref, size string) (sizeRule, error) {
	r, err := parseImageRef(strings.TrimSpace(ref))
	if err != nil {
		return sizeRule{}, fmt.Errorf("sim: image size for %q: %w", ref, err)
	}
	n, err := parseSize(strings.TrimSpace(size))
	if err != nil {
		return sizeRule{}, fmt.Errorf("sim: image size for %q: %w", ref, err)
	}
	// A reference that names no tag (busybox, registry:5000/app) sets all
	// tags; parseImageRef filled in "latest".
	last := ref[strings.LastIndexByte(ref, '/')+1:]
	anyTag := !strings.ContainsAny(last, ":@")
	return sizeRule{ref: r, anyTag: anyTag, size: n}, nil
}

// parseSize reads a size as a Kubernetes quantity (200Mi, 1G, 4096).
func parseSize(s string) (uint64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q (want a quantity such as 200Mi or 1G)", s)
	}
	v := q.Value()
	if v < 0 {
		return 0, fmt.Errorf("invalid size %q: negative", s)
	}
	return uint64(v), nil
}

// validateNode reports an invalid node option.
func (c Config) validateNode() error {
	if c.NodeMemory < 0 || c.NodeDisk < 0 || c.NodePIDs < 0 || c.ImageFsCapacity < 0 {
		return errors.New("sim: node sizes must not be negative")
	}
	for k, v := range c.ImageSizes {
		if _, err := parseSizeRule(k, v); err != nil {
			return err
		}
	}
	return nil
}

// bytesValue is a pflag value of a size in bytes, written as a quantity.
type bytesValue struct{ p *int64 }

func (b bytesValue) String() string {
	if b.p == nil {
		return "0"
	}
	return resource.NewQuantity(*b.p, resource.BinarySI).String()
}

func (b bytesValue) Set(s string) error {
	v, err := parseSize(s)
	if err != nil {
		return err
	}
	*b.p = int64(v)
	return nil
}

func (b bytesValue) Type() string { return "quantity" }

func (c *Config) addNodeFlags(fs *pflag.FlagSet) {
	for _, f := range []struct {
		p           *int64
		def         int64
		name, usage string
	}{
		{&c.NodeMemory, DefaultNodeMemory, "node-memory", "sim runtime: the node's memory; containers use it with alloc (sim's stats and NodeStats)"},
		{&c.NodeDisk, DefaultNodeDisk, "node-disk", "sim runtime: the node filesystem's capacity; containers' writable layers (fill) use it"},
		{&c.ImageFsCapacity, DefaultImageFsCapacity, "imagefs-capacity", "sim runtime: the image filesystem's capacity; images use their sizes of it"},
	} {
		if *f.p == 0 {
			*f.p = f.def
		}
		fs.Var(bytesValue{f.p}, f.name, f.usage)
	}
	if c.NodePIDs == 0 {
		c.NodePIDs = DefaultNodePIDs
	}
	fs.Int64Var(&c.NodePIDs, "node-pids", c.NodePIDs, "sim runtime: the node's pid_max; containers use pids with spawn")
	fs.StringToStringVar(&c.ImageSizes, "image-size", c.ImageSizes, "sim runtime: image sizes, REFERENCE=SIZE (busybox=5Mi: every busybox tag; busybox:1.36=5Mi: that one); others get 1 to 51 MiB")
}

// imageSize is the size of the image ref: a rule's, else a stable size of 1
// to 51 MiB derived from the reference.
func (n nodeConfig) imageSize(ref imageRef) uint64 {
	norm := ref.String()
	for _, anyTag := range []bool{false, true} {
		for _, rule := range n.sizes {
			if rule.anyTag != anyTag || rule.ref.name() != ref.name() {
				continue
			}
			if anyTag || rule.ref.String() == norm {
				return rule.size
			}
		}
	}
	sum := sha256.Sum256([]byte(norm))
	return 1<<20 + binary.BigEndian.Uint64(sum[:8])%(50<<20)
}

// ---- a container's usage (the caller holds r.mu)

func (c *container) running() bool { return c.state == runtimeapi.ContainerState_CONTAINER_RUNNING }

// workingSet is the memory a running container uses: a small base plus
// what it allocated.
func (c *container) workingSet() uint64 {
	if !c.running() {
		return 0
	}
	return ctrMemoryBytes + c.memAlloc
}

func (c *container) rss() uint64 {
	if !c.running() {
		return 0
	}
	return ctrMemoryBytes/2 + c.memAlloc
}

// pidCount is the number of processes of a running container: its main
// program plus what it spawned.
func (c *container) pidCount() uint64 {
	if !c.running() {
		return 0
	}
	return 1 + c.spawned
}

// writableLayer is the disk the container's writable layer uses: a block,
// a block per file plus its content, plus what fill wrote.
func (c *container) writableLayer() (bytes, inodes uint64) {
	bytes = layerBlock
	for name, b := range c.fs {
		bytes += layerBlock + uint64(len(b)) + c.filled[name]
	}
	return bytes, uint64(1 + len(c.fs))
}

// cpuNanos is the container's cumulative CPU time at ts: 1% of a core
// while it runs.
func (c *container) cpuNanos(ts int64) uint64 {
	if c.startedAt <= 0 {
		return 0
	}
	end := ts
	if c.finishedAt > 0 {
		end = c.finishedAt
	}
	if end <= c.startedAt {
		return 0
	}
	return uint64(end-c.startedAt) / 100
}

// nodeUsage sums what the node uses; the caller holds r.mu (shared is
// enough).
type nodeUsage struct {
	cpuNanos, nanoCores  uint64
	memory, rss          uint64
	disk, inodes         uint64
	pids                 uint64
	images, imageCount   uint64
	rxBytes, txBytes     uint64
	layerBytes, layerIns uint64 // the containers' writable layers alone
}

func (r *Runtime) nodeUsageLocked(ts int64) nodeUsage {
	u := nodeUsage{
		nanoCores: baseNanoCores,
		memory:    baseMemory,
		rss:       baseMemory / 2,
		disk:      baseDisk,
		inodes:    baseInodes,
		pids:      basePIDs,
		cpuNanos:  r.retiredCPU,
	}
	if ts > r.started {
		u.cpuNanos += uint64(ts-r.started) / (1_000_000_000 / baseNanoCores)
	}
	for _, c := range r.containers {
		u.cpuNanos += c.cpuNanos(ts)
		if c.running() {
			u.nanoCores += ctrNanoCores
		}
		u.memory += c.workingSet()
		u.rss += c.rss()
		u.pids += c.pidCount()
		b, n := c.writableLayer()
		u.layerBytes += b
		u.layerIns += n
	}
	u.disk += u.layerBytes
	u.inodes += u.layerIns
	for _, sb := range r.sandboxes {
		if sb.state != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		u.memory += pauseMemory
		u.rss += pauseMemory
		procs := uint64(1)
		for _, c := range sb.containers {
			procs += c.pidCount()
		}
		u.pids++
		u.rxBytes += procs * 1024
		u.txBytes += procs * 512
	}
	for _, img := range r.images {
		u.images += img.size
		u.imageCount++
	}
	return u
}

func sub0(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// ---- the node's figures, for a stats provider on the sim

func ptr(v uint64) *uint64 { return &v }

func timeOf(ns int64) time.Time { return time.Unix(0, ns) }

func iptr(v uint64) *int64 {
	x := int64(min(v, 1<<62))
	return &x
}

// NodeStats returns the simulated node's figures in the Summary API's
// terms: cumulative CPU (5% of a core for the system plus 1% per running
// container) and its current rate, memory (node-memory: a 256 MiB base
// plus the containers' working sets), network, the node filesystem
// (node-disk: a 1 GiB base plus the containers' writable layers) and
// rlimit (node-pids: 100 system processes plus the containers'). NodeName
// and the runtime's filesystems are left to the caller (see FsInfo).
func (r *Runtime) NodeStats(context.Context) (*statsapi.NodeStats, error) {
	ts := now()
	r.mu.RLock()
	u := r.nodeUsageLocked(ts)
	started := r.started
	n := r.node
	r.mu.RUnlock()
	t := metav1.NewTime(timeOf(ts))
	inodes := n.disk / bytesPerInode
	return &statsapi.NodeStats{
		StartTime: metav1.NewTime(timeOf(started)),
		CPU:       &statsapi.CPUStats{Time: t, UsageNanoCores: ptr(u.nanoCores), UsageCoreNanoSeconds: ptr(u.cpuNanos)},
		Memory: &statsapi.MemoryStats{Time: t, AvailableBytes: ptr(sub0(n.memory, u.memory)), UsageBytes: ptr(u.memory),
			WorkingSetBytes: ptr(u.memory), RSSBytes: ptr(u.rss), PageFaults: ptr(0), MajorPageFaults: ptr(0)},
		Network: &statsapi.NetworkStats{Time: t,
			InterfaceStats: statsapi.InterfaceStats{Name: "eth0", RxBytes: ptr(u.rxBytes), TxBytes: ptr(u.txBytes), RxErrors: ptr(0), TxErrors: ptr(0)},
			Interfaces:     []statsapi.InterfaceStats{{Name: "eth0", RxBytes: ptr(u.rxBytes), TxBytes: ptr(u.txBytes), RxErrors: ptr(0), TxErrors: ptr(0)}}},
		Fs: &statsapi.FsStats{Time: t, CapacityBytes: ptr(n.disk), UsedBytes: ptr(u.disk), AvailableBytes: ptr(sub0(n.disk, u.disk)),
			Inodes: ptr(inodes), InodesUsed: ptr(u.inodes), InodesFree: ptr(sub0(inodes, u.inodes))},
		Rlimit: &statsapi.RlimitStats{Time: t, MaxPID: iptr(n.pids), NumOfRunningProcesses: iptr(u.pids)},
	}, nil
}

// FsInfo returns the capacity and usage of a simulated filesystem:
// ImageFsMountpoint (imagefs-capacity, used by the images' sizes) or
// ContainerFsMountpoint (the node filesystem). Other paths are NotFound.
func (r *Runtime) FsInfo(_ context.Context, p string) (*statsapi.FsStats, error) {
	ts := now()
	r.mu.RLock()
	u := r.nodeUsageLocked(ts)
	n := r.node
	r.mu.RUnlock()
	var capacity, used, inodesUsed uint64
	switch path.Clean(p) {
	case ImageFsMountpoint:
		capacity, used, inodesUsed = n.imageFs, u.images, u.imageCount*100
	case ContainerFsMountpoint:
		capacity, used, inodesUsed = n.disk, u.disk, u.inodes
	default:
		return nil, status.Errorf(codes.NotFound, "sim: no simulated filesystem at %q (want %s or %s)", p, ImageFsMountpoint, ContainerFsMountpoint)
	}
	inodes := capacity / bytesPerInode
	return &statsapi.FsStats{Time: metav1.NewTime(timeOf(ts)),
		CapacityBytes: ptr(capacity), UsedBytes: ptr(used), AvailableBytes: ptr(sub0(capacity, used)),
		Inodes: ptr(inodes), InodesUsed: ptr(inodesUsed), InodesFree: ptr(sub0(inodes, inodesUsed)),
	}, nil
}

// ---- usage commands (the caller holds r.mu)

// sizeArg parses the one size argument of cmd.
func sizeArg(cmd string, args []string, stderr sink) (uint64, bool) {
	if len(args) != 1 {
		stderr([]byte(cmd + ": want one size (e.g. 200Mi)\n"))
		return 0, false
	}
	n, err := parseSize(args[0])
	if err != nil {
		stderr([]byte(cmd + ": " + err.Error() + "\n"))
		return 0, false
	}
	return n, true
}

// alloc SIZE grows the container's working set. Past its memory limit, or
// past the node's memory, the container is OOM-killed (137, OOMKilled).
func (p *proc) alloc(args []string, stderr sink) int {
	n, ok := sizeArg("alloc", args, stderr)
	if !ok {
		return 1
	}
	c := p.c
	if !c.running() {
		return 1
	}
	c.memAlloc += n
	limit := c.linuxRes.GetMemoryLimitInBytes()
	over := limit > 0 && c.workingSet() > uint64(limit)
	if !over {
		over = p.r.nodeUsageLocked(now()).memory > p.r.node.memory
	}
	if over {
		p.r.killContainerLocked(c, exitKilled, "OOMKilled")
		return exitKilled
	}
	// The pod cgroup's limit, and every limit above it, counts the pod's
	// containers together; its OOM killer may pick another container.
	if p.r.cgEnforceMemoryLocked(c, "") {
		return exitKilled
	}
	return 0
}

// free [SIZE] gives back SIZE of what alloc took, or all of it.
func (p *proc) free(args []string, stderr sink) int {
	return giveBack(&p.c.memAlloc, "free", args, stderr, sizeArg)
}

// giveBack takes the amount in args (parsed by parse) off *held, or all
// of it when args is empty: free and reap.
func giveBack(held *uint64, cmd string, args []string, stderr sink, parse func(string, []string, sink) (uint64, bool)) int {
	if len(args) == 0 {
		*held = 0
		return 0
	}
	n, ok := parse(cmd, args, stderr)
	if !ok {
		return 1
	}
	*held = sub0(*held, n)
	return 0
}

// fill [FILE] SIZE grows FILE (default /fill) by SIZE on the container's
// writable layer; rm FILE gives it back. Past the node filesystem's
// capacity it fails with ENOSPC and writes nothing.
func (p *proc) fill(args []string, stderr sink) int {
	name := "/fill"
	if len(args) == 2 {
		name, args = args[0], args[1:]
	}
	n, ok := sizeArg("fill", args, stderr)
	if !ok {
		return 1
	}
	if u := p.r.nodeUsageLocked(now()); u.disk+n > p.r.node.disk {
		stderr([]byte("fill: write error: No space left on device\n"))
		return 1
	}
	if _, ok := p.c.fs[name]; !ok {
		p.c.fsw()[name] = nil
	}
	if p.c.filled == nil {
		p.c.filled = map[string]uint64{}
	}
	p.c.filled[name] += n
	return 0
}

// spawn N adds N processes to the container; past the node's pid_max it
// fails as fork does.
func (p *proc) spawn(args []string, stderr sink) int {
	n, ok := countArg("spawn", args, stderr)
	if !ok {
		return 1
	}
	if !p.c.running() {
		return 1
	}
	if u := p.r.nodeUsageLocked(now()); u.pids+n > p.r.node.pids {
		stderr([]byte("spawn: can't fork: Resource temporarily unavailable\n"))
		return 1
	}
	if _, ok := p.r.cgPidsRoomLocked(p.c.sb, n); !ok { // the pod's pids.max
		stderr([]byte("spawn: can't fork: Resource temporarily unavailable\n"))
		return 1
	}
	p.c.spawned += n
	p.c.pids = append(p.c.pids, p.r.newPidsLocked(n)...)
	return 0
}

// reap [N] ends N of the processes spawn added, or all.
func (p *proc) reap(args []string, stderr sink) int {
	code := giveBack(&p.c.spawned, "reap", args, stderr, countArg)
	if n := 1 + int(p.c.spawned); len(p.c.pids) > n {
		p.c.pids = p.c.pids[:n]
	}
	return code
}

func countArg(cmd string, args []string, stderr sink) (uint64, bool) {
	var n uint64
	if len(args) != 1 {
		stderr([]byte(cmd + ": want one count\n"))
		return 0, false
	}
	if _, err := fmt.Sscanf(args[0], "%d", &n); err != nil || fmt.Sprint(n) != args[0] {
		stderr([]byte(cmd + ": invalid number '" + args[0] + "'\n"))
		return 0, false
	}
	return n, true
}
