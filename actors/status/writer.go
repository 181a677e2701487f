package status

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// Annotations of static and mirror pods, as upstream.
const (
	annotationSource = "kubernetes.io/config.source"
	annotationHash   = "kubernetes.io/config.hash"
	annotationMirror = "kubernetes.io/config.mirror"
)

// API is what the StatusActor writes to in cluster mode.
type API interface {
	PatchPodStatus(ctx context.Context, namespace, name string, uid types.UID, oldStatus, newStatus *v1.PodStatus) (*v1.Pod, error)
	GetPod(ctx context.Context, namespace, name string) (*v1.Pod, error)
	CreatePod(ctx context.Context, pod *v1.Pod) (*v1.Pod, error)
	DeletePod(ctx context.Context, namespace, name string, uid types.UID) error
}

// WriterConfig tunes the API writes.
type WriterConfig struct {
	MaxInFlight int           // concurrent writes (client-go also rate-limits: --kube-api-qps/burst)
	RetryBase   time.Duration // first retry after a failed write, doubling
	RetryMax    time.Duration
	// RefusedRetryMax caps the back-off of a pod whose status the API
	// server refuses (422, 403, a 409 that a re-read does not fix):
	// default DefaultRefusedRetryMax.
	RefusedRetryMax time.Duration
	Timeout         time.Duration
}

// DefaultRefusedRetryMax is the longest wait between two writes of a
// status the API server refused: a refusal is an answer (the server is up),
// so retrying sooner only adds load; a new status of the pod waits for it
// as well, and a write the server takes again clears the refusal.
const DefaultRefusedRetryMax = time.Minute

