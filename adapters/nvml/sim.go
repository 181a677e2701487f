package nvml

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// serverModel is what a simulated server adds to go-nvml's mock: the
// figures an idle real GPU of that model reports.
type serverModel struct {
	build       func() *server.Server
	machine     string   // /sys/class/dmi/id/product_name of the real server
	busIDs      []string // NVML's form, by index
	memoryTotal uint64   // bytes; 0: the mock's figure
	powerLimit  uint32   // mW
	idlePower   uint32   // mW
	idleTemp    uint32   // C
}

// DGX PCI bus IDs (NVML's "00000000:BB:00.0" form).
var (
	dgxA100Bus = []string{"07", "0F", "47", "4E", "87", "90", "B7", "BD"}
	dgxH100Bus = []string{"1B", "43", "52", "61", "9D", "C3", "D1", "DF"}
)

var serverModels = map[string]serverModel{
	"dgxa100": {build: dgxa100.New, machine: "DGXA100", busIDs: dgxA100Bus,
		powerLimit: 400000, idlePower: 55000, idleTemp: 31},
	// memoryTotal, powerLimit: measured on an H100 80GB HBM3
	// (docs/CONTRIBUTING.md, "GPUs through NVML").
	"dgxh100": {build: dgxh100.New, machine: "DGXH100", busIDs: dgxH100Bus,
		memoryTotal: 85520809984, powerLimit: 700000, idlePower: 70000, idleTemp: 30},
	"dgxh200": {build: dgxh200.New, machine: "DGXH200", busIDs: dgxH100Bus,
		powerLimit: 700000, idlePower: 75000, idleTemp: 30},
	"dgxb200": {build: dgxb200.New, machine: "DGXB200", busIDs: dgxH100Bus,
		powerLimit: 1000000, idlePower: 140000, idleTemp: 32},
}

func simulatedServers() []string {
	names := make([]string, 0, len(serverModels))
	for n := range serverModels {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// supportedEvents is what a real data-centre GPU answers to
// GetSupportedEventTypes.
const supportedEvents = uint64(nvml.EventTypeSingleBitEccError | nvml.EventTypeDoubleBitEccError |
	nvml.EventTypePState | nvml.EventTypeXidCriticalError | nvml.EventTypeClock)

// simulation is a mock: spec's server and its fault injection.
type simulation struct {
	model    string
	machine  string
	server   *server.Server
	events   *eventHub
	xidEvery time.Duration
	xid      uint64
	seed     uint64
}

// newSimulation parses "mock:<server>[?count=N&xid-every=D&xid=X&seed=S]"
// and builds the server.
func newSimulation(spec string) (*simulation, error) {
	rest := strings.TrimPrefix(spec, "mock:")
	model, query, _ := strings.Cut(rest, "?")
	sm, ok := serverModels[model]
	if !ok {
		return nil, fmt.Errorf("GPU spec %q: unknown simulated server %q (want one of %s)",
			spec, model, strings.Join(simulatedServers(), ", "))
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("GPU spec %q: query: %w", spec, err)
	}
	sim := &simulation{model: model, machine: sm.machine, events: newEventHub(), xid: 79, seed: 1}
	count := 0
	for key, vals := range q {
		val := vals[len(vals)-1]
		switch key {
		case "count":
			count, err = strconv.Atoi(val)
			if err == nil && count < 1 {
				err = fmt.Errorf("must be at least 1")
			}
		case "xid-every":
			sim.xidEvery, err = time.ParseDuration(val)
			if err == nil && sim.xidEvery <= 0 {
				err = fmt.Errorf("must be positive")
			}
		case "xid":
			sim.xid, err = strconv.ParseUint(val, 10, 64)
		case "seed":
			sim.seed, err = strconv.ParseUint(val, 10, 64)
		default:
			err = fmt.Errorf("unknown parameter (want count, xid-every, xid, seed)")
		}
		if err != nil {
			return nil, fmt.Errorf("GPU spec %q: %s=%q: %w", spec, key, val, err)
		}
	}
	s := sm.build()
	if count > len(s.Devices) {
		return nil, fmt.Errorf("GPU spec %q: count=%d but %s has %d GPUs", spec, count, model, len(s.Devices))
	}
	if count > 0 {
		s.Devices = s.Devices[:count]
	}
	sim.server = s
	s.EventSetCreateFunc = sim.events.create
	for i, d := range s.Devices {
		sim.complete(sm, d.(*server.Device), i)
	}
	return sim, nil
}

// complete fills in what go-nvml's mock device lacks, as an idle real GPU
// of the model answers.
func (sim *simulation) complete(sm serverModel, d *server.Device, index int) {
	d.UUID = stableUUID(sim.model, index)
	bus := sm.busIDs[index%len(sm.busIDs)]
	busNum, _ := strconv.ParseUint(bus, 16, 32)
	d.PciBusID = fmt.Sprintf("00000000:%s:00.0", bus)
	if sm.memoryTotal > 0 {
		d.MemoryInfo.Total = sm.memoryTotal
	}
	const usedIdle = 1 << 20 // what nvidia-smi shows of an idle GPU: 1 MiB
	d.MemoryInfo.Used = usedIdle
	d.MemoryInfo.Free = d.MemoryInfo.Total - usedIdle
	name := strings.TrimPrefix(d.Config.Name, "Mock ")
	numa := index / 4 // two sockets, four GPUs each
	temp := sm.idleTemp + uint32(index%3)

	d.GetNameFunc = func() (string, nvml.Return) { return name, nvml.SUCCESS }
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		p := nvml.PciInfo{Domain: 0, Bus: uint32(busNum), Device: 0, PciDeviceId: d.Config.PciDeviceId}
		copy(p.BusId[:], cChars(d.PciBusID))
		copy(p.BusIdLegacy[:], cChars(d.PciBusID[4:]))
		return p, nvml.SUCCESS
	}
	d.GetNumaNodeIdFunc = func() (int, nvml.Return) { return numa, nvml.SUCCESS }
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: 0, Memory: 0}, nvml.SUCCESS
	}
	d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
		if s != nvml.TEMPERATURE_GPU {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return temp, nvml.SUCCESS
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return sm.idlePower, nvml.SUCCESS }
	d.GetPowerManagementLimitFunc = func() (uint32, nvml.Return) { return sm.powerLimit, nvml.SUCCESS }
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return sm.powerLimit, nvml.SUCCESS }
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return supportedEvents, nvml.SUCCESS }
	uuid := d.UUID
	d.RegisterEventsFunc = func(types uint64, set nvml.EventSet) nvml.Return {
		if types&^supportedEvents != 0 {
			return nvml.ERROR_NOT_SUPPORTED
		}
		return sim.events.register(uuid, types, set)
	}
}

