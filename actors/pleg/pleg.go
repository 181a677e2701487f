// Package pleg is the PLEGActor: it relists the runtime periodically, diffs
// the result against the previous relist and tells the NodeActor which pods
// changed (the NodeActor routes each event to the owning PodActor).
//
// The newest relist is the runtime cache (the upstream kubelet's pod cache,
// in actor form): each event carries its pod's slice of the relist, and a
// PodActor asks for its slice (GetRuntimePod) instead of listing the
// runtime; a request for a relist newer than the asker's last operation
// waits for the next relist.
//
// The cache keeps what its readers use and no more: each object's ID, pod,
// sandbox and state, not the listed protos with their labels and
// annotations (those were ~8 KiB per pod). A pod's slice is rebuilt only
// when a relist reports an event for it; a steady relist writes nothing.
package pleg

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// Lister lists everything the runtime holds.
type Lister interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

// Metrics is what the PLEG reports. May be nil.
type Metrics interface {
	ObservePLEGRelist(duration, interval time.Duration)
	SetPLEGLastSeen(t time.Time)
	SetRunningPods(n int)
	SetRunningContainers(state string, n int)
}

// Config of the PLEG.
type Config struct {
	Period    time.Duration // relist period, upstream 1 s
	Threshold time.Duration // relist older than this makes the node unhealthy, upstream 3 min
	Timeout   time.Duration // one relist's deadline
}

// New returns the PLEGActor producer; node receives PodEvents and RuntimePods.
func New(node *actor.PID, rt Lister, clk clock.WithDelayedExecution, cfg Config, m Metrics, log *slog.Logger) actor.Producer {
	if node == nil || rt == nil || clk == nil {
		panic("pleg.New: node, runtime and clock are required")
	}
	if cfg.Period <= 0 {
		cfg.Period = time.Second
	}
	if cfg.Threshold <= 0 {
		cfg.Threshold = 3 * time.Minute
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if log == nil {
		log = slog.Default()
	}
	return func() actor.Actor {
		return &Actor{node: node, rt: rt, clk: clk, cfg: cfg, m: m, log: log}
	}
}

// record is one listed object of a pod, kept between relists. Its id is
// the string the map is keyed by: the cache's slices share it.
type record struct {
	id    string
	uid   types.UID
	state int32
	seen  uint64 // the relist that listed it last
}

// podObjects is a pod's part of the newest relist: immutable once built (a
// change builds a new one), so slices of it are handed out as they are.
type podObjects struct {
	sandboxes  []messages.RuntimeSandbox
	containers []messages.RuntimeContainer
}

// Actor is the PLEGActor.
type Actor struct {
	node *actor.PID
	rt   Lister
	clk  clock.WithDelayedExecution
	cfg  Config
	m    Metrics
	log  *slog.Logger

	self  actorkit.Self
	timer actorkit.Timer

	relisting  bool
	haveFirst  bool
	containers map[string]*record
	sandboxes  map[string]*record
	uids       map[types.UID]struct{}
	// relists counts the diffs; moved: the last one added or removed a
	// record (the set of pod UIDs may have changed).
	relists   uint64
	moved     bool
	lastOK    time.Time
	lastStart time.Time
	lastErr   string

	// The runtime cache: the newest relist by pod, and the requests
	// waiting for a newer one.
	pods    map[types.UID]*podObjects
	waiting map[waitKey]*messages.GetRuntimePod
}

// waitKey names one asker's request for one pod: the asker by its PID's
// address and ID (PID.String formats the proto as text: an allocation and
// a marshal per request).
type waitKey struct {
	uid     types.UID
	address string
	id      string
}

type relisted struct {
	actorkit.Tag
	started    time.Time
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
	err        error
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.handleStarted(ctx)
	case *actor.Restarting, *actor.Stopping:
		a.timer.Stop()
	case *actorkit.Fired:
		if a.timer.Fired(a.self, m) {
			a.Relist()
		}
	case *relisted:
		if a.self.Mine(m) {
			a.handleRelisted(ctx, m)
		}
	case *messages.GetRuntimePod:
		a.handleGetRuntimePod(ctx, m)
	case *messages.GetHealth:
		ctx.Respond(&messages.Health{RuntimeErr: a.lastErr, LastRelist: a.lastOK, Threshold: a.cfg.Threshold})
	}
}

func (a *Actor) handleStarted(ctx actor.Context) {
	a.self = actorkit.Start(ctx, a.clk)
	a.timer = actorkit.NewTimer("relist")
	// A restarted PLEG starts from an empty view: its first relist reports
	// every pod as changed, which makes every PodActor look again — safe,
	// since PodActors act on what they inspect, not on the events.
	a.containers, a.sandboxes = map[string]*record{}, map[string]*record{}
	a.pods = nil
	a.Relist()
}

