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
// A relist reads no more than that either where the runtime client offers
// a lean listing (LeanLister): decoding every listed object's labels and
// annotations was most of the CPU a node at rest spent relisting.
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

// LeanLister is what a Lister may offer besides: the same listings, of
// only what the PLEG reads, which spares it decoding every object's labels
// and annotations each relist. The PLEG relists with it when its Lister
// has it. fn is called per object, while the runtime's answer is read: on
// an error, what it was given is dropped. state is a
// runtimeapi.PodSandboxState or runtimeapi.ContainerState; podUID is the
// pod UID label (podspec.LabelPodUID), "" when the object has none.
type LeanLister interface {
	ListPodSandboxLean(ctx context.Context, fn func(id, podUID, metadataUID string, state int32)) error
	ListContainersLean(ctx context.Context, fn func(id, sandboxID, podUID string, state int32)) error
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
	// OnDemandMinInterval is the shortest time between the starts of two
	// relists when a PodActor waits for one newer than its last
	// operation (on-demand relist, upstream's PLEGOnDemandRelist, GA in
	// v1.37): the relist starts then instead of at the next Period.
	// Default Period/5 (200 ms); negative turns on-demand relists off.
	OnDemandMinInterval time.Duration
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
	if cfg.OnDemandMinInterval == 0 {
		cfg.OnDemandMinInterval = cfg.Period / 5
	}
	if log == nil {
		log = slog.Default()
	}
	lean, _ := rt.(LeanLister)
	return func() actor.Actor {
		return &Actor{node: node, rt: rt, lean: lean, clk: clk, cfg: cfg, m: m, log: log}
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
	lean LeanLister // rt's lean listing; nil: it has none
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

// relisted is a relist's result: of the listed objects, those of a pod
// (see object), in the order listed.
type relisted struct {
	actorkit.Tag
	started    time.Time
	sandboxes  []object
	containers []object
	err        error
}

// object is what the PLEG reads of a listed sandbox or container. Only
// the objects with a pod UID are kept: the others are not actorlet's.
type object struct {
	id        string
	sandboxID string // a container's sandbox; "" for a sandbox
	uid       types.UID
	state     int32 // a runtimeapi.PodSandboxState or ContainerState
}

// addSandbox keeps a listed sandbox of a pod: the one its pod UID label
// names, else its metadata's (as the runtime lists it back).
func (m *relisted) addSandbox(id string, label types.UID, metadataUID string, state int32) {
	uid := label
	if uid == "" {
		uid = types.UID(metadataUID)
	}
	if uid != "" {
		m.sandboxes = append(m.sandboxes, object{id: id, uid: uid, state: state})
	}
}

// addContainer keeps a listed container with a pod UID label.
func (m *relisted) addContainer(id, sandboxID string, uid types.UID, state int32) {
	if uid != "" {
		m.containers = append(m.containers, object{id: id, sandboxID: sandboxID, uid: uid, state: state})
	}
}

// list relists through the full listing and keeps of it what the PLEG
// reads; the protos are dropped before the diff.
func (m *relisted) list(ctx context.Context, rt Lister) error {
	sandboxes, err := rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return err
	}
	containers, err := rt.ListContainers(ctx, nil)
	if err != nil {
		return err
	}
	m.fromProtos(sandboxes, containers)
	return nil
}

// fromProtos keeps of a full listing what the PLEG reads.
func (m *relisted) fromProtos(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) {
	m.sandboxes = make([]object, 0, len(sandboxes))
	for _, s := range sandboxes {
		m.addSandbox(s.GetId(), podspec.PodUIDOf(s.GetLabels()), s.GetMetadata().GetUid(), int32(s.GetState()))
	}
	m.containers = make([]object, 0, len(containers))
	for _, c := range containers {
		m.addContainer(c.GetId(), c.GetPodSandboxId(), podspec.PodUIDOf(c.GetLabels()), int32(c.GetState()))
	}
}

// listLean relists through the lean listing.
func (m *relisted) listLean(ctx context.Context, rt LeanLister) error {
	err := rt.ListPodSandboxLean(ctx, func(id, podUID, metadataUID string, state int32) {
		m.addSandbox(id, types.UID(podUID), metadataUID, state)
	})
	if err != nil {
		return err
	}
	return rt.ListContainersLean(ctx, func(id, sandboxID, podUID string, state int32) {
		m.addContainer(id, sandboxID, types.UID(podUID), state)
	})
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
	rt, lean, start := a.rt, a.lean, a.clk.Now()
	actorkit.Go(a.self, a.cfg.Timeout, func(ctx context.Context) *relisted {
		res := &relisted{started: start}
		if lean != nil {
			res.err = res.listLean(ctx, lean)
		} else {
			res.err = res.list(ctx, rt)
		}
		if res.err != nil {
			res.sandboxes, res.containers = nil, nil // a part of a listing
		}
		return res
	})
}

// arm arms the next relist: a Period after this one, or sooner when a
// PodActor waits for a relist newer than its last operation (on demand:
// OnDemandMinInterval after the last relist started, so a burst of
// operations costs one relist per interval, not one each). Upstream v1.37
// relists the one pod after a sync that did something; actorlet's relist
// is of the whole node, which the interval bounds. A runtime whose relists
// fail gets no on-demand relists: the Period paces the retries.
func (a *Actor) arm() {
	if a.armOnDemand() {
		return
	}
	a.timer.Arm(a.self, a.cfg.Period)
}

// armOnDemand arms the on-demand relist when a request waits and it comes
// before the armed one; it reports whether the timer is armed for it.
func (a *Actor) armOnDemand() bool {
	if len(a.waiting) == 0 || a.cfg.OnDemandMinInterval <= 0 || a.lastErr != "" || a.lastStart.IsZero() {
		return false
	}
	at := a.lastStart.Add(a.cfg.OnDemandMinInterval)
	if a.timer.Armed() && !at.Before(a.timer.At()) {
		return true // armed no later already
	}
	a.timer.Stop()
	a.timer.ArmAt(a.self, at)
	return true
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
	if !a.relisting && a.haveFirst {
		a.armOnDemand() // sooner than the Period
	}
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
// (which diff has recorded); a pod with nothing left has no slice. The
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
	for i := range m.sandboxes {
		r := a.sandboxes[m.sandboxes[i].id]
		if r == nil {
			continue
		}
		if _, ok := changed[r.uid]; ok {
			o := get(r.uid)
			o.sandboxes = append(o.sandboxes, messages.RuntimeSandbox{ID: r.id, State: runtimeapi.PodSandboxState(r.state)})
		}
	}
	for i := range m.containers {
		c := &m.containers[i]
		r := a.containers[c.id]
		if r == nil {
			continue
		}
		if _, ok := changed[r.uid]; ok {
			sb := c.sandboxID
			if s := a.sandboxes[sb]; s != nil {
				sb = s.id
			}
			o := get(r.uid)
			o.containers = append(o.containers, messages.RuntimeContainer{ID: r.id, SandboxID: sb, State: runtimeapi.ContainerState(r.state)})
		}
	}
}

// diff compares a relist with the previous one. The records are updated in
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
	for i := range m.containers {
		c := &m.containers[i]
		state := runtimeapi.ContainerState(c.state)
		counts[stateIndex(state)]++
		prev, ok := a.note(a.containers, c.id, c.uid, c.state, seq)
		switch {
		case !ok && state == runtimeapi.ContainerState_CONTAINER_RUNNING:
			events = append(events, messages.PodLifecycleEvent{UID: c.uid, Type: messages.ContainerStarted, ID: c.id})
		case ok && prev == c.state:
		case state == runtimeapi.ContainerState_CONTAINER_EXITED:
			events = append(events, messages.PodLifecycleEvent{UID: c.uid, Type: messages.ContainerDied, ID: c.id})
		case state == runtimeapi.ContainerState_CONTAINER_RUNNING:
			events = append(events, messages.PodLifecycleEvent{UID: c.uid, Type: messages.ContainerStarted, ID: c.id})
		default:
			events = append(events, messages.PodLifecycleEvent{UID: c.uid, Type: messages.ContainerChanged, ID: c.id})
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
	for i := range m.sandboxes {
		s := &m.sandboxes[i]
		if runningPods != nil && runtimeapi.PodSandboxState(s.state) == runtimeapi.PodSandboxState_SANDBOX_READY {
			runningPods[s.uid] = struct{}{} // as upstream: a pod with a ready sandbox is running
		}
		prev, ok := a.note(a.sandboxes, s.id, s.uid, s.state, seq)
		if !ok || prev != s.state {
			events = append(events, messages.PodLifecycleEvent{UID: s.uid, Type: messages.SandboxChanged, ID: s.id})
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
