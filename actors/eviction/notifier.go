package eviction

import (
	"context"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/actorlet/actorlet/internal/actorkit"
)

// The faster path on memory, as upstream's memoryThresholdNotifier: the
// kernel is asked to signal when the root memory cgroup's usage crosses
// capacity - threshold + inactive file (that is, when the working set
// reaches the threshold), for each memory.available threshold; a goroutine
// of the actor waits for it and sends memoryCrossed, which starts a pass
// at once instead of at the next period. The usage thresholds follow the
// Summary (at most every notifierRefresh). Where the kernel cannot tell
// (cgroup v2, no access to the memory cgroup, the simulated runtime), the
// notifier's constructor fails, the actor logs it once and relies on the
// housekeeping period.

// notifierRetry paces the waiting goroutine after a failed Wait.
const notifierRetry = time.Second

// startNotifier makes this incarnation's notifier and its goroutine.
func (a *Actor) startNotifier() {
	if !a.hasMemoryThreshold() {
		return
	}
	if a.cfg.MemoryNotifier == nil {
		a.log.Info("no memory threshold notifier: memory is checked every housekeeping period", "period", a.cfg.HousekeepingPeriod)
		return
	}
	n, err := a.cfg.MemoryNotifier()
	if err != nil || n == nil {
		a.log.Info("no memory threshold notifier: memory is checked every housekeeping period", "period", a.cfg.HousekeepingPeriod, "reason", err)
		return
	}
	a.notifier, a.notifierUpdated = n, time.Time{}
	ctx, cancel := context.WithCancel(context.Background())
	a.notifierCancel = cancel
	self, clk, log := a.self, a.cfg.Clock, a.log
	go func() {
		for {
			err := n.Wait(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				log.Debug("memory threshold notifier", "err", err)
				select {
				case <-ctx.Done():
					return
				case <-clk.After(notifierRetry):
				}
				continue
			}
			self.Send(&memoryCrossed{Tag: actorkit.Tag{Gen: self.Gen()}})
		}
	}()
	a.log.Info("memory threshold notifier started")
}

func (a *Actor) hasMemoryThreshold() bool {
	for _, t := range a.cfg.Thresholds {
		if t.Signal == SignalMemoryAvailable {
			return true
		}
	}
	return false
}

// updateNotifier sets the kernel's usage thresholds from a Summary (off
// the mailbox: they are cgroup file writes).
func (a *Actor) updateNotifier(s *statsapi.Summary) {
	if a.notifier == nil {
		return
	}
	now := a.cfg.Clock.Now()
	if !a.notifierUpdated.IsZero() && now.Sub(a.notifierUpdated) < notifierRefresh {
		return
	}
	usage := usageThresholds(a.cfg.Thresholds, s)
	if len(usage) == 0 {
		return
	}
	a.notifierUpdated = now
	n := a.notifier
	actorkit.Go(a.self, 0, func(context.Context) *notifierSet {
		return &notifierSet{err: n.SetThresholds(usage)}
	})
}

// usageThresholds are the root memory cgroup usages at which each
// memory.available threshold is crossed: capacity - threshold + inactive
// file (usage - working set), as upstream's UpdateThreshold.
func usageThresholds(ts []Threshold, s *statsapi.Summary) []int64 {
	m := s.Node.Memory
	if m == nil || m.UsageBytes == nil || m.WorkingSetBytes == nil || m.AvailableBytes == nil {
		return nil
	}
	var out []int64
	capacity := bytesQ(*m.AvailableBytes + *m.WorkingSetBytes)
	inactive := int64(0)
	if *m.UsageBytes > *m.WorkingSetBytes {
		inactive = int64(*m.UsageBytes - *m.WorkingSetBytes)
	}
	for _, t := range ts {
		if t.Signal != SignalMemoryAvailable {
			continue
		}
		q := t.Value.Of(capacity)
		if v := capacity.Value() - q.Value() + inactive; v > 0 {
			out = append(out, v)
		}
	}
	return out
}
