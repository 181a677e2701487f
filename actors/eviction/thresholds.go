package eviction

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal is an eviction signal, named as upstream's --eviction-hard keys.
type Signal string

// The eviction signals actorlet observes (upstream's, without the
// containerfs ones, which follow nodefs or imagefs there).
const (
	SignalMemoryAvailable            Signal = "memory.available"
	SignalAllocatableMemoryAvailable Signal = "allocatableMemory.available"
	SignalNodeFsAvailable            Signal = "nodefs.available"
	SignalNodeFsInodesFree           Signal = "nodefs.inodesFree"
	SignalImageFsAvailable           Signal = "imagefs.available"
	SignalImageFsInodesFree          Signal = "imagefs.inodesFree"
	SignalPIDAvailable               Signal = "pid.available"
)

// Resources a signal is about, as upstream: memory, ephemeral-storage, and
// the two that are internal to eviction (inodes, pids).
const (
	resourceInodes v1.ResourceName = "inodes"
	resourcePids   v1.ResourceName = "pids"
)

// signalResource maps a signal to the resource it starves; it is also the
// set of valid signals.
var signalResource = map[Signal]v1.ResourceName{
	SignalMemoryAvailable:            v1.ResourceMemory,
	SignalAllocatableMemoryAvailable: v1.ResourceMemory,
	SignalNodeFsAvailable:            v1.ResourceEphemeralStorage,
	SignalNodeFsInodesFree:           resourceInodes,
	SignalImageFsAvailable:           v1.ResourceEphemeralStorage,
	SignalImageFsInodesFree:          resourceInodes,
	SignalPIDAvailable:               resourcePids,
}

// signalCondition maps a signal to the node condition it raises.
var signalCondition = map[Signal]v1.NodeConditionType{
	SignalMemoryAvailable:            v1.NodeMemoryPressure,
	SignalAllocatableMemoryAvailable: v1.NodeMemoryPressure,
	SignalNodeFsAvailable:            v1.NodeDiskPressure,
	SignalNodeFsInodesFree:           v1.NodeDiskPressure,
	SignalImageFsAvailable:           v1.NodeDiskPressure,
	SignalImageFsInodesFree:          v1.NodeDiskPressure,
	SignalPIDAvailable:               v1.NodePIDPressure,
}

