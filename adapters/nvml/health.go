package nvml

import (
	"context"
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// healthEvents are the NVML events Watch registers for (each GPU: those it
// supports).
const healthEvents = uint64(nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError)

// applicationXids are Xids caused by the application, not the GPU: the GPU
// stays healthy. The list is NVIDIA's k8s-device-plugin's
// (internal/rm/health.go, getDisabledHealthCheckXids: "Application errors:
// the GPU should still be healthy"), after
// https://docs.nvidia.com/deploy/xid-errors/.
var applicationXids = map[uint64]string{
	13:  "Graphics Engine Exception",
	31:  "GPU memory page fault",
	43:  "GPU stopped processing",
	45:  "Preemptive cleanup, due to previous errors",
	68:  "Video processor exception",
	109: "Context Switch Timeout Error",
}

// criticalXids name the critical Xids seen most (for the why of an update);
// every Xid that is not an application one is critical.
var criticalXids = map[uint64]string{
	48:  "double-bit ECC error",
	63:  "ECC page retirement or row remapping recording event",
	64:  "ECC page retirement or row remapping recording failure",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error",
	95:  "uncontained ECC error",
	119: "GSP RPC timeout",
	120: "GSP error",
}

func xidText(xid uint64) string {
	if s, ok := criticalXids[xid]; ok {
		return fmt.Sprintf("Xid %d (%s)", xid, s)
	}
	if s, ok := applicationXids[xid]; ok {
		return fmt.Sprintf("Xid %d (%s)", xid, s)
	}
	return fmt.Sprintf("Xid %d", xid)
}

// Watch calls update with every GPU at once (ID the UUID, Health, the NUMA
// node as topology where known), then waits on NVML events (EventWait at a
// time) until ctx ends, and calls update again when a GPU turns unhealthy:
// a critical Xid or a double-bit ECC error on it, or on every GPU for an
// event with no device. why says what happened ("GPU-...: Xid 79 (GPU has
// fallen off the bus)"). It returns nil when ctx ends, ErrClosed after
// Close, and an error when NVML's event machinery fails. Where the GPUs do
// not support events it logs that once and waits for ctx with the GPUs
// healthy.
func (g *GPUs) Watch(ctx context.Context, update func(devices []*pluginapi.Device, why string)) error {
	set, why, err := g.registerEvents()
	if err != nil {
		return err
	}
	seen, _ := g.healthChange()
	update(g.devices(), why)
	if set == nil {
		<-ctx.Done()
		return nil
	}
	defer g.freeEvents(set)
	for ctx.Err() == nil {
		ev, ret, err := g.nextEvent(set)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		switch ret {
		case nvml.SUCCESS:
			if why, changed := g.handleEvent(ev); changed {
				seen, _ = g.healthChange()
				update(g.devices(), why)
			}
		case nvml.ERROR_TIMEOUT:
		default:
			return fmt.Errorf("wait for NVML events: %w", ret)
		}
		// Every change of health since the last report, whichever Watch
		// handled its event: while an actor restarts, the set of the
		// ending Watch may take an event meant for both.
		if gen, why := g.healthChange(); gen != seen {
			seen = gen
			update(g.devices(), why)
		}
	}
	return nil
}

// registerEvents creates an event set and registers every GPU that
// supports health events. A GPU whose registration fails otherwise than
// "not supported" is marked unhealthy (as NVIDIA's plugin does); why says
// so. No GPU registered: nil set.
func (g *GPUs) registerEvents() (nvml.EventSet, string, error) {
	if err := g.acquire(); err != nil {
		return nil, "", err
	}
	defer g.release()
	set, ret := g.lib.EventSetCreate()
	if ret == nvml.ERROR_NOT_SUPPORTED {
		g.log.Warn("NVML events not supported: GPU health is not watched, the GPUs stay healthy", "err", ret)
		return nil, "", nil
	}
	if ret != nvml.SUCCESS {
		return nil, "", fmt.Errorf("create NVML event set: %w", ret)
	}
	var unsupported, whys []string
	registered := 0
	for _, d := range g.gpus {
		supported, ret := d.dev.GetSupportedEventTypes()
		if ret == nvml.SUCCESS && supported&healthEvents == 0 {
			ret = nvml.ERROR_NOT_SUPPORTED
		}
		if ret == nvml.SUCCESS {
			ret = d.dev.RegisterEvents(supported&healthEvents, set)
		}
		switch ret {
		case nvml.SUCCESS:
			registered++
		case nvml.ERROR_NOT_SUPPORTED:
			unsupported = append(unsupported, d.uuid)
		default:
			reason := fmt.Sprintf("register for health events: %v", ret)
			if g.markUnhealthy([]*gpu{d}, reason) {
				whys = append(whys, d.uuid+": "+reason)
			}
		}
	}
	if len(unsupported) > 0 {
		g.log.Warn("GPUs without health events stay healthy", "gpus", strings.Join(unsupported, ","))
	}
	why := strings.Join(whys, "; ")
	if registered == 0 {
		if ret := set.Free(); ret != nvml.SUCCESS {
			g.log.Warn("free NVML event set", "err", ret)
		}
		return nil, why, nil
	}
	return set, why, nil
}

func (g *GPUs) freeEvents(set nvml.EventSet) {
	if g.acquire() != nil {
		return // NVML is shut down: nothing to free, nothing may be called
	}
	defer g.release()
	if ret := set.Free(); ret != nvml.SUCCESS {
		g.log.Warn("free NVML event set", "err", ret)
	}
}

// event is one NVML event with its GPU resolved (nil targets: none of
// ours).
type event struct {
	targets []*gpu
	all     bool
	typ     uint64
	data    uint64
}

// nextEvent waits EventWait for one event.
func (g *GPUs) nextEvent(set nvml.EventSet) (event, nvml.Return, error) {
	if err := g.acquire(); err != nil {
		return event{}, 0, err
	}
	defer g.release()
	data, ret := set.Wait(uint32(g.eventWait.Milliseconds()))
	if ret != nvml.SUCCESS {
		return event{}, ret, nil
	}
	ev := event{typ: data.EventType, data: data.EventData}
	if data.Device == nil {
		ev.all = true
	} else if uuid, ret := data.Device.GetUUID(); ret != nvml.SUCCESS {
		g.log.Info("NVML event for a GPU without UUID: taken as for every GPU", "err", ret)
		ev.all = true
	} else if d, ok := g.byUUID[uuid]; ok {
		ev.targets = []*gpu{d}
	} else {
		g.log.Debug("NVML event for a GPU not served", "uuid", uuid)
	}
	if ev.all {
		ev.targets = g.gpus
	}
	return ev, nvml.SUCCESS, nil
}

// handleEvent applies one event; changed when a GPU turned unhealthy.
func (g *GPUs) handleEvent(ev event) (why string, changed bool) {
	if len(ev.targets) == 0 {
		return "", false
	}
	var reason string
	switch {
	case ev.typ&nvml.EventTypeXidCriticalError != 0:
		g.stateMu.Lock()
		for _, d := range ev.targets {
			g.lastXid[d.uuid] = ev.data
		}
		g.stateMu.Unlock()
		reason = xidText(ev.data)
		if _, app := applicationXids[ev.data]; app {
			g.log.Info("application Xid: the GPU stays healthy", "gpus", names(ev), "xid", reason)
			return "", false
		}
	case ev.typ&nvml.EventTypeDoubleBitEccError != 0:
		reason = "double-bit ECC error"
	default:
		g.log.Debug("NVML event ignored", "type", ev.typ, "data", ev.data)
		return "", false
	}
	if !g.markUnhealthy(ev.targets, reason) {
		g.log.Info("health event on GPUs already unhealthy", "gpus", names(ev), "why", reason)
		return "", false
	}
	g.log.Warn("GPU unhealthy", "gpus", names(ev), "why", reason)
	why = names(ev) + ": " + reason
	g.stateMu.Lock()
	g.lastWhy = why
	g.stateMu.Unlock()
	return why, true
}

func names(ev event) string {
	if ev.all {
		return "all GPUs"
	}
	return ev.targets[0].uuid
}

// markUnhealthy marks GPUs unhealthy for good; true if one was healthy.
func (g *GPUs) markUnhealthy(gpus []*gpu, why string) bool {
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	changed := false
	for _, d := range gpus {
		if _, ok := g.unhealthy[d.uuid]; !ok {
			g.unhealthy[d.uuid] = why
			changed = true
		}
	}
	if changed {
		g.healthGen++
		g.lastWhy = why
	}
	return changed
}

// healthChange is the generation of the GPUs' health and the reason of its
// latest change.
func (g *GPUs) healthChange() (uint64, string) {
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	return g.healthGen, g.lastWhy
}

// devices is the plugin API view of the GPUs now (fresh values).
func (g *GPUs) devices() []*pluginapi.Device {
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	out := make([]*pluginapi.Device, 0, len(g.gpus))
	for _, d := range g.gpus {
		dev := &pluginapi.Device{ID: d.uuid, Health: pluginapi.Healthy}
		if _, bad := g.unhealthy[d.uuid]; bad {
			dev.Health = pluginapi.Unhealthy
		}
		if d.numa >= 0 {
			dev.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(d.numa)}}}
		}
		out = append(out, dev)
	}
	return out
}