// Relist starts one relist unless one is in flight; the next is armed when
// its result arrives.
func (a *Actor) Relist() {
	if a.relisting {
		return
	}
	a.relisting = true
	rt, start := a.rt, a.clk.Now()
	actorkit.Go(a.self, a.cfg.Timeout, func(ctx context.Context) *relisted {
		res := &relisted{started: start}
		res.sandboxes, res.err = rt.ListPodSandbox(ctx, nil)
		if res.err == nil {
			res.containers, res.err = rt.ListContainers(ctx, nil)
		}
		return res
	})
}

func (a *Actor) arm() {
	a.timer.Arm(a.self, a.cfg.Period)
}

// handleGetRuntimePod answers from the cache when its relist started after
// NotBefore, else once such a relist is done.
func (a *Actor) handleGetRuntimePod(ctx actor.Context, m *messages.GetRuntimePod) {
	if m.ReplyTo == nil {
		return
	}
	if a.haveFirst && a.lastStart.After(m.NotBefore) {
		ctx.Send(m.ReplyTo, a.slice(m.UID, a.lastStart))
		return
	}
	// One request per asker and pod: a newer one replaces it, so asks
	// repeated while the runtime fails its relists do not pile up.
	if a.waiting == nil {
		a.waiting = map[waitKey]*messages.GetRuntimePod{}
	}
	a.waiting[waitKey{m.UID, m.ReplyTo.Address, m.ReplyTo.Id}] = m
}

// slice is a pod's part of the newest relist, started at relisted (empty
// lists when the pod has nothing in the runtime).
func (a *Actor) slice(uid types.UID, relisted time.Time) *messages.RuntimePod {
	p := &messages.RuntimePod{UID: uid, Relisted: relisted}
	if o := a.pods[uid]; o != nil {
		p.Sandboxes, p.Containers = o.sandboxes, o.containers
	}
	return p
}

// answerWaiting answers the requests the newest relist satisfies.
func (a *Actor) answerWaiting(ctx actor.Context) {
	for k, w := range a.waiting {
		if a.lastStart.After(w.NotBefore) {
			ctx.Send(w.ReplyTo, a.slice(w.UID, a.lastStart))
			delete(a.waiting, k)
		}
	}
}

func (a *Actor) handleRelisted(ctx actor.Context, m *relisted) {
	a.relisting = false
	defer a.arm()
	now := a.clk.Now()
	if m.err != nil {
		if a.lastErr == "" {
			a.log.Warn("relist failed", "err", m.err)
		}
		a.lastErr = m.err.Error()
		return
	}
	if a.lastErr != "" {
		a.log.Info("relist recovered")
	}
	a.lastErr = ""
	if a.m != nil {
		interval := time.Duration(0)
		if !a.lastStart.IsZero() {
			interval = m.started.Sub(a.lastStart)
		}
		a.m.ObservePLEGRelist(now.Sub(m.started), interval)
		a.m.SetPLEGLastSeen(now)
	}
	a.lastStart, a.lastOK = m.started, now

	events := a.diff(m)
	a.cache(m, events)
	if len(events) > 0 {
		ctx.Send(a.node, &messages.PodEvents{Events: events})
	}
	if a.haveFirst && !a.moved {
		// The same objects as the last relist: the same pods.
		a.answerWaiting(ctx)
		return
	}
	uids := make(map[types.UID]struct{}, len(a.uids))
	for _, r := range a.sandboxes {
		uids[r.uid] = struct{}{}
	}
	for _, r := range a.containers {
		uids[r.uid] = struct{}{}
	}
	if !a.haveFirst || !sameSet(uids, a.uids) {
		list := make([]types.UID, 0, len(uids))
		for u := range uids {
			list = append(list, u)
		}
		sort.Slice(list, func(i, j int) bool { return list[i] < list[j] })
		ctx.Send(a.node, &messages.RuntimePods{UIDs: list})
	}
	a.uids, a.haveFirst = uids, true
	a.answerWaiting(ctx)
}

// cache updates the runtime cache with the relist m and its events, and
// gives each event its pod's slice. Every pod whose objects changed has an
// event: its slice is built again, the others' stay. The events of a pod
// share one slice.
func (a *Actor) cache(m *relisted, events []messages.PodLifecycleEvent) {
	changed := map[types.UID]*messages.RuntimePod{}
	for i := range events {
		changed[events[i].UID] = nil
	}
	a.regroup(m, changed)
	for i := range events {
		uid := events[i].UID
		if changed[uid] == nil {
			changed[uid] = a.slice(uid, m.started)
		}
		events[i].Pod = changed[uid]
	}
}