// Signals lists the valid signals, sorted.
func Signals() []Signal {
	out := make([]Signal, 0, len(signalResource))
	for s := range signalResource {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Value is a threshold's value: a quantity, or a percentage (0..1] of the
// signal's capacity.
type Value struct {
	Quantity   *resource.Quantity
	Percentage float64
}

// Of is the value for a capacity, as upstream's GetThresholdQuantity.
func (v Value) Of(capacity resource.Quantity) resource.Quantity {
	if v.Quantity != nil {
		return v.Quantity.DeepCopy()
	}
	return *resource.NewQuantity(int64(float64(capacity.Value())*v.Percentage), resource.BinarySI)
}

// String is the value as written in the flags.
func (v Value) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	return strconv.FormatFloat(v.Percentage*100, 'f', -1, 64) + "%"
}

// Threshold is one eviction threshold: met when the signal's available
// amount is below Value. GracePeriod 0 is a hard threshold; a soft one
// must be met for GracePeriod without a break before it evicts.
// MinReclaim, when set, is what eviction goes on reclaiming beyond Value
// once the threshold was met (--eviction-minimum-reclaim).
type Threshold struct {
	Signal      Signal
	Value       Value
	GracePeriod time.Duration
	MinReclaim  *Value
}

// Hard reports whether the threshold evicts as soon as it is met.
func (t Threshold) Hard() bool { return t.GracePeriod == 0 }

// key tells thresholds apart: one hard and one soft per signal at most.
func (t Threshold) key() string {
	if t.Hard() {
		return string(t.Signal) + "/hard"
	}
	return string(t.Signal) + "/soft"
}

// String is the threshold as a flag would write it.
func (t Threshold) String() string {
	s := string(t.Signal) + "<" + t.Value.String()
	if !t.Hard() {
		s += " for " + t.GracePeriod.String()
	}
	return s
}

// DefaultHard is upstream's --eviction-hard default:
// memory.available<100Mi, nodefs.available<10%, imagefs.available<15%,
// nodefs.inodesFree<5%.
func DefaultHard() map[string]string {
	return map[string]string{
		string(SignalMemoryAvailable):  "100Mi",
		string(SignalNodeFsAvailable):  "10%",
		string(SignalImageFsAvailable): "15%",
		string(SignalNodeFsInodesFree): "5%",
	}
}

// ParseThresholds parses the eviction flags, as maps of signal to value
// (--eviction-hard "memory.available<100Mi,nodefs.available<10%" is
// {"memory.available": "100Mi", "nodefs.available": "10%"}):
// hard and soft thresholds (a quantity or a percentage; 0% and 100% are
// ignored, as upstream), the soft thresholds' grace periods (every soft
// threshold needs one) and the minimum reclaims. An error names the
// offending entry. The result is sorted: hard before soft, by signal.
func ParseThresholds(hard, soft, softGrace, minReclaim map[string]string) ([]Threshold, error) {
	hardT, err := parseStatements("eviction-hard", hard)
	if err != nil {
		return nil, err
	}
	softT, err := parseStatements("eviction-soft", soft)
	if err != nil {
		return nil, err
	}
	graces := map[Signal]time.Duration{}
	for _, name := range slices.Sorted(maps.Keys(softGrace)) {
		val := softGrace[name]
		sig, err := signalOf("eviction-soft-grace-period", name, val)
		if err != nil {
			return nil, err
		}
		d, err := time.ParseDuration(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("eviction-soft-grace-period %s=%q: %w", name, val, err)
		}
		if d <= 0 {
			return nil, fmt.Errorf("eviction-soft-grace-period %s=%q: must be positive", name, val)
		}
		graces[sig] = d
	}
	reclaims := map[Signal]Value{}
	for _, name := range slices.Sorted(maps.Keys(minReclaim)) {
		val := minReclaim[name]
		sig, err := signalOf("eviction-minimum-reclaim", name, val)
		if err != nil {
			return nil, err
		}
		v, err := parseValue(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("eviction-minimum-reclaim %s=%q: %w", name, val, err)
		}
		if v.Quantity == nil && v.Percentage <= 0 {
			return nil, fmt.Errorf("eviction-minimum-reclaim %s=%q: a percentage must be positive", name, val)
		}
		if v.Quantity != nil && v.Quantity.Sign() < 0 {
			return nil, fmt.Errorf("eviction-minimum-reclaim %s=%q: must not be negative", name, val)
		}
		reclaims[sig] = v
	}
	for i := range softT {
		d, ok := graces[softT[i].Signal]
		if !ok {
			return nil, fmt.Errorf("eviction-soft %s: a grace period must be given for it (--eviction-soft-grace-period)", softT[i].Signal)
		}
		softT[i].GracePeriod = d
	}
	out := append(hardT, softT...)
	for i := range out {
		if v, ok := reclaims[out[i].Signal]; ok {
			v := v
			out[i].MinReclaim = &v
		}
	}
	return out, nil
}

func signalOf(flag, name, val string) (Signal, error) {
	sig := Signal(strings.TrimSpace(name))
	if _, ok := signalResource[sig]; !ok {
		return "", fmt.Errorf("%s %s=%q: unsupported eviction signal %q (valid: %v)", flag, name, val, name, Signals())
	}
	return sig, nil
}

// parseStatements parses one flag's signal -> value map.
func parseStatements(flag string, m map[string]string) ([]Threshold, error) {
	var out []Threshold
	for _, name := range slices.Sorted(maps.Keys(m)) {
		val := m[name]
		sig, err := signalOf(flag, name, val)
		if err != nil {
			return nil, err
		}
		v := strings.TrimSpace(val)
		if v == "0%" || v == "100%" {
			continue // ignored, as upstream
		}
		value, err := parseValue(v)
		if err != nil {
			return nil, fmt.Errorf("%s %s=%q: %w", flag, name, val, err)
		}
		if value.Quantity != nil && value.Quantity.Sign() <= 0 {
			return nil, fmt.Errorf("%s %s=%q: the threshold must be positive", flag, name, val)
		}
		out = append(out, Threshold{Signal: sig, Value: value})
	}
	return out, nil
}

// parseValue parses "100Mi" or "10%".
func parseValue(s string) (Value, error) {
	if pct, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
		if err != nil || math.IsNaN(f) {
			return Value{}, fmt.Errorf("not a percentage: %q", s)
		}
		if f < 0 || f > 100 {
			return Value{}, fmt.Errorf("percentage %q out of range [0%%, 100%%]", s)
		}
		return Value{Percentage: f / 100}, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return Value{}, fmt.Errorf("not a quantity or a percentage: %w", err)
	}
	return Value{Quantity: &q}, nil
}

// HardEvictionReservation is what the hard thresholds keep out of the
// node's capacity for its allocatable, as upstream's
// hardEvictionReservation: memory.available's amount of memory and
// nodefs.available's of ephemeral-storage (a percentage of the capacity
// given).
func HardEvictionReservation(ts []Threshold, capacity v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for _, t := range ts {
		if !t.Hard() {
			continue
		}
		var name v1.ResourceName
		switch t.Signal {
		case SignalMemoryAvailable:
			name = v1.ResourceMemory
		case SignalNodeFsAvailable:
			name = v1.ResourceEphemeralStorage
		default:
			continue
		}
		c, ok := capacity[name]
		if t.Value.Quantity == nil && !ok {
			continue // a percentage of an unknown capacity
		}
		out[name] = t.Value.Of(c)
	}
	return out
}
