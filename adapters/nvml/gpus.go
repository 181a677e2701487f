package nvml

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"
)

// GPUResource is the extended resource the GPUs are served as.
const GPUResource = "nvidia.com/gpu"

// AllGPUs as InjectXid's device ID raises an event with no device, which
// NVML uses for an error that concerns every GPU.
const AllGPUs = "*"

var (
	// ErrNoLibrary: the NVML library (libnvidia-ml.so.1) could not be
	// loaded; the machine has no NVIDIA driver.
	ErrNoLibrary = errors.New("NVML library libnvidia-ml.so.1 not found (no NVIDIA driver)")
	// ErrNoDevices: NVML works (or its library is there) but shows no GPU.
	ErrNoDevices = errors.New("no NVIDIA GPU found")
	// ErrUnknownDevice: a device ID that is not one of the GPUs' UUIDs.
	ErrUnknownDevice = errors.New("unknown GPU")
	// ErrNotSimulated: fault injection asked of real GPUs.
	ErrNotSimulated = errors.New("fault injection needs simulated GPUs (a mock: spec)")
	// ErrClosed: the GPUs value was closed (NVML shut down).
	ErrClosed = errors.New("NVML closed")
)

// Options tune Open. The zero value is valid.
type Options struct {
	// DevRoot is the host directory holding the device nodes (nvidia0,
	// nvidiactl, ...); default "/dev". Allocate's host paths are under it,
	// container paths under /dev.
	DevRoot string
	// Clock drives xid-every on mock specs; default the real clock.
	Clock clock.WithTicker
	// Log receives what the GPUs do; default slog.Default().
	Log *slog.Logger
	// EventWait is how long one wait for NVML events blocks in Watch (so
	// how long Watch takes to see its ctx end); default 1 s.
	EventWait time.Duration
}

// GPUs are the GPUs NVML found at Open. They satisfy, structurally, the
// DevicesActor's Provider, Describer, Sampler and FaultInjector. Safe for
// concurrent use; every NVML call is refused after Close.
type GPUs struct {
	spec      string
	lib       nvml.Interface
	sim       *simulation // nil for the real library
	devRoot   string
	clock     clock.WithTicker
	log       *slog.Logger
	eventWait time.Duration

	// Read-only after Open.
	gpus          []*gpu
	byUUID        map[string]*gpu
	driverVersion string
	cudaVersion   int // as NVML gives it: 12040 is 12.4; 0 unknown
	machine       string

	// mu gates NVML calls (read) against Shutdown (write): calling NVML
	// after Shutdown kills the process.
	mu     sync.RWMutex
	closed bool

	stateMu   sync.Mutex
	unhealthy map[string]string // UUID -> why
	// healthGen counts the changes of unhealthy, lastWhy is the latest's
	// reason: a Watch that did not handle a change itself (an event taken
	// by the set of a Watch that was ending) still reports it.
	healthGen uint64
	lastWhy   string
	lastXid   map[string]uint64

	stop chan struct{}
	bg   sync.WaitGroup
}

// gpu is what discovery found about one GPU.
type gpu struct {
	index      int
	uuid       string
	minor      int
	name       string
	memory     uint64 // bytes
	ccMajor    int
	ccMinor    int
	busID      string // 0000:1b:00.0 form, "" unknown
	migCapable bool
	migEnabled bool
	numa       int // -1 unknown
	dev        nvml.Device
}

func (d *gpu) memoryMiB() uint64 { return d.memory / (1 << 20) }

// Open initialises NVML for spec ("nvml" or "mock:<server>[?query]", see
// the package doc) and discovers the GPUs. Errors wrap ErrNoLibrary or
// ErrNoDevices where the machine has no usable GPU (the caller logs one
// line and carries on); any other error is a real failure or a bad spec.
// Close releases NVML.
func Open(spec string, opts Options) (*GPUs, error) {
	switch {
	case spec == "nvml":
		return open(spec, nvml.New(), nil, opts)
	case strings.HasPrefix(spec, "mock:"):
		sim, err := newSimulation(spec)
		if err != nil {
			return nil, err
		}
		return open(spec, sim.server, sim, opts)
	}
	return nil, fmt.Errorf("GPU spec %q: want %q (the driver's NVML) or \"mock:<server>[?count=N&xid-every=30s&xid=79&seed=1]\" with <server> one of %s",
		spec, "nvml", strings.Join(simulatedServers(), ", "))
}