// NewWithAPI returns a StatusActor that also writes every pod's status to
// the API server: coalesced per pod (only the newest status is sent), never
// back from a terminal phase, kept while the API server is unreachable and
// flushed when it returns. Static pods get mirror pods.
func NewWithAPI(node *actor.PID, api API, cfg WriterConfig, clk clock.WithDelayedExecution, log *slog.Logger, opts ...Option) actor.Producer {
	if api == nil || clk == nil {
		panic("status.NewWithAPI: api and clock are required")
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 16
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 500 * time.Millisecond
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 10 * time.Second // upstream's status manager syncs every 10 s
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.RefusedRetryMax <= 0 {
		cfg.RefusedRetryMax = DefaultRefusedRetryMax
	}
	if log == nil {
		log = slog.Default()
	}
	return func() actor.Actor {
		a := &Actor{node: node}
		for _, o := range opts {
			o(a)
		}
		a.w = &writer{api: api, cfg: cfg, clk: clk, log: log.With("actor", "status"),
			events: a.events, metrics: a.metrics, changed: func() { a.listed = nil }}
		return a
	}
}

// writer is the API half of the StatusActor (nil in standalone mode).
type writer struct {
	api API
	cfg WriterConfig
	clk clock.WithDelayedExecution
	log *slog.Logger

	events  Recorder // may be nil
	metrics Metrics  // may be nil
	changed func()   // what /pods serves changed (a refusal came or went)

	self    actorkit.Self
	nodeUID types.UID
	node    string

	pods     map[types.UID]*apiPod // by the pod's own UID (the static pod's for mirrors)
	mirrors  map[string]*v1.Pod    // namespace/name -> mirror pod seen in the API
	inflight int
	queue    lanes          // pods waiting for a write slot (lanes.go)
	retry    actorkit.Timer // the earliest retryAt of any pod
	// failing: a write failed (the API server did not answer) and none
	// has succeeded since. The first success after that retries every
	// pod waiting on its back-off at once: the API server is back, so
	// what changed during the outage is flushed now, not up to RetryMax
	// later.
	failing bool
}

// apiPod is one pod's write state.
type apiPod struct {
	uid       types.UID // local UID
	ns, name  string
	static    bool
	spec      *v1.Pod       // the static pod, for its mirror
	apiUID    types.UID     // UID of the API object (the mirror's for static pods)
	desired   *v1.PodStatus // newest status to write
	written   *v1.PodStatus // what the API server holds, as far as we know
	writtenRV string        // the resourceVersion written was read at
	inflight  bool
	queued    bool
	retryAt   time.Time
	failures  int
	finalize  bool // delete from the API once written (graceful deletion done)
	forgotten bool // the pod left the node: delete its mirror
	stale     bool // someone asked to delete the mirror pod: delete it for good, then make it again

	// acked is the desired status of the last patch that succeeded, and
	// ackedAnswer the written status its answer set: while both are what
	// the pod holds, the API server holds the desired status and no
	// comparison is needed to know it (a pod's status is replaced, never
	// changed in place).
	acked, ackedAnswer *v1.PodStatus

	lane int // the lane it waits in while queued
	// pendingSince: when the API server stopped holding the newest status
	// (the first change not written yet); zero when it holds it.
	pendingSince time.Time
	// reread: a refused patch was followed by a re-read of the pod; a
	// refusal after it is the API server's answer to the status itself
	// (refusal.go). Cleared when a write is taken.
	reread bool
	// refused is the API server's last refusal of this pod's status, while
	// no write has been taken since; refusals counts them for the back-off.
	refused  *refusal
	refusals int
}

// writeDone is the result of one write.
type writeDone struct {
	actorkit.Tag
	uid  types.UID
	pod  *v1.Pod       // the API's answer
	sent *v1.PodStatus // a patch's desired status
	op   string
	err  error
}

func (w *writer) start(ctx actor.Context) {
	w.self = actorkit.Start(ctx, w.clk)
	w.pods = map[types.UID]*apiPod{}
	w.mirrors = map[string]*v1.Pod{}
	w.inflight, w.queue, w.retry = 0, lanes{}, actorkit.NewTimer("retry")
}

func (w *writer) stop() {
	w.retry.Stop()
}

// receive handles the writer's messages; false when the message is not its.
func (w *writer) receive(m any) bool {
	switch m := m.(type) {
	case *writeDone:
		if w.self.Mine(m) {
			w.handleDone(m)
		}
	case *actorkit.Fired:
		if w.retry.Fired(w.self, m) {
			w.flushDue()
		}
	case *messages.NodeRegistered:
		w.node, w.nodeUID = m.Name, m.UID
		w.flushDue()
	case *messages.MirrorPod:
		w.handleMirror(m)
	case *messages.PodAPIStatus:
		w.handleAPIStatus(m)
	default:
		return false
	}
	return true
}

func isStatic(p *v1.Pod) bool {
	s, ok := p.Annotations[annotationSource]
	return ok && s != messages.SourceAPI
}

// update takes a pod's newest status.
func (w *writer) update(p *v1.Pod) {
	st := w.pods[p.UID]
	if st == nil {
		st = &apiPod{uid: p.UID, ns: p.Namespace, name: p.Name, static: isStatic(p)}
		if !st.static {
			st.apiUID = p.UID
		} else if m, ok := w.mirrors[p.Namespace+"/"+p.Name]; ok && m.Annotations[annotationMirror] == p.Annotations[annotationHash] {
			st.apiUID, st.written, st.writtenRV = m.UID, m.Status.DeepCopy(), m.ResourceVersion
		}
		w.pods[p.UID] = st
	}
	if st.static {
		st.spec = p
	}
	if st.written != nil && terminal(st.written.Phase) && !terminal(p.Status.Phase) {
		return
	}
	st.desired = &p.Status // read only, as the pod (messages package doc)
	if st.pendingSince.IsZero() {
		st.pendingSince = w.clk.Now()
	}
	w.flush(st)
}

// forget: the pod left the node.
func (w *writer) forget(m *messages.PodForget) {
	st := w.pods[m.UID]
	if st == nil {
		if m.DeleteFromAPI && m.Name != "" {
			st = &apiPod{uid: m.UID, ns: m.Namespace, name: m.Name, apiUID: m.UID}
			w.pods[m.UID] = st
		} else {
			return
		}
	}
	switch {
	case m.DeleteFromAPI:
		st.finalize = true
	case st.finalize:
		// A later plain forget (a second PodActor found nothing left)
		// never cancels the final delete still to be written.
	case st.static:
		st.forgotten = true
	default:
		delete(w.pods, m.UID) // gone from the API already: nothing to write
		return
	}
	w.flush(st)
}

func (w *writer) handleMirror(m *messages.MirrorPod) {
	key := m.Pod.Namespace + "/" + m.Pod.Name
	if m.Deleted {
		delete(w.mirrors, key)
	} else {
		w.mirrors[key] = m.Pod
	}
	for _, st := range w.pods {
		if !st.static || st.ns != m.Pod.Namespace || st.name != m.Pod.Name {
			continue
		}
		switch {
		case !m.Deleted && m.Pod.DeletionTimestamp != nil && st.apiUID == m.Pod.UID:
			// A graceful delete of a mirror pod: finish it and make a new
			// one (as upstream).
			st.stale = true
			w.flush(st)
		case m.Deleted && st.apiUID == m.Pod.UID:
			// Someone deleted the mirror pod: make it again (as upstream).
			st.apiUID, st.written = "", nil
			w.flush(st)
		case !m.Deleted && st.apiUID == "" && m.Pod.Annotations[annotationMirror] == st.spec.Annotations[annotationHash]:
			st.apiUID, st.written, st.writtenRV = m.Pod.UID, m.Pod.Status.DeepCopy(), m.Pod.ResourceVersion
			w.flush(st)
		case !m.Deleted && st.apiUID == m.Pod.UID:
			w.takeAPIStatus(st, m.Pod.ResourceVersion, &m.Pod.Status)
		}
	}
}

// handleAPIStatus: the API server holds this status of a pod now.
func (w *writer) handleAPIStatus(m *messages.PodAPIStatus) {
	if st := w.pods[m.UID]; st != nil && !st.static && m.Status != nil {
		w.takeAPIStatus(st, m.ResourceVersion, m.Status)
	}
}

// takeAPIStatus makes a status the API server holds, newer than the last
// one written or read, what is written; where another writer changed it
// (the node lifecycle controller marks the pods of a node that stopped
// reporting not ready), the pod's own status is written again, as
// upstream's status manager reconciles. The echo of our own writes is no
// newer and changes nothing.
func (w *writer) takeAPIStatus(st *apiPod, rv string, status *v1.PodStatus) {
	if st.inflight || st.written == nil || !newerRV(rv, st.writtenRV) {
		return
	}
	if apiequality.Semantic.DeepEqual(*status, *st.written) {
		st.writtenRV = rv
		return
	}
	st.written, st.writtenRV = status, rv
	if st.desired != nil && !sameStatus(merged(st.desired, st.written), st.written) {
		w.log.Info("pod status changed in the API server by another writer, writing ours again", "pod", st.ns+"/"+st.name)
	}
	w.flush(st)
}

// newerRV: resourceVersion a is newer than b. They are etcd revisions
// (decimal) in practice; where either is not, nothing is taken as newer.
func newerRV(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x > y
}

func (w *writer) flushDue() {
	for _, st := range w.pods {
		w.flush(st)
	}
}

// flush starts the next write of a pod if one is needed and allowed.
func (w *writer) flush(st *apiPod) {
	if st.inflight {
		return
	}
	now := w.clk.Now()
	if now.Before(st.retryAt) {
		w.wakeAt(st.retryAt)
		return
	}
	op := w.next(st)
	if op == "" {
		st.pendingSince = time.Time{} // the API server holds the newest
		return
	}
	if w.inflight >= w.cfg.MaxInFlight {
		if l := w.laneOf(st, op); !st.queued || l < st.lane {
			// A pod moves up when its newest status deserves it (its
			// first Running status after a terminal rejection's lane); its
			// older entry is skipped when reached.
			st.queued, st.lane = true, l
			w.queue.push(l, st.uid)
		}
		return
	}
	w.do(st, op)
}

// next is the write a pod needs now, or "".
func (w *writer) next(st *apiPod) string {
	switch {
	case st.static && st.forgotten:
		if st.apiUID != "" {
			return "delete-mirror"
		}
		delete(w.pods, st.uid)
		return ""
	case st.static && st.stale && st.apiUID != "":
		return "delete-mirror"
	case st.static && st.apiUID == "":
		if w.nodeUID == "" || st.spec == nil {
			return "" // the mirror pod is owned by the Node: wait for its UID
		}
		return "create-mirror"
	case st.desired != nil && (st.desired != st.acked || st.written != st.ackedAnswer) &&
		(st.written == nil || !sameStatus(merged(st.desired, st.written), st.written)):
		return "patch"
	case st.finalize:
		return "delete"
	}
	return ""
}

func (w *writer) do(st *apiPod, op string) {
	st.inflight = true
	w.inflight++
	api, uid := w.api, st.uid
	ns, name, apiUID := st.ns, st.name, st.apiUID
	var sent *v1.PodStatus
	var f func(ctx context.Context) (*v1.Pod, error)
	switch op {
	case "patch":
		// Both are read only (a status is replaced, never changed): the
		// write reads them off the mailbox without copies.
		old := &v1.PodStatus{}
		if st.written != nil {
			old = st.written
		}
		desired := merged(st.desired, st.written)
		sent = st.desired
		f = func(ctx context.Context) (*v1.Pod, error) {
			return api.PatchPodStatus(ctx, ns, name, apiUID, old, desired)
		}
	case "refresh":
		f = func(ctx context.Context) (*v1.Pod, error) { return api.GetPod(ctx, ns, name) }
	case "delete", "delete-mirror":
		f = func(ctx context.Context) (*v1.Pod, error) { return nil, api.DeletePod(ctx, ns, name, apiUID) }
	case "create-mirror":
		mirror := w.mirrorOf(st.spec)
		f = func(ctx context.Context) (*v1.Pod, error) { return api.CreatePod(ctx, mirror) }
	}
	actorkit.Go(w.self, w.cfg.Timeout, func(ctx context.Context) *writeDone {
		p, err := f(ctx)
		return &writeDone{uid: uid, pod: p, sent: sent, op: op, err: err}
	})
}

// mirrorOf is the API copy of a static pod: same metadata and spec, the
// config.mirror annotation and the Node as owner (NodeRestriction wants it).
func (w *writer) mirrorOf(p *v1.Pod) *v1.Pod {
	m := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, Labels: p.Labels,
			Annotations: map[string]string{},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: w.node, UID: w.nodeUID, Controller: ptr(true),
			}},
		},
		Spec: *p.Spec.DeepCopy(),
	}
	for k, v := range p.Annotations {
		m.Annotations[k] = v
	}
	m.Annotations[annotationMirror] = p.Annotations[annotationHash]
	return m
}