// regroup builds again the slices of the changed pods from the relist m
// (which diff has recorded): objects without the pod UID label are not
// actorlet's and are left out; a pod with nothing left has no slice. The
// slices keep the records' ID strings, and a container's sandbox ID is
// its sandbox's, so no ID is held twice.
func (a *Actor) regroup(m *relisted, changed map[types.UID]*messages.RuntimePod) {
	if len(changed) == 0 {
		return
	}
	if a.pods == nil {
		a.pods = map[types.UID]*podObjects{}
	}
	for uid := range changed {
		delete(a.pods, uid)
	}
	get := func(uid types.UID) *podObjects {
		o := a.pods[uid]
		if o == nil {
			o = &podObjects{}
			a.pods[uid] = o
		}
		return o
	}
	for _, s := range m.sandboxes {
		r := a.sandboxes[s.Id]
		if r == nil {
			continue
		}
		if _, ok := changed[r.uid]; ok {
			o := get(r.uid)
			o.sandboxes = append(o.sandboxes, messages.RuntimeSandbox{ID: r.id, State: runtimeapi.PodSandboxState(r.state)})
		}
	}
	for _, c := range m.containers {
		r := a.containers[c.Id]
		if r == nil {
			continue
		}
		if _, ok := changed[r.uid]; ok {
			sb := c.PodSandboxId
			if s := a.sandboxes[sb]; s != nil {
				sb = s.id
			}
			o := get(r.uid)
			o.containers = append(o.containers, messages.RuntimeContainer{ID: r.id, SandboxID: sb, State: runtimeapi.ContainerState(r.state)})
		}
	}
}

func sandboxUID(s *runtimeapi.PodSandbox) types.UID {
	if uid := podspec.PodUIDOf(s.Labels); uid != "" {
		return uid
	}
	return types.UID(s.GetMetadata().GetUid())
}

// diff compares a relist with the previous one; objects without a pod UID
// label are not actorlet's and are ignored. The records are updated in
// place (a steady node's relist writes no map and allocates nothing): each
// listed one is marked with this relist's number, the ones left unmarked
// are gone.
func (a *Actor) diff(m *relisted) []messages.PodLifecycleEvent {
	var events []messages.PodLifecycleEvent
	if a.containers == nil {
		a.containers = map[string]*record{}
	}
	if a.sandboxes == nil {
		a.sandboxes = map[string]*record{}
	}
	a.relists++
	seq := a.relists
	a.moved = false
	var counts [4]int // by stateIndex
	for _, c := range m.containers {
		uid := podspec.PodUIDOf(c.Labels)
		if uid == "" {
			continue
		}
		counts[stateIndex(c.State)]++
		prev, ok := a.note(a.containers, c.Id, uid, int32(c.State), seq)
		switch {
		case !ok && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
			events = append(events, messages.PodLifecycleEvent{UID: uid, Type: messages.ContainerStarted, ID: c.Id})
		case ok && prev == int32(c.State):
		case c.State == runtimeapi.ContainerState_CONTAINER_EXITED:
			events = append(events, messages.PodLifecycleEvent{UID: uid, Type: messages.ContainerDied, ID: c.Id})
		case c.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
			events = append(events, messages.PodLifecycleEvent{UID: uid, Type: messages.ContainerStarted, ID: c.Id})
		default:
			events = append(events, messages.PodLifecycleEvent{UID: uid, Type: messages.ContainerChanged, ID: c.Id})
		}
	}
	for id, old := range a.containers {
		if old.seen != seq {
			events = append(events, messages.PodLifecycleEvent{UID: old.uid, Type: messages.ContainerRemoved, ID: id})
			delete(a.containers, id)
			a.moved = true
		}
	}
	var runningPods map[types.UID]struct{}
	if a.m != nil {
		runningPods = map[types.UID]struct{}{}
	}
	for _, s := range m.sandboxes {
		uid := sandboxUID(s)
		if uid == "" {
			continue
		}
		if runningPods != nil && s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			runningPods[uid] = struct{}{} // as upstream: a pod with a ready sandbox is running
		}
		prev, ok := a.note(a.sandboxes, s.Id, uid, int32(s.State), seq)
		if !ok || prev != int32(s.State) {
			events = append(events, messages.PodLifecycleEvent{UID: uid, Type: messages.SandboxChanged, ID: s.Id})
		}
	}
	for id, old := range a.sandboxes {
		if old.seen != seq {
			events = append(events, messages.PodLifecycleEvent{UID: old.uid, Type: messages.SandboxChanged, ID: id})
			delete(a.sandboxes, id)
			a.moved = true
		}
	}
	if a.m != nil {
		a.m.SetRunningPods(len(runningPods))
		for i, s := range stateNames {
			a.m.SetRunningContainers(s, counts[i])
		}
	}
	return events
}

// note records that relist seq listed the object id of pod uid in state,
// and returns the state the previous relist saw (ok false: it is new).
// A known object's record is updated in place: no map write.
func (a *Actor) note(records map[string]*record, id string, uid types.UID, state int32, seq uint64) (int32, bool) {
	r := records[id]
	if r == nil {
		records[id] = &record{id: id, uid: uid, state: state, seen: seq}
		a.moved = true
		return 0, false
	}
	prev := r.state
	r.state, r.seen = state, seq
	if r.uid != uid {
		r.uid = uid
	}
	return prev, true
}

// stateNames are the container states of the running-containers metric,
// in stateIndex order.
var stateNames = [4]string{"running", "exited", "created", "unknown"}

func stateIndex(s runtimeapi.ContainerState) int {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return 0
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return 1
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return 2
	}
	return 3
}

func sameSet(a, b map[types.UID]struct{}) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}