// open initialises lib and discovers its GPUs (sim: the simulation behind
// lib, nil for the driver's).
func open(spec string, lib nvml.Interface, sim *simulation, opts Options) (*GPUs, error) {
	if opts.DevRoot == "" {
		opts.DevRoot = "/dev"
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.EventWait <= 0 {
		opts.EventWait = time.Second
	}
	opts.EventWait = max(opts.EventWait, time.Millisecond) // NVML waits whole ms
	g := &GPUs{
		spec:      spec,
		lib:       lib,
		sim:       sim,
		devRoot:   opts.DevRoot,
		clock:     opts.Clock,
		log:       opts.Log.With("spec", spec),
		eventWait: opts.EventWait,
		byUUID:    map[string]*gpu{},
		unhealthy: map[string]string{},
		lastXid:   map[string]uint64{},
		stop:      make(chan struct{}),
	}
	switch ret := g.lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, fmt.Errorf("%w: NVML init: %w", ErrNoLibrary, ret)
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return nil, fmt.Errorf("%w: the NVIDIA kernel driver is not loaded: NVML init: %w", ErrNoDevices, ret)
	default:
		return nil, fmt.Errorf("NVML init: %w", ret)
	}
	if err := g.discover(); err != nil {
		if ret := g.lib.Shutdown(); ret != nvml.SUCCESS {
			g.log.Warn("NVML shutdown after a failed discovery", "err", ret)
		}
		return nil, err
	}
	if g.sim != nil && g.sim.xidEvery > 0 {
		g.bg.Add(1)
		go g.injectEvery(g.sim.xidEvery, g.sim.xid, g.sim.seed)
	}
	return g, nil
}

// discover reads every GPU once (NVML calls are gated by Open: Init
// succeeded).
func (g *GPUs) discover() error {
	n, ret := g.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("count GPUs: %w", ret)
	}
	if n == 0 {
		return fmt.Errorf("%w: NVML reports 0 GPUs", ErrNoDevices)
	}
	if v, ret := g.lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		g.driverVersion = v
	}
	if v, ret := g.lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		g.cudaVersion = v
	}
	// Calls newer than the driver would kill the process: ask first.
	numaByNVML := g.lib.Extensions().LookupSymbol("nvmlDeviceGetNumaNodeId") == nil
	migByNVML := g.lib.Extensions().LookupSymbol("nvmlDeviceGetMigMode") == nil
	for i := range n {
		dev, ret := g.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			g.log.Warn("GPU left out: no handle", "index", i, "err", ret)
			continue
		}
		uuid, ret := dev.GetUUID()
		if ret != nvml.SUCCESS {
			g.log.Warn("GPU left out: no UUID", "index", i, "err", ret)
			continue
		}
		minor, ret := dev.GetMinorNumber()
		if ret != nvml.SUCCESS {
			g.log.Warn("GPU left out: no minor number (device node)", "index", i, "uuid", uuid, "err", ret)
			continue
		}
		d := &gpu{index: i, uuid: uuid, minor: minor, numa: -1, dev: dev}
		if name, ret := dev.GetName(); ret == nvml.SUCCESS {
			d.name = name
		}
		if mem, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
			d.memory = mem.Total
		}
		if major, minor, ret := dev.GetCudaComputeCapability(); ret == nvml.SUCCESS {
			d.ccMajor, d.ccMinor = major, minor
		}
		if pci, ret := dev.GetPciInfo(); ret == nvml.SUCCESS {
			d.busID = normalizeBusID(cString(pci.BusId[:]))
		}
		if migByNVML {
			if current, _, ret := dev.GetMigMode(); ret == nvml.SUCCESS {
				d.migCapable = true
				d.migEnabled = current == nvml.DEVICE_MIG_ENABLE
			}
		}
		d.numa = g.numaNode(dev, d.busID, numaByNVML)
		g.gpus = append(g.gpus, d)
		g.byUUID[uuid] = d
	}
	if len(g.gpus) == 0 {
		return fmt.Errorf("%w: none of the %d GPUs NVML reports could be read", ErrNoDevices, n)
	}
	if g.sim != nil {
		g.machine = g.sim.machine
	} else {
		g.machine = readTrim("/sys/class/dmi/id/product_name")
	}
	return nil
}

// numaNode asks NVML (where the driver has the call: an absent symbol
// would kill the process) and then sysfs, as NVIDIA's device plugin does.
func (g *GPUs) numaNode(dev nvml.Device, busID string, byNVML bool) int {
	if byNVML {
		if n, ret := dev.GetNumaNodeId(); ret == nvml.SUCCESS && n >= 0 {
			return n
		}
	}
	if g.sim != nil || busID == "" {
		return -1
	}
	s := readTrim(filepath.Join("/sys/bus/pci/devices", busID, "numa_node"))
	if n, err := strconv.Atoi(s); err == nil && n >= 0 {
		return n
	}
	return -1
}

// Close shuts NVML down (and the xid-every injector). Later NVML-backed
// calls return ErrClosed; Watch returns. Closing twice is a no-op.
func (g *GPUs) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	close(g.stop)
	ret := g.lib.Shutdown()
	g.mu.Unlock()
	g.bg.Wait()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %w", ret)
	}
	return nil
}

// acquire gates one NVML call against Close; release after.
func (g *GPUs) acquire() error {
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (g *GPUs) release() { g.mu.RUnlock() }

// ResourceName is "nvidia.com/gpu".
func (g *GPUs) ResourceName() string { return GPUResource }

// Count is how many GPUs Open found.
func (g *GPUs) Count() int { return len(g.gpus) }

// Spec is the spec the GPUs were opened with.
func (g *GPUs) Spec() string { return g.spec }

// controlNodes are the driver's device nodes every GPU container gets when
// the host has them (NVIDIA's device plugin's optional paths).
var controlNodes = []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}

