// Package status is the StatusActor: it keeps the newest status of every pod
// and serves reads; in cluster mode it also writes them to the API server
// (writer.go). A (re)started StatusActor rebuilds its view from the NodeActor
// and never answers a read with a partial list meanwhile.
package status

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// Defaults of the rebuild after a (re)start.
const (
	// DefaultReadWait bounds how long a read waits for the rebuild before
	// it is answered StatusUnavailable (the node API's 503).
	DefaultReadWait = 5 * time.Second
	// DefaultResyncEvery is how often the NodeActor is asked again while
	// the rebuild is incomplete (a pod it listed may never come back: its
	// PodActor started killing it, or the NodeActor restarted).
	DefaultResyncEvery = 10 * time.Second
	// maxWaiting bounds the reads parked during a rebuild; more are
	// answered StatusUnavailable at once.
	maxWaiting = 1024
	// deadLetterRetry is the first delay before asking again a NodeActor
	// that did not exist yet (at start-up the StatusActor is spawned
	// first), doubling up to the ResyncEvery.
	deadLetterRetry = 50 * time.Millisecond
)

// Option tunes the StatusActor.
type Option func(*Actor)

// WithClock sets the clock of the rebuild's waits (default the real clock;
// NewWithAPI uses its own clock).
func WithClock(clk clock.WithDelayedExecution) Option { return func(a *Actor) { a.clk = clk } }

// WithReadWait sets how long a read waits for a rebuild (DefaultReadWait).
func WithReadWait(d time.Duration) Option { return func(a *Actor) { a.readWait = d } }

// WithResyncEvery sets how often an incomplete rebuild asks the NodeActor
// again (DefaultResyncEvery).
func WithResyncEvery(d time.Duration) Option { return func(a *Actor) { a.resyncEvery = d } }

// WithMetrics sets what the actor counts (terminated containers, refused
// status writes).
func WithMetrics(m Metrics) Option { return func(a *Actor) { a.metrics = m } }

// WithEvents sets the recorder of the pods' events (refused status writes).
func WithEvents(r Recorder) Option { return func(a *Actor) { a.events = r } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(log *slog.Logger) Option { return func(a *Actor) { a.log = log } }

// New returns the StatusActor producer. node, when given, is asked for the
// pods it must get back after every (re)start; reads wait for them.
func New(node *actor.PID, opts ...Option) actor.Producer {
	return func() actor.Actor {
		a := &Actor{node: node}
		for _, o := range opts {
			o(a)
		}
		return a
	}
}

// defaults fills in what no option set (NewWithAPI builds the actor with
// its writer only: the writer's clock and logger then).
func (a *Actor) defaults() {
	if a.clk == nil && a.w != nil {
		a.clk = a.w.clk
	}
	if a.clk == nil {
		a.clk = clock.RealClock{}
	}
	if a.log == nil && a.w != nil {
		a.log = a.w.log
	}
	if a.log == nil {
		a.log = slog.Default().With("actor", "status")
	}
	if a.readWait <= 0 {
		a.readWait = DefaultReadWait
	}
	if a.resyncEvery <= 0 {
		a.resyncEvery = DefaultResyncEvery
	}
}

// Actor is the StatusActor. Pods it stores are never mutated after they
// arrive (senders deep-copy), so reads may share them.
type Actor struct {
	node *actor.PID
	pods map[types.UID]*v1.Pod
	// listed is the answer to GetPods until a.pods changes: shared by
	// every reader, read only.
	listed *messages.PodList
	w      *writer // cluster mode: writes to the API server

	metrics Metrics  // may be nil
	events  Recorder // may be nil

	clk         clock.WithDelayedExecution
	log         *slog.Logger
	readWait    time.Duration
	resyncEvery time.Duration
	self        actorkit.Self
	rb          rebuild
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.defaults()
		a.pods = map[types.UID]*v1.Pod{}
		a.listed = nil
		a.self = actorkit.Start(ctx, a.clk)
		if a.w != nil {
			a.w.start(ctx)
		}
		a.startRebuild(ctx)
	case *actor.Restarting, *actor.Stopping:
		a.endRebuild(ctx, "the status actor is restarting")
		if a.w != nil {
			a.w.stop()
		}
	case *messages.ResyncPods:
		a.handleResyncPods(ctx, m)
	case *actor.DeadLetterResponse:
		a.handleDeadLetter()
	case *messages.PodStatusUpdate:
		a.handleUpdate(m)
		if m.Pod != nil {
			a.received(ctx, m.Pod.UID)
		}
	case *messages.PodForget:
		delete(a.pods, m.UID)
		a.listed = nil
		if a.w != nil {
			a.w.forget(m)
		}
		a.received(ctx, m.UID)
	case *messages.PodsKnown:
		a.handleKnown(ctx, m)
	case *messages.GetPods:
		a.handleGetPods(ctx)
	case *messages.GetPod:
		a.handleGetPod(ctx, m)
	case *actorkit.Fired:
		if !a.handleFired(ctx, m) && a.w != nil {
			a.w.receive(m)
		}
	default:
		if a.w != nil {
			a.w.receive(m)
		}
	}
}

