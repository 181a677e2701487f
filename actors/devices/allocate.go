package devices

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// Allocation: AllocateDevices -> a plan checked at once -> the providers'
// preferences (off the mailbox) -> the plan checked again and its devices
// reserved -> Allocate and PreStart (off the mailbox) -> recorded ->
// checkpoint saved (off the mailbox) -> reply.

func (a *Actor) handleAllocate(ctx actor.Context, m *messages.AllocateDevices) {
	to := m.ReplyTo
	if to == nil {
		to = ctx.Sender()
	}
	if m.Pod == nil || m.Pod.UID == "" {
		a.log.Warn("AllocateDevices without a pod or its UID")
		a.reply([]*actor.PID{to}, func() *messages.DevicesAllocated {
			return &messages.DevicesAllocated{Reason: ReasonUnexpectedAdmissionError,
				Message: "Allocate failed due to a request without a pod UID, which is unexpected"}
		})
		return
	}
	uid := m.Pod.UID
	if p := a.pods[uid]; p != nil {
		a.reply([]*actor.PID{to}, p.reply)
		return
	}
	if pa := a.pending[uid]; pa != nil {
		pa.waiters = append(pa.waiters, to)
		return
	}
	needs := podNeeds(m.Pod, func(r string) bool { _, ok := a.res[r]; return ok })
	if len(needs) == 0 {
		a.reply([]*actor.PID{to}, func() *messages.DevicesAllocated {
			return &messages.DevicesAllocated{UID: uid, Containers: map[string]messages.ContainerDevices{}}
		})
		return
	}
	free := a.free()
	if _, err := makePlan(needs, free, nil); err != nil {
		a.refuse(uid, m.Pod.Namespace, m.Pod.Name, []*actor.PID{to}, err)
		return
	}
	a.nextOp++
	pa := &pendingAlloc{op: a.nextOp, uid: uid, namespace: m.Pod.Namespace, name: m.Pod.Name, needs: needs, waiters: []*actor.PID{to}}
	a.pending[uid] = pa

	provs := a.providersOf(needs)
	log := a.log.With("pod", pa.namespace+"/"+pa.name)
	op := pa.op
	actorkit.GoIn(a.self, a.ctx, a.cfg.OpTimeout, func(ctx context.Context) (out *preferred) {
		defer func() {
			if p := recover(); p != nil {
				out = &preferred{uid: uid, op: op, err: fmt.Errorf("provider panicked: %v", p)}
			}
		}()
		pl, err := makePlan(needs, free, func(res string, available, must []string, size int) []string {
			ids, err := provs[res].PreferredAllocation(ctx, available, must, size)
			if err != nil {
				log.Warn("preferred allocation failed: devices picked in ID order", "resource", res, "err", err)
				return nil
			}
			return ids
		})
		return &preferred{uid: uid, op: op, plan: pl, err: err}
	})
}

func (a *Actor) providersOf(needs []containerNeed) map[string]Provider {
	out := map[string]Provider{}
	for _, c := range needs {
		for res := range c.req {
			if r := a.res[res]; r != nil {
				out[res] = r.prov
			}
		}
	}
	return out
}

// handlePreferred takes the plan with the providers' preferences if its
// devices are still free, else plans again in ID order; reserves its
// devices and starts allocating them.
func (a *Actor) handlePreferred(m *preferred) {
	pa := a.pending[m.uid]
	if pa == nil || pa.op != m.op {
		return // released meanwhile
	}
	pl := m.plan
	if m.err != nil || !a.stillFree(pl) {
		var err error
		if pl, err = makePlan(pa.needs, a.free(), nil); err != nil {
			delete(a.pending, pa.uid)
			a.refuse(pa.uid, pa.namespace, pa.name, pa.waiters, err)
			return
		}
	}
	pa.reserved = pl.devicesOf()

	provs := a.providersOf(pa.needs)
	needs, uid, op := pa.needs, pa.uid, pa.op
	actorkit.GoIn(a.self, a.ctx, a.cfg.OpTimeout, func(ctx context.Context) (out *allocated) {
		defer func() {
			if p := recover(); p != nil {
				out = &allocated{uid: uid, op: op, err: fmt.Errorf("provider panicked: %v", p)}
			}
		}()
		recs := make([]*containerRecord, 0, len(needs))
		for _, c := range needs {
			cr := &containerRecord{Name: c.name}
			for _, res := range sortedKeys(pl[c.name]) {
				ids := pl[c.name][res]
				resp, err := provs[res].Allocate(ctx, ids)
				if err != nil {
					return &allocated{uid: uid, op: op, err: fmt.Errorf("allocate %s for container %s: %w", res, c.name, err)}
				}
				if err := provs[res].PreStart(ctx, ids); err != nil {
					return &allocated{uid: uid, op: op, err: fmt.Errorf("pre-start %s for container %s: %w", res, c.name, err)}
				}
				cr.Resources = append(cr.Resources, newResourceRecord(res, ids, resp))
			}
			recs = append(recs, cr)
		}
		return &allocated{uid: uid, op: op, containers: recs}
	})
}