// Allocate returns what a container gets for these GPUs, as NVIDIA's device
// plugin does with the envvar device-list strategy and passDeviceSpecs:
// NVIDIA_VISIBLE_DEVICES with the UUIDs in the order given, and the device
// nodes /dev/nvidia<minor> of each GPU and the control nodes the host has
// (host paths under DevRoot), "rw". An unknown or repeated ID, or a GPU
// whose device node is missing under DevRoot, is an error.
func (g *GPUs) Allocate(ctx context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, errors.New("allocate GPUs: no device ID given")
	}
	seen := make(map[string]bool, len(ids))
	resp := &pluginapi.ContainerAllocateResponse{
		Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(ids, ",")},
	}
	for _, id := range ids {
		d, ok := g.byUUID[id]
		if !ok {
			return nil, fmt.Errorf("allocate GPUs: %w %q (this node has %s)", ErrUnknownDevice, id, g.uuidList())
		}
		if seen[id] {
			return nil, fmt.Errorf("allocate GPUs: %s given twice", id)
		}
		seen[id] = true
		node := fmt.Sprintf("nvidia%d", d.minor)
		host := filepath.Join(g.devRoot, node)
		if _, err := os.Stat(host); err != nil {
			return nil, fmt.Errorf("allocate GPUs: device node of %s: %w", id, err)
		}
		resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{
			ContainerPath: "/dev/" + node, HostPath: host, Permissions: "rw",
		})
	}
	for _, node := range controlNodes {
		host := filepath.Join(g.devRoot, node)
		if _, err := os.Stat(host); err != nil {
			g.log.Debug("control device node left out", "path", host, "err", err)
			continue
		}
		resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{
			ContainerPath: "/dev/" + node, HostPath: host, Permissions: "rw",
		})
	}
	return resp, nil
}

func (g *GPUs) uuidList() string {
	ids := make([]string, len(g.gpus))
	for i, d := range g.gpus {
		ids[i] = d.uuid
	}
	return strings.Join(ids, ", ")
}

// PreferredAllocation prefers GPUs on one NUMA node: those of mustInclude
// first, then the GPUs of the NUMA node that holds mustInclude, then the
// smallest NUMA group that can hold the rest, then the largest groups
// (GPU index order within a group). No NUMA node known: nil (no
// preference). IDs outside the GPUs, or a size that available cannot
// meet, are errors.
func (g *GPUs) PreferredAllocation(ctx context.Context, available, mustInclude []string, size int) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if size <= 0 || size > len(available) {
		return nil, fmt.Errorf("preferred allocation: size %d out of 1..%d available", size, len(available))
	}
	chosen := map[string]bool{}
	var out []string
	numaOf := map[int]int{} // NUMA node -> GPUs of mustInclude on it
	for _, id := range mustInclude {
		d, ok := g.byUUID[id]
		if !ok {
			return nil, fmt.Errorf("preferred allocation: %w %q in mustInclude", ErrUnknownDevice, id)
		}
		if !chosen[id] {
			chosen[id] = true
			out = append(out, id)
			numaOf[d.numa]++
		}
	}
	if len(out) >= size {
		return out[:size], nil
	}
	groups := map[int][]*gpu{}
	known := false
	for _, id := range available {
		d, ok := g.byUUID[id]
		if !ok {
			return nil, fmt.Errorf("preferred allocation: %w %q in available", ErrUnknownDevice, id)
		}
		if chosen[id] {
			continue
		}
		chosen[id] = true
		known = known || d.numa >= 0
		groups[d.numa] = append(groups[d.numa], d)
	}
	if !known {
		return nil, nil
	}
	need := size - len(out)
	nodes := make([]int, 0, len(groups))
	for n := range groups {
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b int) int {
		if numaOf[a] != numaOf[b] { // where mustInclude lives
			return numaOf[b] - numaOf[a]
		}
		la, lb := len(groups[a]), len(groups[b])
		fa, fb := la >= need, lb >= need
		switch {
		case fa && !fb:
			return -1
		case fb && !fa:
			return 1
		case fa && fb && la != lb: // best fit
			return la - lb
		case la != lb: // neither fits: fewest nodes spanned
			return lb - la
		}
		return a - b
	})
	for _, n := range nodes {
		group := groups[n]
		slices.SortFunc(group, func(a, b *gpu) int { return a.index - b.index })
		for _, d := range group {
			if len(out) == size {
				return out, nil
			}
			out = append(out, d.uuid)
		}
	}
	return out, nil
}

// PreStart does nothing: the built-in GPUs need no preparation.
func (g *GPUs) PreStart(ctx context.Context, ids []string) error { return nil }

// cString reads a NUL-terminated C char array.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// normalizeBusID turns NVML's "00000000:1B:00.0" into sysfs's
// "0000:1b:00.0".
func normalizeBusID(id string) string {
	id = strings.ToLower(strings.TrimSpace(id))
	if domain, rest, ok := strings.Cut(id, ":"); ok && len(domain) == 8 {
		id = domain[4:] + ":" + rest
	}
	return id
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