func (a *Actor) handleUpdate(m *messages.PodStatusUpdate) {
	if m.Pod == nil {
		return
	}
	old, ok := a.pods[m.Pod.UID]
	if ok && terminal(old.Status.Phase) && !terminal(m.Pod.Status.Phase) {
		// Never move a pod back from a terminal phase (as upstream).
		return
	}
	switch {
	case ok:
		countTerminated(a.metrics, &old.Status, &m.Pod.Status)
	case a.rb.ready:
		countTerminated(a.metrics, nil, &m.Pod.Status)
		// A pod reported again while the view is rebuilt after a restart
		// was counted before it.
	}
	a.pods[m.Pod.UID] = m.Pod
	a.listed = nil
	if a.w != nil {
		a.w.update(m.Pod)
	}
}

// handleKnown drops the status of every pod the NodeActor no longer knows
// (a forget lost with a NodeActor restart), as if it had been forgotten.
func (a *Actor) handleKnown(ctx actor.Context, m *messages.PodsKnown) {
	for uid, p := range a.pods {
		if m.UIDs[uid] {
			continue
		}
		a.log.Info("dropped the status of a pod the node no longer knows", "pod", p.Namespace+"/"+p.Name, "uid", uid)
		delete(a.pods, uid)
		a.listed = nil
		if a.w != nil {
			a.w.forget(&messages.PodForget{UID: uid, Namespace: p.Namespace, Name: p.Name})
		}
	}
	if !a.rb.ready && a.rb.answered {
		for uid := range a.rb.missing {
			if !m.UIDs[uid] {
				delete(a.rb.missing, uid)
			}
		}
		a.checkRebuilt(ctx)
	}
}

func (a *Actor) handleGetPods(ctx actor.Context) {
	if a.rb.ready {
		ctx.Respond(a.list())
		return
	}
	a.park(ctx, nil)
}

func (a *Actor) handleGetPod(ctx actor.Context, m *messages.GetPod) {
	found := a.find(m.Namespace, m.Name)
	if found.Pod != nil || a.rb.ready {
		ctx.Respond(found)
		return
	}
	// Not back yet, or not there at all: "not found" only once the view
	// is whole.
	a.park(ctx, m)
}