// stableUUID is a GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx UUID that
// depends only on the model and the index.
func stableUUID(model string, index int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "actorlet mock GPU %s %d", model, index))
	h := hex.EncodeToString(sum[:16])
	return fmt.Sprintf("GPU-%s-%s-%s-%s-%s", h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])
}

func cChars(s string) []int8 {
	out := make([]int8, len(s))
	for i := range len(s) {
		out[i] = int8(s[i])
	}
	return out
}

// InjectXid raises Xid xid on the simulated GPU with this UUID (AllGPUs:
// an event with no device, for every GPU). The event reaches Watch
// through the NVML event set, as a real one does; raised while no Watch is
// registered for that GPU, it waits for the next one. Real GPUs:
// ErrNotSimulated.
func (g *GPUs) InjectXid(deviceID string, xid uint64) error {
	if g.sim == nil {
		return fmt.Errorf("inject Xid %d on %s: %w", xid, deviceID, ErrNotSimulated)
	}
	if err := g.acquire(); err != nil {
		return fmt.Errorf("inject Xid %d on %s: %w", xid, deviceID, err)
	}
	defer g.release()
	ev := nvml.EventData{
		EventType: nvml.EventTypeXidCriticalError, EventData: xid,
		GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF,
	}
	if deviceID != AllGPUs {
		d, ok := g.byUUID[deviceID]
		if !ok {
			return fmt.Errorf("inject Xid %d: %w %q (this node has %s)", xid, ErrUnknownDevice, deviceID, g.uuidList())
		}
		ev.Device = d.dev
	} else {
		deviceID = ""
	}
	g.sim.events.raise(deviceID, ev)
	return nil
}

