package dra

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// handleUnprepare unprepares the claims of a pod that is gone: a claim
// other pods still use only loses the pod; the last pod's going calls
// NodeUnprepareResources. A preparation in flight finishes first.
func (a *Actor) handleUnprepare(uid types.UID) {
	delete(a.pods, uid)
	if _, ok := a.gone[uid]; !ok {
		a.gone[uid] = 0
	}
	if a.ops[uid] != nil {
		return // after the op: finishPrepare or handleUnprepared come back here
	}
	batches := map[string][]*drapb.Claim{}
	var keys []string
	dropped := false
	for _, key := range slices.Sorted(maps.Keys(a.claims)) {
		ci := a.claims[key]
		if !ci.Pods[uid] {
			continue
		}
		if len(ci.Pods) > 1 {
			delete(ci.Pods, uid)
			dropped = true
			continue
		}
		ci.unpreparing = true
		keys = append(keys, key)
		for name := range ci.Drivers {
			batches[name] = append(batches[name], &drapb.Claim{Namespace: ci.Namespace, Uid: string(ci.UID), Name: ci.Name})
		}
	}
	if len(keys) == 0 {
		if dropped && a.save() != nil {
			// Not on disk: the pod keeps its references in the checkpoint;
			// tried again (a restart would find it and unprepare again).
			a.retryLater(uid, errors.New("checkpoint not written"), "")
			return
		}
		a.unprepareDone(uid)
		return
	}
	calls := map[string]Driver{}
	var missing error
	var missingDriver string
	for name := range batches {
		d := a.driver(name)
		if d == nil {
			missing, missingDriver = fmt.Errorf("DRA driver %s is not registered", name), name
			break
		}
		calls[name] = d.drv
	}
	a.ops[uid] = &podOp{unprepare: true, start: a.cfg.Clock.Now()}
	if missing != nil {
		a.self.Send(&unprepared{Tag: actorkit.Tag{Gen: a.self.Gen()}, uid: uid, keys: keys, err: missing, driver: missingDriver})
		return
	}
	actorkit.GoIn(a.self, a.ctx, 0, func(ctx context.Context) *unprepared {
		out := &unprepared{uid: uid, keys: keys}
		for _, name := range slices.Sorted(maps.Keys(batches)) {
			claims := batches[name]
			resp, err := calls[name].Unprepare(ctx, claims)
			if err != nil {
				out.err, out.driver = fmt.Errorf("NodeUnprepareResources: %w", err), name
				return out
			}
			for cuid, r := range resp.GetClaims() {
				i := slices.IndexFunc(claims, func(c *drapb.Claim) bool { return c.Uid == cuid })
				if i < 0 {
					out.err, out.driver = fmt.Errorf("NodeUnprepareResources returned result for unknown claim UID %s", cuid), name
					return out
				}
				if r.GetError() != "" {
					out.err, out.driver = fmt.Errorf("NodeUnprepareResources failed for ResourceClaim %s: %s", claims[i].Name, r.GetError()), name
					return out
				}
			}
			if n := len(claims) - len(resp.GetClaims()); n != 0 {
				out.err, out.driver = fmt.Errorf("NodeUnprepareResources skipped %d ResourceClaims", n), name
				return out
			}
		}
		return out
	})
}

// handleUnprepared drops the unprepared claims, or retries after back-off.
func (a *Actor) handleUnprepared(m *unprepared) {
	op := a.ops[m.uid]
	if op == nil || !op.unprepare {
		return
	}
	delete(a.ops, m.uid)
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.ObserveOperation(opUnprepare, a.cfg.Clock.Since(op.start), m.err != nil)
	}
	for _, key := range m.keys {
		if ci := a.claims[key]; ci != nil {
			ci.unpreparing = false
			if m.err == nil {
				delete(a.claims, key)
			}
		}
	}
	if m.err != nil {
		a.retryLater(m.uid, m.err, m.driver)
		return
	}
	if err := a.save(); err != nil {
		a.retryLater(m.uid, err, "")
		return
	}
	a.log.Debug("claims unprepared", "uid", m.uid, "claims", m.keys)
	a.unprepareDone(m.uid)
}

// retryLater unprepares the pod's claims again after back-off.
func (a *Actor) retryLater(uid types.UID, err error, driver string) {
	a.driverError(driver, "NodeUnprepareResources")
	n := a.gone[uid] + 1
	a.gone[uid] = n
	d := a.cfg.RetryBackoff.Delay(n)
	a.log.Warn("claims not unprepared: retrying", "uid", uid, "err", err, "attempt", n, "retryIn", d)
	a.self.After(d, &retryUnprepare{Tag: actorkit.Tag{Gen: a.self.Gen()}, uid: uid})
}

// unprepareDone ends a pod's unprepare and answers who waits for it.
func (a *Actor) unprepareDone(uid types.UID) {
	delete(a.gone, uid)
	for _, to := range a.unprepWaiters[uid] {
		a.self.SendTo(to, &messages.ClaimsUnprepared{UID: uid})
	}
	delete(a.unprepWaiters, uid)
}