func terminal(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

// find looks one pod up without copying the others (a log or exec request
// on a node with thousands of pods).
func (a *Actor) find(namespace, name string) *messages.PodFound {
	for _, p := range a.pods {
		if p.Namespace == namespace && p.Name == name {
			return &messages.PodFound{Pod: a.served(p).DeepCopy()}
		}
	}
	return &messages.PodFound{}
}

// served is the pod as /pods shows it: with the ConditionStatusRefused
// condition while the API server refuses its status (a shallow copy: the
// stored pod stays as it is).
func (a *Actor) served(p *v1.Pod) *v1.Pod {
	if a.w == nil {
		return p
	}
	c := a.w.refusedCondition(p.UID)
	if c == nil {
		return p
	}
	cp := *p
	cp.Status.Conditions = append(slices.Clip(p.Status.Conditions), *c)
	return &cp
}

// list is every pod sorted by namespace and name, built once per change of
// a.pods: the bench and the node's clients poll GET /pods of every pod back
// to back, and each poll is a message during which the pods' updates wait.
// It holds the stored pods themselves (never mutated, see Actor): copying
// 10,000 pods into the answer was 12 MB and ~40 ms per poll.
func (a *Actor) list() *messages.PodList {
	if a.listed != nil {
		return a.listed
	}
	ps := make([]*v1.Pod, 0, len(a.pods))
	for _, p := range a.pods {
		ps = append(ps, a.served(p))
	}
	slices.SortFunc(ps, func(x, y *v1.Pod) int {
		if c := strings.Compare(x.Namespace, y.Namespace); c != 0 {
			return c
		}
		return strings.Compare(x.Name, y.Name)
	})
	a.listed = &messages.PodList{Items: ps}
	return a.listed
}

// rebuild is what a (re)started StatusActor waits for before it serves
// reads. It starts empty (actors share no memory, and a crash may have
// left its state wrong): it asks the NodeActor (Resync), which answers
// with the pods it has republished (ResyncPods); once each of them has
// reported again or been forgotten, the view is whole. Reads meanwhile
// wait, at most readWait, then get StatusUnavailable: a client sees a
// 503, never a short list it could take for deleted pods.
type rebuild struct {
	ready    bool
	answered bool               // a ResyncPods to this incarnation arrived
	missing  map[types.UID]bool // listed by the node, not reported yet
	expected int                // how many the node listed
	since    time.Time
	asks     int // Resyncs sent that went to dead letters in a row
	resync   actorkit.Timer
	expire   actorkit.Timer // the earliest waiting read's deadline
	waiting  []waiter
}

// waiter is a read parked during a rebuild.
type waiter struct {
	to       *actor.PID
	get      *messages.GetPod // nil: GetPods
	deadline time.Time
}

func (a *Actor) startRebuild(ctx actor.Context) {
	a.rb = rebuild{resync: actorkit.NewTimer("rebuild-resync"), expire: actorkit.NewTimer("rebuild-expire")}
	if a.node == nil {
		a.rb.ready = true // nothing to rebuild from (tests, tools)
		return
	}
	a.rb.since = a.clk.Now()
	a.askNode(ctx)
}

// askNode sends a Resync to the NodeActor as a request, so a NodeActor that
// does not exist (yet) answers through a DeadLetterResponse.
func (a *Actor) askNode(ctx actor.Context) {
	ctx.Request(a.node, &messages.Resync{Ask: a.self.Gen()})
	a.rb.resync.Arm(a.self, a.resyncEvery)
}

func (a *Actor) handleDeadLetter() {
	if a.rb.ready {
		return
	}
	a.rb.asks++
	a.rb.resync.Arm(a.self, actorkit.Backoff{Base: deadLetterRetry, Cap: a.resyncEvery}.Delay(a.rb.asks))
}

func (a *Actor) handleResyncPods(ctx actor.Context, m *messages.ResyncPods) {
	if a.rb.ready || m.Ask != a.self.Gen() {
		return // an answer to an earlier incarnation, or not needed any more
	}
	// The newest answer replaces the earlier ones: forgets the node sent
	// before it are in it, the ones after it follow it.
	a.rb.answered, a.rb.asks, a.rb.expected = true, 0, len(m.UIDs)
	a.rb.missing = make(map[types.UID]bool, len(m.UIDs))
	for _, uid := range m.UIDs {
		if _, ok := a.pods[uid]; !ok {
			a.rb.missing[uid] = true
		}
	}
	a.checkRebuilt(ctx)
}

// received notes that uid reported again (or was forgotten).
func (a *Actor) received(ctx actor.Context, uid types.UID) {
	if a.rb.ready {
		return
	}
	if a.rb.answered {
		delete(a.rb.missing, uid)
	}
	if a.checkRebuilt(ctx) {
		return
	}
	// A read of this one pod need not wait for the others.
	kept := a.rb.waiting[:0]
	for _, w := range a.rb.waiting {
		if w.get != nil {
			if found := a.find(w.get.Namespace, w.get.Name); found.Pod != nil {
				ctx.Send(w.to, found)
				continue
			}
		}
		kept = append(kept, w)
	}
	clear(a.rb.waiting[len(kept):])
	a.rb.waiting = kept
}

// checkRebuilt ends the rebuild once the view is whole and answers the
// reads that waited for it.
func (a *Actor) checkRebuilt(ctx actor.Context) bool {
	if !a.rb.answered || len(a.rb.missing) > 0 {
		return false
	}
	a.rb.ready = true
	a.rb.resync.Stop()
	a.rb.expire.Stop()
	if n := len(a.rb.waiting); n > 0 || a.rb.expected > 0 {
		a.log.Info("pod status view rebuilt", "pods", len(a.pods), "expected", a.rb.expected,
			"waitingReads", n, "took", a.clk.Since(a.rb.since))
	}
	var list *messages.PodList // one list for every waiting GetPods: read only
	for _, w := range a.rb.waiting {
		switch {
		case w.get != nil:
			ctx.Send(w.to, a.find(w.get.Namespace, w.get.Name))
		case list == nil:
			list = a.list()
			fallthrough
		default:
			ctx.Send(w.to, list)
		}
	}
	a.rb.waiting, a.rb.missing = nil, nil
	return true
}

// park keeps a read until the rebuild ends or its wait is over.
func (a *Actor) park(ctx actor.Context, get *messages.GetPod) {
	to := ctx.Sender()
	if to == nil {
		return // nobody to answer
	}
	if len(a.rb.waiting) >= maxWaiting {
		ctx.Respond(a.unavailable())
		return
	}
	deadline := a.clk.Now().Add(a.readWait)
	a.rb.waiting = append(a.rb.waiting, waiter{to: to, get: get, deadline: deadline})
	a.rb.expire.ArmAt(a.self, deadline)
}

// handleFired takes the rebuild's timers; false: not one of them.
func (a *Actor) handleFired(ctx actor.Context, m *actorkit.Fired) bool {
	switch {
	case a.rb.resync.Fired(a.self, m):
		if !a.rb.ready {
			a.log.Info("pod status view still incomplete, asking the node again",
				"missing", len(a.rb.missing), "expected", a.rb.expected, "answered", a.rb.answered)
			a.askNode(ctx)
		}
	case a.rb.expire.Fired(a.self, m):
		a.expireWaiting(ctx)
	default:
		return false
	}
	return true
}

// expireWaiting answers the reads whose wait is over.
func (a *Actor) expireWaiting(ctx actor.Context) {
	now := a.clk.Now()
	i := 0
	for ; i < len(a.rb.waiting) && !a.rb.waiting[i].deadline.After(now); i++ {
		ctx.Send(a.rb.waiting[i].to, a.unavailable())
	}
	clear(a.rb.waiting[:i])
	a.rb.waiting = a.rb.waiting[i:]
	if len(a.rb.waiting) > 0 {
		a.rb.expire.ArmAt(a.self, a.rb.waiting[0].deadline)
	}
}

// endRebuild answers every waiting read (the actor is restarting or
// stopping: their answers would be lost with it).
func (a *Actor) endRebuild(ctx actor.Context, why string) {
	a.rb.resync.Stop()
	a.rb.expire.Stop()
	for _, w := range a.rb.waiting {
		ctx.Send(w.to, &messages.StatusUnavailable{Reason: why})
	}
	a.rb.waiting = nil
}

func (a *Actor) unavailable() *messages.StatusUnavailable {
	if !a.rb.answered {
		return &messages.StatusUnavailable{
			Reason: "the status actor is rebuilding its view of the pods: the node actor has not said yet which pods it holds " +
				"(it answers once every pod source has delivered its pods)",
		}
	}
	n := len(a.rb.missing)
	return &messages.StatusUnavailable{
		Reason:  fmt.Sprintf("the status actor is rebuilding its view of the pods: %d of %d pods not reported again yet", n, a.rb.expected),
		Missing: n, Expected: a.rb.expected,
	}
}
