package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/actors/eviction"
	"github.com/actorlet/actorlet/adapters/host"
)

// signalMap is an eviction flag of "signal<value" pairs, as upstream's
// --eviction-hard and --eviction-soft
// ("memory.available<100Mi,nodefs.available<10%").
type signalMap struct {
	m   map[string]string
	set bool
}

func (s *signalMap) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.m)) {
		parts = append(parts, k+"<"+s.m[k])
	}
	return strings.Join(parts, ",")
}

func (s *signalMap) Set(v string) error {
	if !s.set {
		s.m, s.set = map[string]string{}, true
	}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, val, ok := strings.Cut(part, "<")
		if !ok || strings.TrimSpace(k) == "" || strings.TrimSpace(val) == "" {
			return fmt.Errorf("%q: want signal<value, e.g. memory.available<100Mi", part)
		}
		s.m[strings.TrimSpace(k)] = strings.TrimSpace(val)
	}
	return nil
}

func (s *signalMap) Type() string { return "signal<value,..." }

// thresholds parses the eviction flags: --eviction-hard not given is
// upstream's default (memory.available<100Mi, nodefs.available<10%,
// imagefs.available<15%, nodefs.inodesFree<5%); given, it is exactly what
// it says (empty: no hard threshold).
func (o *options) thresholds() ([]eviction.Threshold, error) {
	hard := eviction.DefaultHard()
	if o.EvictionHard.set {
		hard = o.EvictionHard.m
	}
	return eviction.ParseThresholds(hard, o.EvictionSoft.m, o.EvictionSoftGracePeriod, o.EvictionMinimumReclaim)
}

// evictionHard is what the hard eviction thresholds keep out of capacity
// (memory.available's amount of memory, nodefs.available's of
// ephemeral-storage): the same for admission and for the Node's
// allocatable, as upstream.
func (o *options) evictionHard(capacity v1.ResourceList) v1.ResourceList {
	ts, _ := o.thresholds() // validated with the flags
	return eviction.HardEvictionReservation(ts, capacity)
}

// evictionActor is the EvictionActor: the stats provider's Summary every
// 10 s (sooner when the kernel's memory threshold notifier fires),
// pressure conditions to the NodeActor and the NodeStatusActor, disk
// reclaimed through the gc and image actors, pods evicted through the
// NodeActor.
func evictionActor(w *wiring) actor.Producer {
	ts, _ := w.o.thresholds() // validated with the flags
	subs := []*actor.PID{w.pid("node")}
	if w.cluster != nil {
		subs = append(subs, w.pid("nodestatus"))
	}
	return eviction.New(eviction.Config{
		Thresholds:               ts,
		PressureTransitionPeriod: w.o.EvictionPressureTransitionPeriod,
		MaxPodGracePeriodSeconds: int64(w.o.EvictionMaxPodGracePeriod),
		// The simulated runtime's image filesystem is its own
		// (--imagefs-capacity); containerd's is taken as the node's.
		DedicatedImageFs: w.rt.sim != nil,
		Clock:            w.clk,
		Stats:            w.stats,
		Status:           w.pid("status"), Node: w.pid("node"), Images: w.pid("images"), ContainerGC: w.pid("gc"),
		Subscribers: subs,
		NodeName:    w.name,
		Events:      w.cluster.recorder(w.log),
		Metrics:     w.m,
		MemoryNotifier: func() (eviction.MemoryNotifier, error) {
			if w.rt.sim != nil {
				return nil, fmt.Errorf("the simulated node's memory is not a cgroup's")
			}
			n, err := host.NewMemoryThresholdNotifier("")
			if err != nil {
				return nil, err // a literal nil notifier with it
			}
			return n, nil
		},
	}, w.log)
}
