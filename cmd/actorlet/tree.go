package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/actors/node"
	"github.com/actorlet/actorlet/actors/nodestatus"
	"github.com/actorlet/actorlet/actors/pleg"
	"github.com/actorlet/actorlet/actors/pod"
	"github.com/actorlet/actorlet/actors/probe"
	"github.com/actorlet/actorlet/actors/source"
	"github.com/actorlet/actorlet/actors/volume"
	"github.com/actorlet/actorlet/adapters/cri"
	"github.com/actorlet/actorlet/adapters/host"
	"github.com/actorlet/actorlet/adapters/manifest"
	"github.com/actorlet/actorlet/adapters/metrics"
	"github.com/actorlet/actorlet/adapters/nvml"
	"github.com/actorlet/actorlet/adapters/podfiles"
	"github.com/actorlet/actorlet/adapters/prober"
	"github.com/actorlet/actorlet/adapters/stats"
	volumefiles "github.com/actorlet/actorlet/adapters/volume"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/supervisors"
)

// treeActors is the actor tree under the root, in spawn order (docs/DESIGN.md
// draws it): adding an actor to actorlet is adding its line here and its
// build function below.
func treeActors(w *wiring) []treeActor {
	standalone := w.cluster == nil
	return []treeActor{
		{name: "status", build: w.cluster.statusActor},
		{name: "images", build: imageActor},
		{name: "source-file", source: messages.SourceFile, off: w.o.PodManifestPath == "", build: fileSource},
		{name: "source-url", source: messages.SourceURL, off: w.o.ManifestURL == "", build: urlSource},
		{name: "volumes", build: volumeActor},
		{name: "devices", build: devicesActor},
		{name: "dra", build: draActor},
		{name: "gc", build: gcActor},
		{name: "eviction", build: evictionActor},
		{name: "cgroups", off: w.cgroups == nil, build: cgroupsActor},
		{name: "source-api", source: messages.SourceAPI, off: standalone, build: w.cluster.apiSource},
		{name: "node", build: nodeActor},
		{name: "pleg", build: plegActor},
		{name: "source-push", source: messages.SourcePush, build: pushSource},
		{name: "nodestatus", off: standalone, build: w.cluster.nodeStatusActor},
	}
}

// treeActor is one child of the root actor.
type treeActor struct {
	name string
	// source is the pod source the actor is (messages.Source*), "" for the
	// others: the node waits for every source's first state.
	source string
	// off leaves the actor out of this configuration.
	off bool
	// build returns the actor's producer. It runs once the actors of the
	// tree are known (the node needs the sources).
	build func(*wiring) actor.Producer
}

// sourceOrder is the order in which the node's config and the start log
// list the pod sources.
var sourceOrder = []string{messages.SourcePush, messages.SourceFile, messages.SourceURL, messages.SourceAPI}

// plan returns the actors that are on, in spawn order, and the pod sources
// among them (their source names and actor names, in sourceOrder).
func plan(all []treeActor) (on []treeActor, sources, sourceActors []string) {
	var srcs []treeActor
	for _, a := range all {
		if a.off {
			continue
		}
		on = append(on, a)
		if a.source != "" {
			srcs = append(srcs, a)
		}
	}
	rank := func(a treeActor) int {
		if i := slices.Index(sourceOrder, a.source); i >= 0 {
			return i
		}
		return len(sourceOrder)
	}
	slices.SortStableFunc(srcs, func(a, b treeActor) int { return rank(a) - rank(b) })
	for _, a := range srcs {
		sources = append(sources, a.source)
		sourceActors = append(sourceActors, a.name)
	}
	return on, sources, sourceActors
}

// wiring is what the actors of the tree are made from: what agent sets,
// then what spawnTree adds.
type wiring struct {
	o       *options
	name    string // the node's name
	hostIP  string
	rt      *runtimeConn
	cluster *clusterParts // nil: standalone mode
	clk     clock.WithDelayedExecution
	log     *slog.Logger
	m       *metrics.Registry
	gpus    *nvml.GPUs // the built-in GPUs; nil: none
	dra     *gpuDRA    // the GPUs' DRA driver (gpudra.go); nil: none
	stats   *stats.Provider
	cgroups *cgroupPlan // the CgroupActor's (cgroups.go); nil: pod cgroups not managed

	sys         *actor.ActorSystem
	props       func(actor.Producer) *actor.Props // every actor's supervision
	allocatable v1.ResourceList                   // what API pods are admitted against
	memCapacity int64                             // the machine's memory in bytes (0: unknown)
	sources     []string                          // the pod sources of the tree
	sourcePIDs  []*actor.PID
}