func ptr[T any](v T) *T { return &v }

func (w *writer) handleDone(m *writeDone) {
	w.inflight--
	defer w.dequeue()
	st := w.pods[m.uid]
	if st == nil {
		return
	}
	st.inflight = false
	switch {
	case m.err == nil && m.op == "refresh" && m.pod.UID != st.apiUID && !st.static:
		// The re-read found another pod of that name: ours is gone.
		w.log.Info("pod no longer in the API server", "pod", st.ns+"/"+st.name, "uid", st.apiUID, "found", m.pod.UID)
		delete(w.pods, st.uid)
		w.changedIf(st)
		return
	case m.err == nil && m.op == "refresh" && m.pod.UID != st.apiUID:
		st.apiUID, st.written = "", nil // the mirror pod was replaced: make ours again
	case m.err == nil:
		st.failures, st.retryAt = 0, time.Time{}
		if w.failing {
			w.failing = false
			defer w.retryAllNow()
		}
		switch m.op {
		case "patch", "refresh":
			st.written, st.writtenRV = &m.pod.Status, m.pod.ResourceVersion // the API's answer is ours alone
			if m.op == "patch" {
				st.acked, st.ackedAnswer = m.sent, st.written
				w.accepted(st)
				if m.sent == st.desired && !st.pendingSince.IsZero() {
					if w.metrics != nil {
						w.metrics.ObservePodStatusSync(w.clk.Since(st.pendingSince))
					}
					st.pendingSince = time.Time{}
				}
			}
		case "create-mirror":
			st.apiUID, st.written, st.writtenRV = m.pod.UID, &m.pod.Status, m.pod.ResourceVersion
			w.log.Info("mirror pod created", "pod", st.ns+"/"+st.name, "uid", m.pod.UID)
		case "delete", "delete-mirror":
			w.log.Info("pod deleted from the API server", "pod", st.ns+"/"+st.name, "mirror", m.op == "delete-mirror")
			if m.op == "delete-mirror" && !st.forgotten {
				st.apiUID, st.written, st.stale = "", nil, false // make it again
				break
			}
			delete(w.pods, st.uid)
			return
		}
	case errdefs.IsNotFound(m.err) && (m.op == "delete" || m.op == "delete-mirror"):
		if m.op == "delete-mirror" && !st.forgotten {
			st.apiUID, st.written, st.stale = "", nil, false
			break
		}
		delete(w.pods, st.uid)
		return
	case errdefs.IsNotFound(m.err) && st.static:
		st.apiUID, st.written = "", nil // the mirror pod is gone: make it again
	case errdefs.IsNotFound(m.err):
		// The API pod is gone: nothing of ours to write any more.
		w.log.Info("pod no longer in the API server", "pod", st.ns+"/"+st.name, "err", m.err)
		delete(w.pods, st.uid)
		w.changedIf(st)
		return
	case errdefs.IsAlreadyExists(m.err) && m.op == "create-mirror":
		st.written = nil
		w.refreshMirror(st)
		return
	case m.op == "patch" && isRefusal(m.err):
		if w.failing {
			// A refusal is an answer: the API server is back.
			w.failing = false
			defer w.retryAllNow()
		}
		if !st.reread {
			// Our idea of what the API holds may be wrong (another writer,
			// a field that may not change, a UID precondition on a pod
			// replaced): read it, merge, then patch again.
			st.reread = true
			w.do(st, "refresh")
			return
		}
		w.refuse(st, m.err)
	default:
		w.failing = true
		st.failures++
		d := actorkit.Backoff{Base: w.cfg.RetryBase, Cap: w.cfg.RetryMax}.Delay(st.failures)
		st.retryAt = w.clk.Now().Add(d)
		w.log.Warn("pod status write failed, keeping the newest status", "pod", st.ns+"/"+st.name, "op", m.op, "retry_in", d, "err", m.err)
	}
	w.flush(st)
}

