package node

import (
	"context"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// Sweeper removes what pods leave on the node's disk (upstream's
// housekeeping: cleanupOrphanedPodDirs and the pod log directories of the
// container GC).
type Sweeper interface {
	// Sweep removes the directories of every pod not in keep and returns
	// the paths it removed. keep is the caller's to give away.
	Sweep(ctx context.Context, keep map[types.UID]bool) (removed []string, err error)
}

// Housekeeping defaults.
const (
	// DefaultHousekeepingPeriod is how often the directories of pods gone
	// are looked for (upstream's housekeeping runs every 2 s).
	DefaultHousekeepingPeriod = 10 * time.Second
	// sweepTimeout bounds one sweep.
	sweepTimeout = time.Minute
	// sweepSoon is when the first sweep of a NodeActor's incarnation is
	// tried, and tried again while the view is not complete: a NodeActor
	// that crashes more often than the period still sweeps.
	sweepSoon = time.Second
)

// swept is a sweep's result.
type swept struct {
	actorkit.Tag
	removed []string
	err     error
}

// housekeeping is the housekeeping part of the NodeActor: its periodic
// timer and whether a sweep is in flight.
type housekeeping struct {
	timer    actorkit.Timer
	sweeping bool
}

// step is what a housekeeping does once its timer fired: the delay to the
// next one (soon while the view is not complete, ready false: a NodeActor
// that crashes more often than the period still sweeps) and whether to
// sweep now (the view is complete and no sweep is in flight).
func (h *housekeeping) step(ready bool, period time.Duration) (next time.Duration, sweep bool) {
	if !ready {
		return min(sweepSoon, period), false
	}
	return period, !h.sweeping
}

// begin marks a sweep in flight; false when one is already.
func (h *housekeeping) begin() bool {
	if h.sweeping {
		return false
	}
	h.sweeping = true
	return true
}

// done marks the sweep in flight ended.
func (h *housekeeping) done() { h.sweeping = false }

// handleFired runs the periodic housekeeping step and arms the next one.
func (a *Actor) handleFired(m *actorkit.Fired) {
	if !a.house.timer.Fired(a.self, m) {
		return
	}
	next, sweep := a.house.step(a.sweepable(), a.cfg.HousekeepingPeriod)
	a.house.timer.Arm(a.self, next)
	if sweep {
		a.sweep()
	}
}

// sweepable: the view is complete (every source has delivered its state
// and the PLEG has listed the runtime).
func (a *Actor) sweepable() bool {
	return a.cfg.Sweeper != nil && a.table.haveRuntime && a.sources.allSynced()
}

// sweep starts a sweep off the mailbox unless one is in flight or the view
// is not complete yet: every source has delivered its state and the PLEG
// has listed the runtime, so a pod that exists is never swept, including
// after a crash of actorlet (what it left is found then).
func (a *Actor) sweep() {
	if !a.sweepable() || !a.house.begin() {
		return
	}
	keep := a.keep()
	// The StatusActor drops what no one knows any more (its own copy).
	known := make(map[types.UID]bool, len(keep))
	for uid := range keep {
		known[uid] = true
	}
	a.self.SendTo(a.cfg.status, &messages.PodsKnown{UIDs: known})
	if a.cfg.GC != nil {
		a.self.SendTo(a.cfg.GC, &messages.PodsKnown{UIDs: a.wantedPods()})
	}
	if a.cfg.devicesWired() {
		// The DevicesActor frees the devices of any other pod (a release
		// lost with a restart).
		a.self.SendTo(a.cfg.Devices, &messages.PodsKnown{UIDs: maps.Clone(known)})
	}
	if a.cfg.Claims != nil {
		// The ClaimsActor unprepares the claims of any other pod.
		a.self.SendTo(a.cfg.Claims, &messages.PodsKnown{UIDs: maps.Clone(known)})
	}
	if a.cfg.Cgroups != nil {
		a.self.SendTo(a.cfg.Cgroups, &messages.SweepPodCgroups{Active: a.activePods(), Keep: maps.Clone(known)})
	}
	sw := a.cfg.Sweeper
	actorkit.Go(a.self, sweepTimeout, func(ctx context.Context) *swept {
		removed, err := sw.Sweep(ctx, keep)
		return &swept{removed: removed, err: err}
	})
}

// keep is every pod that still exists: desired by a source (admitted or
// not), with anything in the runtime, or with a PodActor alive (killing
// and stopping included).
func (a *Actor) keep() map[types.UID]bool {
	keep := make(map[types.UID]bool, len(a.table.entries)+len(a.table.runtime))
	a.sources.addUIDs(keep)
	a.table.addUIDs(keep, true)
	return keep
}

// activePods are the pods admitted and not being killed.
func (a *Actor) activePods() []*v1.Pod {
	out := make([]*v1.Pod, 0, len(a.table.entries))
	for _, e := range a.table.entries {
		if e.admitted() {
			out = append(out, e.pod)
		}
	}
	return out
}

// wantedPods are the pods a source wants or a PodActor holds.
func (a *Actor) wantedPods() map[types.UID]bool {
	out := make(map[types.UID]bool, len(a.table.entries))
	a.sources.addUIDs(out)
	a.table.addUIDs(out, false)
	return out
}

func (a *Actor) handleSwept(m *swept) {
	if !a.self.Mine(m) {
		return
	}
	a.house.done()
	for _, path := range m.removed {
		a.cfg.log.Info("removed directory of a pod gone", "path", path)
	}
	if m.err != nil {
		a.cfg.log.Warn("housekeeping: pod directories", "err", m.err)
	}
}