// handlePodsKnown unprepares the claims of every pod the node no longer
// knows (upstream's reconcile loop over the active pods): a kill lost with
// a restart, a pod deleted while the agent was down.
func (a *Actor) handlePodsKnown(m *messages.PodsKnown) {
	stale := map[types.UID]bool{}
	for _, ci := range a.claims {
		for uid := range ci.Pods {
			if !m.UIDs[uid] && a.ops[uid] == nil {
				stale[uid] = true
			}
		}
	}
	for _, uid := range slices.Sorted(maps.Keys(stale)) {
		if _, retrying := a.gone[uid]; retrying {
			continue // its retry is armed
		}
		a.log.Info("unpreparing the claims of a pod that is gone", "uid", uid)
		a.handleUnprepare(uid)
	}
}

// handleRegistered connects to a driver; a registration on another
// endpoint replaces the earlier one.
func (a *Actor) handleRegistered(m *messages.DRADriverRegistered) {
	if a.cfg.Dialer == nil {
		a.log.Warn("DRA driver refused: no dialer wired", "driver", m.Driver)
		return
	}
	conn := &driverConn{name: m.Driver, endpoint: m.Endpoint}
	self := a.self
	drv, err := a.cfg.Dialer.Dial(m.Driver, m.Endpoint, m.Services, func(up bool) {
		self.Send(&connState{conn: conn, connected: up})
	})
	if err != nil {
		a.driverError(m.Driver, "Register")
		a.log.Error("DRA driver not usable", "driver", m.Driver, "endpoint", m.Endpoint, "err", err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	conn.drv, conn.stop = drv, stop
	a.sh.mu.Lock()
	old := a.sh.drivers[m.Driver]
	a.sh.drivers[m.Driver] = conn
	a.sh.mu.Unlock()
	if old != nil {
		old.close(a.log)
	}
	a.log.Info("DRA driver registered", "driver", m.Driver, "endpoint", m.Endpoint, "replaced", old != nil)
	// Usable once connected: a wipe pending since it went away waits for
	// that (and is cancelled then), as upstream.
	a.scheduleWipe(m.Driver)
	a.watchHealth(ctx, conn)
}

// handleConnState follows a driver's connection: connected, its slices
// stay; disconnected (a driver that died without removing its socket), its
// slices are deleted unless it comes back within WipeDelay.
func (a *Actor) handleConnState(m *connState) {
	if a.driver(m.conn.name) != m.conn || m.conn.connected == m.connected {
		return
	}
	m.conn.connected = m.connected
	if m.connected {
		delete(a.wipes, m.conn.name)
		return
	}
	a.log.Info("DRA driver disconnected", "driver", m.conn.name, "endpoint", m.conn.endpoint)
	a.scheduleWipe(m.conn.name)
}

// handleDeregistered drops a driver whose registration socket went; its
// ResourceSlices are deleted unless it comes back within WipeDelay.
func (a *Actor) handleDeregistered(m *messages.DRADriverDeregistered) {
	a.sh.mu.Lock()
	d := a.sh.drivers[m.Driver]
	if d == nil || d.endpoint != m.Endpoint {
		a.sh.mu.Unlock()
		return // replaced already
	}
	a.sh.drivers[m.Driver] = nil // away: known, not usable
	a.sh.mu.Unlock()
	d.close(a.log)
	a.log.Info("DRA driver deregistered", "driver", m.Driver, "endpoint", m.Endpoint)
	a.scheduleWipe(m.Driver)
}

// scheduleWipe arms the deletion of a driver's slices after WipeDelay,
// unless one is pending already (its time stands, as upstream).
func (a *Actor) scheduleWipe(driver string) {
	if a.cfg.Wiper == nil || a.cfg.WipeDelay < 0 || a.wipes[driver] != nil {
		return
	}
	a.wipeSeq++
	a.wipes[driver] = &wipeState{seq: a.wipeSeq}
	a.self.After(a.cfg.WipeDelay, &wipeDue{Tag: actorkit.Tag{Gen: a.self.Gen()}, driver: driver, seq: a.wipeSeq})
}

func (a *Actor) handleWipeDue(m *wipeDue) {
	w := a.wipes[m.driver]
	if w == nil || w.seq != m.seq {
		return // the driver came back
	}
	if d := a.driver(m.driver); m.driver != "" && d != nil && d.connected {
		delete(a.wipes, m.driver)
		return
	}
	a.startWipe(m.driver)
}

func (a *Actor) startWipe(driver string) {
	w := a.cfg.Wiper
	actorkit.GoIn(a.self, a.ctx, a.cfg.APITimeout, func(ctx context.Context) *wipeDone {
		return &wipeDone{driver: driver, err: w.WipeSlices(ctx, driver)}
	})
}

func (a *Actor) handleWipeDone(m *wipeDone) {
	w := a.wipes[m.driver]
	if w == nil {
		return
	}
	if m.err == nil || errors.Is(m.err, context.Canceled) {
		delete(a.wipes, m.driver)
		if m.err == nil {
			a.log.Info("ResourceSlices of the node deleted", "driver", driverLabel(m.driver))
		}
		return
	}
	w.attempts++
	d := a.cfg.RetryBackoff.Delay(w.attempts)
	a.log.Info("deleting ResourceSlices failed, retrying", "driver", driverLabel(m.driver), "err", m.err, "retryIn", d)
	a.self.After(d, &wipeDue{Tag: actorkit.Tag{Gen: a.self.Gen()}, driver: m.driver, seq: w.seq})
}

func driverLabel(d string) string {
	if d == "" {
		return "<all>"
	}
	return d
}