// retryAllNow: the API server answers again; every pod waiting on its
// back-off is written now (their failure counts stay until each succeeds).
func (w *writer) retryAllNow() {
	n := 0
	for _, st := range w.pods {
		if !st.retryAt.IsZero() && st.refused == nil {
			st.retryAt = time.Time{}
			n++
		}
	}
	if n > 0 {
		w.log.Info("API server answers again, flushing the pod status kept meanwhile", "pods", n)
		w.flushDue()
	}
}

// refreshMirror adopts an existing mirror pod (ours from before a restart,
// or a stale one to replace).
func (w *writer) refreshMirror(st *apiPod) {
	if m, ok := w.mirrors[st.ns+"/"+st.name]; ok && m.Annotations[annotationMirror] == st.spec.Annotations[annotationHash] {
		st.apiUID, st.written, st.writtenRV = m.UID, m.Status.DeepCopy(), m.ResourceVersion
		w.flush(st)
		return
	}
	// Wait for the API source to report it; look again after a retry delay.
	st.failures++
	st.retryAt = w.clk.Now().Add(w.cfg.RetryBase)
	w.wakeAt(st.retryAt)
}

// dequeue starts the writes of queued pods while slots are free, taking
// them from the lanes in their turn (lanes.go). An entry of a pod gone or
// moved to another lane is skipped.
func (w *writer) dequeue() {
	for w.inflight < w.cfg.MaxInFlight {
		uid, lane, ok := w.queue.pop()
		if !ok {
			return
		}
		if st := w.pods[uid]; st != nil && st.queued && st.lane == lane {
			st.queued = false
			w.flush(st)
		}
	}
}

// wakeAt arms the retry timer for t, unless it fires earlier already.
func (w *writer) wakeAt(t time.Time) {
	w.retry.ArmAt(w.self, t)
}