func (w *wiring) pid(child string) *actor.PID { return rootChild(w.sys, child) }

// cgroupsPID is the CgroupActor's PID; nil when pod cgroups are not
// managed.
func (w *wiring) cgroupsPID() *actor.PID {
	if w.cgroups == nil {
		return nil
	}
	return w.pid("cgroups")
}

// tree is the running actor tree.
type tree struct {
	sys     *actor.ActorSystem
	root    *actor.PID
	reg     *supervisors.Registry
	sources []string
	// gone is closed once the root has terminated; before stop, that is
	// the tree giving up (cause says why).
	gone   <-chan struct{}
	giveUp *giveUpNote
}

// giveUpNote keeps why the root was stopped by its guardian (the
// strategy's OnGiveUp), for the error the agent exits with.
type giveUpNote struct {
	mu sync.Mutex
	g  *supervisors.GiveUp
}

func (n *giveUpNote) set(g supervisors.GiveUp) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.g == nil {
		n.g = &g
	}
}

// cause is the error of a tree gone while actorlet runs.
func (t *tree) cause() error {
	t.giveUp.mu.Lock()
	defer t.giveUp.mu.Unlock()
	if g := t.giveUp.g; g != nil {
		return fmt.Errorf("the actor tree is gone: %s; exiting so that the service manager restarts actorlet (running pods are adopted)", g)
	}
	return errors.New("the actor tree is gone (root terminated); exiting so that the service manager restarts actorlet (running pods are adopted)")
}

func (t *tree) pid(child string) *actor.PID { return rootChild(t.sys, child) }

// rootChild is the PID of the root's child named child (a treeActors name).
func rootChild(sys *actor.ActorSystem, child string) *actor.PID {
	return actor.NewPID(sys.Address(), supervisors.RootName+"/"+child)
}

// stop stops the actors; the pods keep running.
func (t *tree) stop(log *slog.Logger) {
	if err := supervisors.Stop(t.sys, t.root); err != nil {
		log.Warn("stop actor tree", "err", err)
	}
}

// spawnTree starts an actor system and spawns treeActors under its root,
// each with the supervision of supervise.
func spawnTree(ctx context.Context, w *wiring) (*tree, error) {
	note := &giveUpNote{}
	reg, strategy, mws := supervise(w, note.set)
	w.props = func(p actor.Producer) *actor.Props {
		return actor.PropsFromProducer(p, actor.WithReceiverMiddleware(mws...), actor.WithSupervisor(strategy))
	}
	w.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return actorSystemLogger(w.log)
	}))
	shrinkProcessRegistry(w.sys)
	w.allocatable, w.memCapacity = allocatable(ctx, w.o, w.log)
	actors, sources, sourceActors := plan(treeActors(w))
	w.sources = sources
	for _, name := range sourceActors {
		w.sourcePIDs = append(w.sourcePIDs, w.pid(name))
	}
	children := make([]supervisors.Child, 0, len(actors))
	for _, a := range actors {
		children = append(children, supervisors.Child{Name: a.name, Props: w.props(a.build(w))})
	}
	root, err := supervisors.SpawnRoot(w.sys, strategy, mws, children)
	if err != nil {
		return nil, fmt.Errorf("actor tree: %w", err)
	}
	gone, err := supervisors.WatchRoot(w.sys, root)
	if err != nil {
		_ = supervisors.Stop(w.sys, root)
		return nil, fmt.Errorf("actor tree: %w", err)
	}
	return &tree{sys: w.sys, root: root, reg: reg, sources: sources, gone: gone, giveUp: note}, nil
}