// stillFree reports whether every device of the plan can still be given.
func (a *Actor) stillFree(pl plan) bool {
	free := a.free()
	for res, ids := range pl.devicesOf() {
		ok := map[string]bool{}
		for _, id := range free[res] {
			ok[id] = true
		}
		for _, id := range ids {
			if !ok[id] {
				return false
			}
		}
	}
	return true
}

func (a *Actor) handleAllocated(m *allocated) {
	pa := a.pending[m.uid]
	if pa == nil || pa.op != m.op {
		return // released meanwhile: its reservation is gone with it
	}
	delete(a.pending, m.uid)
	if m.err != nil {
		a.refuse(pa.uid, pa.namespace, pa.name, pa.waiters, m.err)
		return
	}
	rec := &podRecord{UID: pa.uid, Namespace: pa.namespace, Name: pa.name, Containers: m.containers, sweep: a.sweeps}
	a.pods[pa.uid] = rec
	a.log.Info("devices allocated", "pod", pa.namespace+"/"+pa.name, "uid", pa.uid)
	a.save(saveWaiter{rec: rec, to: pa.waiters})
	a.setCounts(false)
}

// refuse answers a pod that cannot have its devices, as upstream's
// admission does.
func (a *Actor) refuse(uid types.UID, namespace, name string, to []*actor.PID, err error) {
	msg := fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)
	a.log.Info("devices refused", "pod", namespace+"/"+name, "uid", uid, "reason", msg)
	a.reply(to, func() *messages.DevicesAllocated {
		return &messages.DevicesAllocated{UID: uid, Reason: ReasonUnexpectedAdmissionError, Message: msg}
	})
}

// reply sends each of to its own answer made by mk.
func (a *Actor) reply(to []*actor.PID, mk func() *messages.DevicesAllocated) {
	for _, pid := range to {
		if pid != nil {
			a.self.SendTo(pid, mk())
		}
	}
}

func (a *Actor) handleRelease(m *messages.ReleaseDevices) {
	delete(a.pending, m.UID)
	if _, ok := a.pods[m.UID]; !ok {
		return
	}
	delete(a.pods, m.UID)
	a.log.Info("devices released", "uid", m.UID)
	a.save()
	a.setCounts(false)
}

// handlePodsKnown drops the allocations of pods the NodeActor no longer
// knows. A pod allocated since the previous PodsKnown is kept this time:
// the NodeActor may have taken its list before the pod was asked for.
func (a *Actor) handlePodsKnown(m *messages.PodsKnown) {
	dropped := 0
	for uid, p := range a.pods {
		if !m.UIDs[uid] && p.sweep < a.sweeps {
			delete(a.pods, uid)
			dropped++
		}
	}
	a.sweeps++
	if dropped > 0 {
		a.log.Info("devices of pods no longer known released", "pods", dropped)
		a.save()
		a.setCounts(false)
	}
}

// save writes the checkpoint off the mailbox, one write at a time (a
// change during a write is saved by the next one); the waiters are
// answered once their allocation is written.
func (a *Actor) save(w ...saveWaiter) {
	a.saveWaiters = append(a.saveWaiters, w...)
	a.dirty = true
	if !a.saving {
		a.startSave()
	}
}

func (a *Actor) startSave() {
	waiters := a.saveWaiters
	a.saveWaiters, a.dirty = nil, false
	data, err := encodeCheckpoint(a.pods)
	if err != nil {
		a.handleSaved(&saved{waiters: waiters, err: err})
		return
	}
	a.saving = true
	sv, seq := a.sh.saver, a.sh.saver.next()
	actorkit.Go(a.self, 0, func(context.Context) *saved {
		return &saved{waiters: waiters, err: sv.save(seq, data)}
	})
}

// handleSaved answers the pods whose allocation was written. When the
// write failed their allocation is dropped and they are refused, as
// upstream's device manager refuses a pod whose checkpoint it cannot write.
func (a *Actor) handleSaved(m *saved) {
	a.saving = false
	if m.err != nil {
		a.log.Error("device checkpoint not written", "err", m.err)
	}
	for _, w := range m.waiters {
		if m.err == nil {
			a.reply(w.to, w.rec.reply)
			continue
		}
		if a.pods[w.rec.UID] == w.rec {
			delete(a.pods, w.rec.UID)
			a.dirty = true
		}
		a.refuse(w.rec.UID, w.rec.Namespace, w.rec.Name, w.to, fmt.Errorf("writing the device checkpoint: %w", m.err))
	}
	if m.err != nil {
		a.setCounts(false)
	}
	if a.dirty {
		a.startSave()
	}
}
