package devices

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// Queries, device plugins, sampling and fault injection.

// closePlugin closes a device plugin's connection off the mailbox.
func (a *Actor) closePlugin(name string, p plugin) {
	if p.close == nil {
		return
	}
	log := a.log
	go func() {
		if err := p.close(); err != nil {
			log.Warn("closing a device plugin", "resource", name, "err", err)
		}
	}()
}

func (a *Actor) handleGetCapacity(ctx actor.Context, m *messages.GetDeviceCapacity) {
	to := m.ReplyTo
	if to == nil {
		to = ctx.Sender()
	}
	if to != nil {
		ctx.Send(to, copyCapacity(a.capacity()))
	}
}

func (a *Actor) handleGetPodDevices(ctx actor.Context, m *messages.GetPodDevices) {
	out := &messages.PodDevicesList{Pods: []messages.PodDevices{}}
	for _, uid := range sortedKeys(a.pods) {
		if m.UID != "" && m.UID != uid {
			continue
		}
		p := a.pods[uid]
		pd := messages.PodDevices{UID: p.UID, Namespace: p.Namespace, Name: p.Name,
			Containers: map[string]map[v1.ResourceName][]string{}}
		for _, c := range p.Containers {
			byRes := map[v1.ResourceName][]string{}
			for _, r := range c.Resources {
				byRes[v1.ResourceName(r.Resource)] = append([]string(nil), r.IDs...)
			}
			pd.Containers[c.Name] = byRes
		}
		out.Pods = append(out.Pods, pd)
	}
	if ctx.Sender() != nil {
		ctx.Respond(out)
	}
}

func (a *Actor) handleGetAllocatable(ctx actor.Context) {
	out := &messages.AllocatableDevices{Devices: map[v1.ResourceName][]string{}}
	for name, r := range a.res {
		ids := []string{}
		for id, ok := range r.devices {
			if ok {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		out.Devices[v1.ResourceName(name)] = ids
	}
	if ctx.Sender() != nil {
		ctx.Respond(out)
	}
}

func (a *Actor) handleRegistered(m *messages.DevicePluginRegistered) {
	if m.ResourceName == "" || !isExtended(v1.ResourceName(m.ResourceName)) || m.Endpoint == "" {
		a.log.Warn("device plugin refused: its resource must be an extended resource name and its endpoint a socket",
			"resource", m.ResourceName, "endpoint", m.Endpoint)
		return
	}
	if a.cfg.Dialer == nil {
		a.log.Warn("device plugin refused: this node takes no device plugins", "resource", m.ResourceName, "endpoint", m.Endpoint)
		return
	}
	reg := *m
	dialer := a.cfg.Dialer
	actorkit.Go(a.self, a.cfg.OpTimeout, func(ctx context.Context) (r *dialed) {
		defer func() {
			if p := recover(); p != nil {
				r = &dialed{reg: &reg, err: fmt.Errorf("dialer panicked: %v", p)}
			}
		}()
		prov, closer, err := dialer.Dial(ctx, reg.ResourceName, reg.Endpoint, reg.PreStartRequired, reg.GetPreferredAllocationAvailable)
		if err == nil && prov == nil {
			err = errors.New("the dialer returned no provider")
		}
		return &dialed{reg: &reg, prov: prov, close: closer, err: err}
	})
}

func (a *Actor) handleDialed(m *dialed) {
	name := m.reg.ResourceName
	if m.err != nil {
		a.log.Warn("device plugin dropped: dial failed", "resource", name, "endpoint", m.reg.Endpoint, "err", m.err)
		return
	}
	a.log.Info("device plugin registered", "resource", name, "endpoint", m.reg.Endpoint)
	a.sh.mu.Lock()
	old, had := a.sh.plugins[name]
	a.sh.plugins[name] = plugin{prov: m.prov, close: m.close}
	a.sh.mu.Unlock()
	if had {
		a.closePlugin(name, old)
	}
	a.addResource(name, m.prov, false)
}

func (a *Actor) handleInjectFault(ctx actor.Context, m *messages.InjectDeviceFault) {
	to := ctx.Sender()
	answer := func(err string) {
		if to != nil {
			ctx.Send(to, &messages.DeviceFaultInjected{Err: err})
		}
	}
	var r *resource
	for _, name := range sortedKeys(a.res) {
		if _, ok := a.res[name].devices[m.DeviceID]; ok {
			r = a.res[name]
			break
		}
	}
	if r == nil {
		answer(fmt.Sprintf("no device %q", m.DeviceID))
		return
	}
	fi, ok := r.prov.(FaultInjector)
	if !ok {
		answer(fmt.Sprintf("device %s (%s) is not simulated: its provider takes no injected fault", m.DeviceID, r.name))
		return
	}
	id, xid := m.DeviceID, m.Xid
	actorkit.Go(a.self, 0, func(context.Context) (r *faultDone) {
		defer func() {
			if p := recover(); p != nil {
				r = &faultDone{to: to, err: fmt.Errorf("fault injector panicked: %v", p)}
			}
		}()
		return &faultDone{to: to, err: fi.InjectXid(id, xid)}
	})
}

func (a *Actor) handleFaultDone(m *faultDone) {
	out := &messages.DeviceFaultInjected{}
	if m.err != nil {
		out.Err = m.err.Error()
	}
	a.self.SendTo(m.to, out)
}

// sample polls every Sampler off the mailbox (one poll per resource at a
// time).
func (a *Actor) sample() {
	for _, name := range sortedKeys(a.res) {
		r := a.res[name]
		s, ok := r.prov.(Sampler)
		if !ok || r.sampling {
			continue
		}
		r.sampling = true
		actorkit.GoIn(a.self, a.ctx, a.cfg.OpTimeout, func(ctx context.Context) (out *sampled) {
			defer func() {
				if p := recover(); p != nil {
					out = &sampled{resource: name, err: fmt.Errorf("sampler panicked: %v", p)}
				}
			}()
			v, err := s.Sample(ctx)
			return &sampled{resource: name, values: v, err: err}
		})
	}
}

func (a *Actor) handleSampled(m *sampled) {
	r := a.res[m.resource]
	if r == nil {
		return
	}
	r.sampling = false
	if m.err != nil {
		if msg := m.err.Error(); msg != r.sampleErr {
			a.log.Warn("device sampling failed", "resource", r.name, "err", m.err)
			r.sampleErr = msg
		}
		return
	}
	r.sampleErr = ""
	if a.cfg.Metrics == nil {
		return
	}
	owners := a.owners(r.name)
	now := map[string]bool{}
	for _, id := range sortedKeys(m.values) {
		now[id] = true
		a.cfg.Metrics.SetDeviceSample(r.name, id, owners[id], maps.Clone(m.values[id]))
	}
	for _, id := range sortedKeys(r.sampled) {
		if !now[id] {
			a.cfg.Metrics.DeleteDeviceSample(r.name, id)
		}
	}
	r.sampled = now
	a.setCounts(true)
}

// owners is who holds each allocated device of the resource: the last
// container in the pod's order (a regular container over the init
// container whose device it reuses).
func (a *Actor) owners(resource string) map[string]Owner {
	out := map[string]Owner{}
	for _, uid := range sortedKeys(a.pods) {
		p := a.pods[uid]
		for _, c := range p.Containers {
			for _, r := range c.Resources {
				if r.Resource != resource {
					continue
				}
				for _, id := range r.IDs {
					out[id] = Owner{Namespace: p.Namespace, Pod: p.Name, Container: c.Name}
				}
			}
		}
	}
	return out
}