// injectEvery raises xid on a GPU picked by a seeded random source every
// period of the clock, until Close.
func (g *GPUs) injectEvery(every time.Duration, xid, seed uint64) {
	defer g.bg.Done()
	rng := rand.New(rand.NewPCG(seed, 0))
	t := g.clock.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C():
			d := g.gpus[rng.IntN(len(g.gpus))]
			if err := g.InjectXid(d.uuid, xid); err != nil {
				g.log.Debug("xid-every: not injected", "err", err)
				continue
			}
			g.log.Info("xid-every: injected", "gpu", d.uuid, "xid", xid)
		}
	}
}

// eventHub is the simulated driver's event delivery: event sets, what each
// registered, and events raised while no set was registered for their GPU.
type eventHub struct {
	mu      sync.Mutex
	sets    map[*mock.EventSet]*eventQueue
	pending []pendingEvent
}

type eventQueue struct {
	masks map[string]uint64 // UUID -> registered event types
	queue []nvml.EventData
	wake  chan struct{} // capacity 1
	freed bool
}

type pendingEvent struct {
	uuid string // "": every GPU
	ev   nvml.EventData
}

// maxPending bounds the events kept while nobody watches (xid-every with
// no Watch running): the oldest go first.
const maxPending = 256

func newEventHub() *eventHub {
	return &eventHub{sets: map[*mock.EventSet]*eventQueue{}}
}

// create is EventSetCreate: a set whose Wait blocks until an event comes
// or the timeout passes (ERROR_TIMEOUT), as the driver's does.
func (h *eventHub) create() (nvml.EventSet, nvml.Return) {
	s := &mock.EventSet{}
	q := &eventQueue{masks: map[string]uint64{}, wake: make(chan struct{}, 1)}
	s.WaitFunc = func(ms uint32) (nvml.EventData, nvml.Return) { return h.wait(q, ms) }
	s.FreeFunc = func() nvml.Return { return h.free(s) }
	h.mu.Lock()
	h.sets[s] = q
	h.mu.Unlock()
	return s, nvml.SUCCESS
}

// register is RegisterEvents of one GPU on a set; pending events for that
// GPU move to the set.
func (h *eventHub) register(uuid string, types uint64, set nvml.EventSet) nvml.Return {
	s, ok := set.(*mock.EventSet)
	if !ok {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	q, ok := h.sets[s]
	if !ok || q.freed {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	q.masks[uuid] |= types
	keep := h.pending[:0]
	for _, p := range h.pending {
		if (p.uuid == uuid || p.uuid == "") && p.ev.EventType&types != 0 {
			q.push(p.ev)
			continue
		}
		keep = append(keep, p)
	}
	clear(h.pending[len(keep):])
	h.pending = keep
	return nvml.SUCCESS
}

// raise delivers an event to every set registered for its GPU and type
// (uuid "": for any GPU), or keeps it for the next registration.
func (h *eventHub) raise(uuid string, ev nvml.EventData) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delivered := false
	for _, q := range h.sets {
		if q.freed {
			continue
		}
		var types uint64
		if uuid == "" {
			for _, m := range q.masks {
				types |= m
			}
		} else {
			types = q.masks[uuid]
		}
		if types&ev.EventType != 0 {
			q.push(ev)
			delivered = true
		}
	}
	if !delivered {
		if len(h.pending) == maxPending {
			h.pending = slices.Delete(h.pending, 0, 1)
		}
		h.pending = append(h.pending, pendingEvent{uuid: uuid, ev: ev})
	}
}

// push queues an event (hub lock held) and wakes a waiter.
func (q *eventQueue) push(ev nvml.EventData) {
	q.queue = append(q.queue, ev)
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (h *eventHub) wait(q *eventQueue, ms uint32) (nvml.EventData, nvml.Return) {
	// The driver blocks the calling thread for real time; so does this.
	timer := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer timer.Stop()
	for {
		h.mu.Lock()
		if q.freed {
			h.mu.Unlock()
			return nvml.EventData{}, nvml.ERROR_INVALID_ARGUMENT
		}
		if len(q.queue) > 0 {
			ev := q.queue[0]
			q.queue = q.queue[1:]
			h.mu.Unlock()
			return ev, nvml.SUCCESS
		}
		h.mu.Unlock()
		select {
		case <-q.wake:
		case <-timer.C:
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
	}
}

func (h *eventHub) free(s *mock.EventSet) nvml.Return {
	h.mu.Lock()
	defer h.mu.Unlock()
	q, ok := h.sets[s]
	if !ok {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	q.freed = true
	delete(h.sets, s)
	return nvml.SUCCESS
}
