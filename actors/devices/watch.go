package devices

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// Watching providers: device lists, health, capacity and counts.

// addResource starts watching prov for the resource name, replacing the
// provider it had (its devices count until the new one lists).
func (a *Actor) addResource(name string, prov Provider, builtin bool) {
	r := a.res[name]
	if r == nil {
		r = &resource{name: name, health: map[string]bool{}, retry: actorkit.NewTimer("watch/" + name)}
		a.res[name] = r
	} else {
		a.stopWatch(r)
		r.retry.Stop()
		r.failures = 0
	}
	r.prov, r.builtin = prov, builtin
	a.startWatch(r)
}

func (a *Actor) stopWatch(r *resource) {
	if r.cancel != nil {
		r.cancel()
		r.cancel = nil
	}
	r.epoch = 0
}

// startWatch runs the provider's Watch in a goroutine of this incarnation:
// each list comes back as a devicesUpdate, its end as watchEnded.
func (a *Actor) startWatch(r *resource) {
	a.epochs++
	r.epoch = a.epochs
	wctx, cancel := context.WithCancel(a.ctx)
	r.cancel = cancel
	prov, name, epoch, self := r.prov, r.name, r.epoch, a.self
	tag := actorkit.Tag{Gen: self.Gen()}
	desc, _ := prov.(Describer)
	go func() {
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("provider panicked: %v", p)
				}
			}()
			return prov.Watch(wctx, func(devs []*pluginapi.Device, why string) {
				u := &devicesUpdate{Tag: tag, resource: name, epoch: epoch, why: why, devices: make([]devState, 0, len(devs))}
				for _, d := range devs {
					if d != nil {
						u.devices = append(u.devices, devState{id: d.GetID(), healthy: d.GetHealth() == pluginapi.Healthy})
					}
				}
				if desc != nil {
					l, an := desc.Describe()
					u.labels, u.annotations = maps.Clone(l), maps.Clone(an)
				}
				self.Send(u)
			})
		}()
		if wctx.Err() != nil {
			return // replaced or stopped: nobody waits for this end
		}
		self.Send(&watchEnded{Tag: tag, resource: name, epoch: epoch, err: err})
	}()
}

func (a *Actor) handleUpdate(m *devicesUpdate) {
	r := a.res[m.resource]
	if r == nil || r.epoch != m.epoch {
		return // a replaced provider's, or after its watch ended
	}
	devs := make(map[string]bool, len(m.devices))
	for _, d := range m.devices {
		if d.id != "" {
			devs[d.id] = d.healthy
		}
	}
	var turned []string
	for _, id := range sortedKeys(devs) {
		if was, seen := r.health[id]; seen && was && !devs[id] {
			turned = append(turned, id)
		}
		r.health[id] = devs[id]
	}
	r.devices, r.listed, r.failures = devs, true, 0
	r.labels, r.annotations = m.labels, m.annotations
	for _, id := range turned {
		a.log.Warn("device unhealthy", "resource", r.name, "device", id, "why", m.why)
		if a.cfg.Metrics != nil {
			a.cfg.Metrics.IncDeviceUnhealthy(r.name)
		}
		a.warnHolders(r.name, id, m.why)
	}
	a.publish()
}

// warnHolders records a Warning event on each pod holding the device.
func (a *Actor) warnHolders(resource, id, why string) {
	if a.cfg.Events == nil {
		return
	}
	if why == "" {
		why = "reported unhealthy by its provider"
	}
	for _, uid := range sortedKeys(a.pods) {
		p := a.pods[uid]
		var ctrs []string
		for _, c := range p.Containers {
			for _, r := range c.Resources {
				if r.Resource == resource && contains(r.IDs, id) {
					ctrs = append(ctrs, c.Name)
				}
			}
		}
		if len(ctrs) > 0 {
			a.cfg.Events.Eventf(podRef(p), v1.EventTypeWarning, ReasonDeviceUnhealthy,
				"Device %s (%s) of container %s is unhealthy: %s", id, resource, strings.Join(ctrs, ", "), why)
		}
	}
}

func podRef(p *podRecord) *v1.Pod {
	return &v1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID}}
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func (a *Actor) handleWatchEnded(m *watchEnded) {
	r := a.res[m.resource]
	if r == nil || r.epoch != m.epoch {
		return
	}
	a.stopWatch(r)
	err := m.err
	if err == nil {
		err = errors.New("watch ended")
	}
	r.failures++
	retry := a.cfg.RetryBackoff.Delay(r.failures)
	a.log.Warn("device provider failed: its devices count as gone until it lists again",
		"resource", r.name, "err", err, "retryIn", retry)
	r.devices, r.listed = nil, true
	r.retry.Arm(a.self, retry)
	a.publish()
}

