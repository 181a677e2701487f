package node

import (
	"log/slog"
	"maps"
	goruntime "runtime"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/podspec"
)

// PodProps builds the props of the PodActor for uid (wiring supplies it).
type PodProps func(uid types.UID) *actor.Props

// Metrics is what the NodeActor reports. May be nil.
type Metrics interface {
	SetDesiredPods(static bool, n int)
}

// Config of the NodeActor.
type Config struct {
	NodeName string
	MaxPods  int
	// Sources that must deliver their first state before orphans (runtime
	// pods no source wants) are killed.
	Sources []string
	// SourcePIDs are asked to resend their pods when the NodeActor starts,
	// so a restarted NodeActor rebuilds its view.
	SourcePIDs []*actor.PID
	// Allocatable cpu, memory and ephemeral-storage: pods of every source
	// whose requests do not fit what the admitted pods leave are rejected
	// (OutOfcpu, OutOfmemory, OutOfephemeral-storage), as upstream (admit.go).
	// A resource missing: not checked.
	Allocatable v1.ResourceList
	// Sysctls are the sysctls pods may set (the safe ones and
	// --allowed-unsafe-sysctls): a pod asking for another is rejected
	// (SysctlForbidden), as upstream (admit.go). Nil: not checked.
	Sysctls *podspec.SysctlAllowlist
	// MaxParallelStarts bounds the pods starting at once (StartSlot); 0: no
	// bound.
	MaxParallelStarts int
	// NodeLabels are this node's labels (kubernetes.io/hostname, os, arch
	// and --node-labels): pods whose node selector or required node
	// affinity they do not match are rejected (NodeAffinity), as upstream.
	// Without kubernetes.io/os the node's is this machine's, as upstream.
	NodeLabels map[string]string
	// Sweeper removes the directories of pods gone, every
	// HousekeepingPeriod (default DefaultHousekeepingPeriod) on Clock
	// (default the real clock). Nil: nothing is removed.
	Sweeper            Sweeper
	HousekeepingPeriod time.Duration
	Clock              clock.WithDelayedExecution
	// RespawnBackoff (default DefaultRespawnBackoff), doubling up to
	// RespawnBackoffMax (default DefaultRespawnBackoffMax), is how long a
	// PodActor stopped by its supervisor stays down (respawn.go).
	RespawnBackoff, RespawnBackoffMax time.Duration
	// Events records events about pods (a PodActor stopped for failing
	// too often); nil: none. A recorder that remembers objects (cluster
	// mode's, which counts repeated events) and has Forget(uid) is told
	// when a pod's actor has stopped for good.
	Events Recorder
	// Devices is the DevicesActor: pods are admitted against the extended
	// resources it reports, and it is told when a pod's devices are free
	// (devices.go). Nil: extended resources are not checked.
	Devices *actor.PID
	// Claims is the ClaimsActor (DRA): told when a pod with ResourceClaims
	// is gone (UnprepareClaims) and, every housekeeping, which pods the
	// node knows (PodsKnown: the claims of any other are unprepared). Nil:
	// not told.
	Claims *actor.PID
	// GC is the container garbage collector: every housekeeping it is told
	// the pods a source wants or a PodActor holds (PodsKnown; not those
	// only left in the runtime: what is left of them is its to remove).
	// Nil: not told.
	GC *actor.PID
	// Cgroups is the CgroupActor: every housekeeping it is told the
	// active pods (the burstable QoS shares are their sum) and the pods
	// that still exist (SweepPodCgroups: the pod cgroup of any other is
	// removed). Nil: not told.
	Cgroups *actor.PID
	// DeviceWait bounds the wait for its first capacity (default
	// DefaultDeviceWait).
	DeviceWait time.Duration
	// Eviction is the EvictionActor: its EvictPods are carried out, and
	// pods are admitted under its NodePressure as upstream (evict.go); it
	// is asked for the pressure at start. Nil: no pressure is known.
	Eviction *actor.PID
	// AllocationStore keeps the pods' allocated resources (in-place
	// resize, allocation.go); nil: not checkpointed (a restarted agent
	// allocates what the pods ask for).
	AllocationStore AllocationStore
}

// withDefaults is cfg with every unset knob at its default; the node's
// labels get kubernetes.io/os (this machine's) when they lack it, on a
// copy: the caller's map is not written.
func (cfg Config) withDefaults() Config {
	if _, ok := cfg.NodeLabels[v1.LabelOSStable]; !ok {
		cfg.NodeLabels = maps.Clone(cfg.NodeLabels)
		if cfg.NodeLabels == nil {
			cfg.NodeLabels = map[string]string{}
		}
		cfg.NodeLabels[v1.LabelOSStable] = goruntime.GOOS
	}
	if cfg.HousekeepingPeriod <= 0 {
		cfg.HousekeepingPeriod = DefaultHousekeepingPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.DeviceWait <= 0 {
		cfg.DeviceWait = DefaultDeviceWait
	}
	if cfg.RespawnBackoff <= 0 {
		cfg.RespawnBackoff = DefaultRespawnBackoff
	}
	if cfg.RespawnBackoffMax < cfg.RespawnBackoff {
		cfg.RespawnBackoffMax = max(DefaultRespawnBackoffMax, cfg.RespawnBackoff)
	}
	return cfg
}

// settings is the configuration part of the NodeActor: what New was given,
// defaulted once, read only. It outlives the actor's incarnations (a
// restart keeps it; every other part starts over).
type settings struct {
	Config
	status   *actor.PID // the StatusActor
	podProps PodProps
	metrics  Metrics // nil: none
	log      *slog.Logger
	allocs   *allocSaver // writes the allocation checkpoint; nil: none
}

// newSettings checks and defaults what New was given.
func newSettings(cfg Config, status *actor.PID, podProps PodProps, m Metrics, log *slog.Logger) settings {
	if status == nil || podProps == nil {
		panic("node.New: status and podProps are required")
	}
	if log == nil {
		log = slog.Default()
	}
	return settings{Config: cfg.withDefaults(), status: status, podProps: podProps, metrics: m, log: log,
		allocs: newAllocSaver(cfg.AllocationStore)}
}

// devicesWired: a DevicesActor counts the extended resources.
func (s *settings) devicesWired() bool { return s.Devices != nil }

// reportDesired reports the desired pods, static and from the API server.
func (s *settings) reportDesired(static, api int) {
	if s.metrics == nil {
		return
	}
	s.metrics.SetDesiredPods(true, static)
	s.metrics.SetDesiredPods(false, api)
}
