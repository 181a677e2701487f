package eviction

import (
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// observation is one signal as the Summary shows it.
type observation struct {
	available, capacity resource.Quantity
	time                time.Time
}

// observations are the signals of one Summary.
type observations map[Signal]observation

// observe derives the signals from a Summary, as upstream's
// makeSignalObservations: memory.available is the node's available bytes
// (capacity: available + working set), allocatableMemory.available the
// "pods" system container's, the fs signals the node fs and the runtime's
// image fs, pid.available the rlimit's max minus the running processes.
func observe(s *statsapi.Summary) observations {
	out := observations{}
	if s == nil {
		return out
	}
	if m := s.Node.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
		out[SignalMemoryAvailable] = observation{
			available: bytesQ(*m.AvailableBytes),
			capacity:  bytesQ(*m.AvailableBytes + *m.WorkingSetBytes),
			time:      m.Time.Time,
		}
	}
	for _, c := range s.Node.SystemContainers {
		if c.Name != statsapi.SystemContainerPods {
			continue
		}
		if m := c.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
			out[SignalAllocatableMemoryAvailable] = observation{
				available: bytesQ(*m.AvailableBytes),
				capacity:  bytesQ(*m.AvailableBytes + *m.WorkingSetBytes),
				time:      m.Time.Time,
			}
		}
	}
	fsObservations(out, s.Node.Fs, SignalNodeFsAvailable, SignalNodeFsInodesFree)
	if s.Node.Runtime != nil {
		fsObservations(out, s.Node.Runtime.ImageFs, SignalImageFsAvailable, SignalImageFsInodesFree)
	}
	if r := s.Node.Rlimit; r != nil && r.MaxPID != nil && r.NumOfRunningProcesses != nil {
		out[SignalPIDAvailable] = observation{
			available: *resource.NewQuantity(*r.MaxPID-*r.NumOfRunningProcesses, resource.DecimalSI),
			capacity:  *resource.NewQuantity(*r.MaxPID, resource.DecimalSI),
			time:      r.Time.Time,
		}
	}
	return out
}

func fsObservations(out observations, fs *statsapi.FsStats, bytesSig, inodesSig Signal) {
	if fs == nil {
		return
	}
	if fs.AvailableBytes != nil && fs.CapacityBytes != nil {
		out[bytesSig] = observation{available: bytesQ(*fs.AvailableBytes), capacity: bytesQ(*fs.CapacityBytes), time: fs.Time.Time}
	}
	if fs.InodesFree != nil && fs.Inodes != nil {
		out[inodesSig] = observation{
			available: *resource.NewQuantity(int64(*fs.InodesFree), resource.DecimalSI),
			capacity:  *resource.NewQuantity(int64(*fs.Inodes), resource.DecimalSI),
			time:      fs.Time.Time,
		}
	}
}

func bytesQ(n uint64) resource.Quantity {
	if n > 1<<62 {
		n = 1 << 62
	}
	return *resource.NewQuantity(int64(n), resource.BinarySI)
}

// thresholdsMet are the thresholds whose signal is below their value
// (plus their minimum reclaim when enforceMinReclaim), whatever their
// grace period; a signal the Summary does not show meets nothing.
func thresholdsMet(ts []Threshold, obs observations, enforceMinReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range ts {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		q := t.Value.Of(o.capacity)
		if enforceMinReclaim && t.MinReclaim != nil {
			q.Add(t.MinReclaim.Of(o.capacity))
		}
		if q.Cmp(o.available) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// mergeThresholds is a with the thresholds of b it lacks.
func mergeThresholds(a, b []Threshold) []Threshold {
	have := map[string]bool{}
	for _, t := range a {
		have[t.key()] = true
	}
	for _, t := range b {
		if !have[t.key()] {
			a = append(a, t)
			have[t.key()] = true
		}
	}
	return a
}

// conditionsOf are the node conditions the thresholds raise.
func conditionsOf(ts []Threshold) map[v1.NodeConditionType]bool {
	out := map[v1.NodeConditionType]bool{}
	for _, t := range ts {
		out[signalCondition[t.Signal]] = true
	}
	return out
}

// signalsOf are the thresholds' signals, sorted, once each.
func signalsOf(ts []Threshold) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range ts {
		if !seen[string(t.Signal)] {
			seen[string(t.Signal)] = true
			out = append(out, string(t.Signal))
		}
	}
	sort.Strings(out)
	return out
}

// state is what one pass carries to the next: when each threshold was
// first seen met (without a break), when each condition was last
// observed, the thresholds met past their grace period (their minimum
// reclaim is enforced until they clear) and the last observations.
type state struct {
	firstObserved map[string]time.Time
	lastObserved  map[v1.NodeConditionType]time.Time
	met           []Threshold
	last          observations
}

func newState() state {
	return state{firstObserved: map[string]time.Time{}, lastObserved: map[v1.NodeConditionType]time.Time{}}
}

// decision is what a pass makes of the observations.
type decision struct {
	// conditions: raised now or within the transition period.
	conditions map[v1.NodeConditionType]bool
	// signals met now (grace periods aside).
	signals []string
	// act: thresholds met past their grace period, with stats newer than
	// the previous pass's, in eviction order (memory first).
	act []Threshold
	// met: all thresholds met past their grace period.
	met []Threshold
}

// synchronize is upstream's synchronize without its side effects: the
// thresholds met now (or not yet reclaimed down to their minimum
// reclaim), their first observations (a soft threshold acts only once
// met for its whole grace period), and the node conditions held for the
// transition period. It updates st.
func synchronize(st *state, ts []Threshold, obs observations, now time.Time, transition time.Duration) decision {
	met := thresholdsMet(ts, obs, false)
	if len(st.met) > 0 {
		met = mergeThresholds(met, thresholdsMet(st.met, obs, true))
	}
	first := map[string]time.Time{}
	for _, t := range met {
		at, ok := st.firstObserved[t.key()]
		if !ok {
			at = now
		}
		first[t.key()] = at
	}
	last := map[v1.NodeConditionType]time.Time{}
	for c, at := range st.lastObserved {
		last[c] = at
	}
	for c := range conditionsOf(met) {
		last[c] = now
	}
	conds := map[v1.NodeConditionType]bool{}
	for c, at := range last {
		if at.Equal(now) || now.Sub(at) < transition {
			conds[c] = true
		} else {
			delete(last, c)
		}
	}
	var graced []Threshold
	for _, t := range met {
		if now.Sub(first[t.key()]) >= t.GracePeriod {
			graced = append(graced, t)
		}
	}
	var act []Threshold
	for _, t := range graced {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		prev, seen := st.last[t.Signal]
		if !seen || o.time.IsZero() || o.time.After(prev.time) {
			act = append(act, t)
		}
	}
	sortByEvictionPriority(act)
	st.firstObserved, st.lastObserved, st.met, st.last = first, last, graced, obs
	return decision{conditions: conds, signals: signalsOf(met), act: act, met: graced}
}

// sortByEvictionPriority puts memory first, then the others in their
// order (stable), as upstream's byEvictionPriority.
func sortByEvictionPriority(ts []Threshold) {
	sort.SliceStable(ts, func(i, j int) bool {
		return isMemory(ts[i].Signal) && !isMemory(ts[j].Signal)
	})
}

func isMemory(s Signal) bool {
	return s == SignalMemoryAvailable || s == SignalAllocatableMemoryAvailable
}

// isDisk: a signal of the node or image filesystem.
func isDisk(s Signal) bool {
	return signalCondition[s] == v1.NodeDiskPressure
}