func (a *Actor) handleFired(m *actorkit.Fired) {
	if m.Name == "sample" {
		if a.sampleTimer.Fired(a.self, m) {
			a.sample()
			a.sampleTimer.Arm(a.self, a.cfg.SamplePeriod)
		}
		return
	}
	if r := a.res[strings.TrimPrefix(m.Name, "watch/")]; r != nil && r.retry.Fired(a.self, m) {
		a.startWatch(r)
	}
}

// capacity is the count of every resource's devices, all and healthy,
// with the labels and annotations of its provider (merged in resource
// order).
func (a *Actor) capacity() *messages.DeviceCapacity {
	c := &messages.DeviceCapacity{Capacity: map[v1.ResourceName]int64{}, Allocatable: map[v1.ResourceName]int64{},
		Labels: map[string]string{}, Annotations: map[string]string{}, Ready: a.builtinListed()}
	for _, name := range sortedKeys(a.res) {
		r := a.res[name]
		var healthy int64
		for _, ok := range r.devices {
			if ok {
				healthy++
			}
		}
		if !a.draServes(name) { // DRA's devices are in its ResourceSlice
			c.Capacity[v1.ResourceName(name)] = int64(len(r.devices))
			c.Allocatable[v1.ResourceName(name)] = healthy
		}
		maps.Copy(c.Labels, r.labels)
		maps.Copy(c.Annotations, r.annotations)
	}
	return c
}

func copyCapacity(c *messages.DeviceCapacity) *messages.DeviceCapacity {
	return &messages.DeviceCapacity{Capacity: maps.Clone(c.Capacity), Allocatable: maps.Clone(c.Allocatable),
		Labels: maps.Clone(c.Labels), Annotations: maps.Clone(c.Annotations), Ready: c.Ready}
}

func equalCapacity(x, y *messages.DeviceCapacity) bool {
	return maps.Equal(x.Capacity, y.Capacity) && maps.Equal(x.Allocatable, y.Allocatable) &&
		maps.Equal(x.Labels, y.Labels) && maps.Equal(x.Annotations, y.Annotations) && x.Ready == y.Ready
}

// builtinListed: every built-in provider has listed its devices (or
// failed): the capacity is Ready, the NodeActor admits against it.
func (a *Actor) builtinListed() bool {
	for _, r := range a.res {
		if r.builtin && !r.listed {
			return false
		}
	}
	return true
}

// publish tells the subscribers the capacity when it changed (the first
// time once every built-in provider listed or failed) and sets the device
// counts.
func (a *Actor) publish() {
	a.draPublish()
	a.setCounts(false)
	if !a.initialSent && !a.builtinListed() {
		return
	}
	c := a.capacity()
	if a.initialSent && equalCapacity(c, a.lastSent) {
		return
	}
	a.initialSent, a.lastSent = true, c
	for _, sub := range a.cfg.Subscribers {
		a.self.SendTo(sub, copyCapacity(c))
	}
}

// setCounts sets each resource's device counts (only those that changed
// unless all).
func (a *Actor) setCounts(all bool) {
	if a.cfg.Metrics == nil {
		return
	}
	for _, name := range sortedKeys(a.res) {
		r := a.res[name]
		healthy := 0
		for _, ok := range r.devices {
			if ok {
				healthy++
			}
		}
		n := [3]int{len(r.devices), healthy, len(a.allocatedOf(name))}
		if old, ok := a.counts[name]; all || !ok || old != n {
			a.counts[name] = n
			a.cfg.Metrics.SetDevices(name, n[0], n[1], n[2])
		}
	}
}

// allocatedOf is the devices of the resource held by allocated pods.
func (a *Actor) allocatedOf(resource string) map[string]bool {
	out := map[string]bool{}
	for _, p := range a.pods {
		for _, c := range p.Containers {
			for _, r := range c.Resources {
				if r.Resource == resource {
					for _, id := range r.IDs {
						out[id] = true
					}
				}
			}
		}
	}
	a.draClaimed(resource, out)
	return out
}

// free is what each known resource can give a new pod: its healthy devices
// that no allocated pod holds and no pending one reserved, sorted.
func (a *Actor) free() map[string][]string {
	out := make(map[string][]string, len(a.res))
	for name, r := range a.res {
		if a.draServes(name) { // given through claims only
			continue
		}
		busy := a.allocatedOf(name)
		for _, pa := range a.pending {
			for _, id := range pa.reserved[name] {
				busy[id] = true
			}
		}
		ids := []string{}
		for id, ok := range r.devices {
			if ok && !busy[id] {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		out[name] = ids
	}
	return out
}