// supervise returns what supervises every actor: the registry (the live
// tree, stats per kind, chaos victims; the actor metrics read it), the
// restart strategy (--actor-max-restarts in --actor-restart-window; pod
// and probe actors beyond it are stopped and respawned by their parent,
// the others escalate; onGiveUp hears of the root stopped for good) and
// the receiver middlewares.
func supervise(w *wiring, onGiveUp func(supervisors.GiveUp)) (*supervisors.Registry, actor.SupervisorStrategy, []actor.ReceiverMiddleware) {
	m := w.m
	m.InitActorKinds(supervisors.KindNode, supervisors.KindPod, supervisors.KindProbe, supervisors.KindPLEG,
		supervisors.KindImage, supervisors.KindStatus, supervisors.KindSource)
	reg := supervisors.NewRegistry(w.clk)
	m.SetActorStats(supervisors.HandlingBuckets, reg.KindStats)
	strategy := supervisors.NewStrategy(supervisors.StrategyConfig{
		MaxRestarts: int(w.o.ActorMaxRestarts), Window: w.o.ActorRestartWindow, OnGiveUp: onGiveUp,
	}, w.clk, w.log, m.IncActorRestart)
	mws := supervisors.Middlewares(reg, w.log, func(kind string, _ any, _ []byte) { m.IncActorPanic(kind) })
	return reg, strategy, mws
}

func fileSource(w *wiring) actor.Producer {
	lister := &manifest.DirLister{Dir: w.o.PodManifestPath, NodeName: w.name}
	return source.NewFile(w.pid("node"), lister, w.o.FileCheckFrequency, w.clk, w.log)
}

func urlSource(w *wiring) actor.Producer {
	lister := &manifest.URLLister{URL: w.o.ManifestURL, NodeName: w.name, Client: &http.Client{Timeout: 30 * time.Second}}
	return source.NewURL(w.pid("node"), lister, w.o.HTTPCheckFrequency, w.clk, w.log)
}

func pushSource(w *wiring) actor.Producer {
	return source.NewPush(w.pid("node"), w.name, w.log)
}

func volumeActor(w *wiring) actor.Producer {
	return volume.New(volumefiles.New(w.log), w.cluster.volumeAPI(),
		volume.Config{PodsDir: filepath.Join(w.o.RootDir, "pods"), Timeout: w.o.RuntimeRequestTimeout,
			NodeAllocatable: w.allocatable, Certs: w.cluster.volumeCerts(w), Recorder: w.cluster.recorder(w.log)}, w.clk, w.log)
}

// The CRI client has the lean listing, so the PLEG relists with it: it
// decodes of each object only what the PLEG reads.
var _ pleg.LeanLister = (*cri.Client)(nil)

func plegActor(w *wiring) actor.Producer {
	o := w.o
	return pleg.New(w.pid("node"), w.rt.client, w.clk, pleg.Config{
		Period: o.PLEGRelistPeriod, Threshold: o.PLEGThreshold, Timeout: o.RuntimeRequestTimeout,
	}, w.m, w.log)
}

// nodeActor is the NodeActor, which spawns a PodActor per pod.
func nodeActor(w *wiring) actor.Producer {
	o := w.o
	// Termination-log files and the managed /etc/hosts under pods/, probe
	// checkpoints under probes/ (readiness survives restarts), for the
	// PodActors; the sweep of pods gone (pods/ and the pod logs, their
	// volumes torn down as the VolumeActor does, tmpfs unmounted first),
	// for the NodeActor: one instance.
	files := podfiles.New(filepath.Join(o.RootDir, "pods"), filepath.Join(o.RootDir, "probes"), w.log,
		podfiles.WithPodLogsDir(o.PodLogsDir), podfiles.WithVolumes(volumefiles.New(w.log).RemoveAll))
	newPod := pod.Producers(podDeps(w, files)) // one Deps shared by all PodActors
	podProps := func(uid types.UID) *actor.Props { return w.props(newPod(uid)) }
	return node.New(node.Config{
		NodeName: w.name, MaxPods: int(o.MaxPods), Sources: w.sources, SourcePIDs: w.sourcePIDs,
		Allocatable:       w.allocatable,
		Sysctls:           sysctlAllowlist(o, w.log),
		NodeLabels:        nodestatus.Labels(w.name, o.NodeLabels),
		LiveNode:          w.cluster.liveNodeFunc(),
		MaxParallelStarts: int(o.MaxParallelPodStarts),
		Sweeper:           files, Clock: w.clk,
		RespawnBackoff:    o.ActorRespawnBackoffInitial,
		RespawnBackoffMax: o.ActorRespawnBackoffMax,
		Events:            w.cluster.recorder(w.log),
		Devices:           w.pid("devices"),
		Claims:            w.pid("dra"),
		GC:                w.pid("gc"),
		Eviction:          w.pid("eviction"),
		Cgroups:           w.cgroupsPID(),
		// The pods' allocated resources (in-place resize), upstream's file.
		AllocationStore: host.FileStore{Path: filepath.Join(o.RootDir, allocationCheckpointName)},
	}, w.pid("status"), podProps, w.m, w.log)
}

// podDeps is what every PodActor is made with.
func podDeps(w *wiring, files *podfiles.Files) pod.Deps {
	o, rt := w.o, w.rt.client
	pr := prober.New()
	return pod.Deps{
		Runtime: rt, Images: w.pid("images"), Status: w.pid("status"), PLEG: w.pid("pleg"), Clock: w.clk, Log: w.log, Metrics: w.m,
		Files: files,
		Config: pod.Config{
			RuntimeName: w.rt.name, HostIP: w.hostIP, PodLogsDir: o.PodLogsDir,
			BackoffBase: o.BackoffInitial, BackoffMax: o.BackoffMax,
			SyncPeriod: o.SyncFrequency, OpTimeout: o.RuntimeRequestTimeout,
			ThrottleStarts:  o.MaxParallelPodStarts > 0,
			NodeAllocatable: w.allocatable, // downward API for unset limits
			MemoryCapacity:  w.memCapacity, // OOM score adjustments
			DNS:             podDNS(o, w.hostIP, w.log),
			CgroupDriver:    cgroupDriver(o, w.rt, w.log),
			NoCDI:           w.rt.noCDI,
		},
		ConfigSource: w.cluster.configSource(),
		Volumes:      w.pid("volumes"),
		Devices:      w.pid("devices"),
		Claims:       w.pid("dra"),
		Cgroups:      w.cgroupsPID(),
		Events:       w.cluster.recorder(w.log),
		Probes: pod.Probing{
			Handlers:          probe.Handlers{Exec: rt, HTTP: pr, TCP: pr, GRPC: pr},
			Metrics:           w.m,
			Props:             w.props,
			RespawnBackoff:    o.ActorRespawnBackoffInitial,
			RespawnBackoffMax: o.ActorRespawnBackoffMax,
		},
	}
}

// allocatable is what pods of every source are admitted against: the
// node's cpu, memory and ephemeral-storage (the filesystem holding
// --root-dir) minus --kube-reserved, --system-reserved and, for memory and
// ephemeral-storage, the hard eviction threshold, as upstream's node
// allocatable. A resource the machine does not tell is not checked.
// memCapacity is the machine's memory capacity in bytes (the node status's
// capacity; 0: unknown), the OOM score adjustments are computed from.
func allocatable(ctx context.Context, o *options, log *slog.Logger) (_ v1.ResourceList, memCapacity int64) {
	_, capacity, err := (&host.Machine{RootDir: o.RootDir}).Info(ctx)
	if err != nil {
		log.Warn("machine capacity partly unknown, admitting pods without checking what is missing",
			"known", slices.Sorted(maps.Keys(capacity)), "err", err)
	}
	kube, _ := parseResources(o.KubeReserved) // validated with the flags
	sys, _ := parseResources(o.SystemReserved)
	if q, ok := capacity[v1.ResourceMemory]; ok {
		memCapacity = q.Value()
	}
	eviction := o.evictionHard(capacity)
	out := v1.ResourceList{}
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage} {
		q, ok := capacity[name]
		if !ok {
			continue
		}
		q = q.DeepCopy()
		for _, r := range []v1.ResourceList{kube, sys, eviction} {
			if rq, ok := r[name]; ok {
				q.Sub(rq)
			}
		}
		if q.Sign() < 0 {
			q = *resource.NewQuantity(0, q.Format)
		}
		out[name] = q
	}
	return out, memCapacity
}

// startChaos starts killing actors at random when --chaos-kill-rate is set
// and returns what stops it.
func startChaos(ctx context.Context, o *options, t *tree, log *slog.Logger) (stop func()) {
	if o.ChaosKillRate <= 0 {
		return func() {}
	}
	kinds, _ := supervisors.ParseKinds(o.ChaosKinds) // validated with the flags
	log.Warn("chaos enabled", "rate", o.ChaosKillRate, "kinds", kinds, "seed", o.ChaosSeed)
	seed := o.ChaosSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	chaosCtx, chaosCancel := ctx, context.CancelFunc(func() {})
	if o.ChaosDuration > 0 {
		chaosCtx, chaosCancel = context.WithTimeout(ctx, o.ChaosDuration)
	}
	supervisors.StartChaos(chaosCtx, t.sys, t.reg, supervisors.ChaosConfig{Rate: o.ChaosKillRate, Seed: seed, Kinds: kinds}, log)
	return chaosCancel
}
