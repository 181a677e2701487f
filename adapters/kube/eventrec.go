package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/reference"
	"k8s.io/utils/clock"
)

// Events is cluster mode's event recorder: it writes core/v1 Events as the
// node (source component "kubelet", host the node name, as upstream, so
// kubectl describe shows them as usual), with client-go's recorder's
// rules:
//
//   - an event seen again (same object, type, reason and message) patches
//     the Event it made (count and lastTimestamp), in place of a new one;
//   - more than 9 different messages of one reason on one object within
//     10 minutes are combined into one Event, "(combined from similar
//     events): <message>";
//   - each object may write 25 events of a type at once, then one per 5
//     minutes (the spam filter);
//   - a write the API server did not answer is tried 12 times, 10 s apart;
//     one it refused is dropped;
//   - a full queue drops the event rather than block the caller.
//
// Unlike client-go's, it keeps what it knows per object, and forgets an
// object when told (Forget: the NodeActor, when a pod's actor has stopped)
// or after an hour without events (the API server's default event TTL).
// client-go keeps three caches of 4,096 keys each: after a thousand pods
// came and went they held ~2.5 MB, more than the idle agent's whole live
// heap, scattered among the spans the pods' starts had used (BENCHMARKS.md,
// seventh round).
//
// Objects are spread over a few shards by UID (kind, namespace and name
// without one); each shard writes in order with its own goroutine and owns
// its objects' state, so an object's events, and its Forget, stay in the
// order they were recorded.
type Events struct {
	cs     kubernetes.Interface
	source v1.EventSource
	clk    clock.WithTicker
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	shards []*eventShard

	retryEvery time.Duration // between tries of a write (upstream 10 s)
	dropped    atomic.Uint64 // events dropped because their shard's queue was full
	dropLogged atomic.Int64  // unix seconds of the last log of a drop
}

// Upstream's figures (client-go tools/record).
const (
	eventShards        = 4
	eventQueue         = 256 // per shard: 1,024 in all (client-go: 1,000)
	eventTries         = 12
	eventRetryEvery    = 10 * time.Second
	eventSpamBurst     = 25
	eventSpamQPS       = 1.0 / 300
	eventSimilarMax    = 10
	eventSimilarWindow = 10 * time.Minute
	eventIdleForget    = time.Hour
	eventSweepEvery    = time.Minute
	eventSeenMax       = 32 // distinct events remembered per object (least recently seen out first)
	eventCombinedText  = "(combined from similar events): "
)

// eventItem is what a shard's queue carries: an event, or the object to
// forget (forget set).
type eventItem struct {
	ref             v1.ObjectReference
	typ             string
	reason, message string
	at              time.Time
	forget          string
}

type eventShard struct {
	ch   chan *eventItem // pointers: a queue of 1,024 items is 8 KiB, not 200
	corr *eventCorrelator

	mu        sync.Mutex
	forgetful []string // Forgets that found the queue full: applied when it next runs dry
}

// NewEvents starts the cluster mode's event recorder on the client's event
// clientset (its own --event-qps and --event-burst). Stop ends it.
func (c *Client) NewEvents(clk clock.WithTicker, log *slog.Logger) *Events {
	return newEvents(c.events, c.nodeName, clk, log)
}

func newEvents(cs kubernetes.Interface, nodeName string, clk clock.WithTicker, log *slog.Logger) *Events {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Events{
		cs: cs, source: v1.EventSource{Component: "kubelet", Host: nodeName}, clk: clk, log: log,
		ctx: ctx, cancel: cancel, retryEvery: eventRetryEvery,
	}
	for range eventShards {
		s := &eventShard{ch: make(chan *eventItem, eventQueue), corr: newEventCorrelator()}
		e.shards = append(e.shards, s)
		e.wg.Add(1)
		go e.run(s)
	}
	return e
}

// Stop ends the recorder: the events still queued are not written.
func (e *Events) Stop() {
	e.cancel()
	e.wg.Wait()
}

// Eventf records an event about object (a pod, a node, an object
// reference). It never blocks.
func (e *Events) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if eventtype != v1.EventTypeNormal && eventtype != v1.EventTypeWarning {
		e.log.Error("event not recorded: unsupported type", "type", eventtype, "reason", reason)
		return
	}
	ref, err := objectRef(object)
	if err != nil {
		e.log.Error("event not recorded: no reference to its object", "reason", reason, "err", err)
		return
	}
	var msg string
	if s, ok := onlyString(messageFmt, args); ok {
		msg = s // the PodActor's "%s", formatted already
	} else {
		msg = fmt.Sprintf(messageFmt, args...)
	}
	it := &eventItem{ref: ref, typ: eventtype, reason: reason, message: msg, at: e.clk.Now()}
	s := e.shard(objectKey(&ref))
	select {
	case s.ch <- it:
	default:
		n := e.dropped.Add(1)
		// One line a minute at most: a flood of events must not become a
		// flood of log lines.
		now := e.clk.Now().Unix()
		if last := e.dropLogged.Load(); now-last >= 60 && e.dropLogged.CompareAndSwap(last, now) {
			e.log.Warn("events dropped: the queue to the API server is full", "dropped_total", n, "reason", reason, "object", ref.Namespace+"/"+ref.Name)
		}
	}
}

// Dropped is the number of events dropped because the queue was full.
func (e *Events) Dropped() uint64 { return e.dropped.Load() }

// Forget drops what the recorder knows of the object with this UID (a pod
// that is gone), after the events recorded for it so far. It never blocks.
func (e *Events) Forget(uid types.UID) {
	if uid == "" {
		return
	}
	s := e.shard(string(uid))
	select {
	case s.ch <- &eventItem{forget: string(uid)}:
	default:
		s.mu.Lock()
		s.forgetful = append(s.forgetful, string(uid))
		s.mu.Unlock()
	}
}

func (e *Events) shard(key string) *eventShard {
	return e.shards[maphash.String(eventSeed, key)%uint64(len(e.shards))]
}

func (e *Events) run(s *eventShard) {
	defer e.wg.Done()
	sweep := e.clk.NewTicker(eventSweepEvery)
	defer sweep.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-sweep.C():
			s.applyForgets()
			s.corr.sweep(e.clk.Now())
		case it := <-s.ch:
			if it.forget != "" {
				s.corr.forget(it.forget)
			} else {
				e.record(s, it)
			}
			if len(s.ch) == 0 {
				s.applyForgets()
			}
		}
	}
}

func (s *eventShard) applyForgets() {
	s.mu.Lock()
	keys := s.forgetful
	s.forgetful = nil
	s.mu.Unlock()
	for _, k := range keys {
		s.corr.forget(k)
	}
}

// record correlates the event and writes it, trying again while the API
// server does not answer.
func (e *Events) record(s *eventShard, it *eventItem) {
	ev, seen := s.corr.correlate(it, e.source)
	if ev == nil {
		return // the spam filter's
	}
	for try := 1; ; try++ {
		got, err := e.write(ev, ev.Count > 1)
		if err == nil {
			seen.name = got.Name
			return
		}
		if !retriable(err) {
			// A namespace being deleted refuses its pods' last events: as
			// upstream, that is no news (nor is a name taken).
			level := slog.LevelWarn
			if apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
				level = slog.LevelDebug
			}
			e.log.Log(e.ctx, level, "event refused by the API server, dropped", "reason", ev.Reason, "object", ev.InvolvedObject.Namespace+"/"+ev.InvolvedObject.Name, "err", err)
			return
		}
		if try >= eventTries {
			e.log.Error("event not written after 12 tries, dropped", "reason", ev.Reason, "object", ev.InvolvedObject.Namespace+"/"+ev.InvolvedObject.Name, "err", err)
			return
		}
		delay := e.retryEvery
		if try == 1 { // spread the first retry, so that nodes do not come back in step
			delay = time.Duration(rand.Float64() * float64(delay))
		}
		select {
		case <-e.ctx.Done():
			return
		case <-e.clk.After(delay):
		}
	}
}

// write creates the Event, or patches the one it repeats (and creates it
// again if it was deleted, as by its TTL).
func (e *Events) write(ev *v1.Event, patch bool) (*v1.Event, error) {
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	api := e.cs.CoreV1().Events(ev.Namespace)
	if patch {
		body, err := json.Marshal(eventPatch{Count: ev.Count, LastTimestamp: ev.LastTimestamp, Message: ev.Message})
		if err != nil {
			return nil, err
		}
		got, err := api.Patch(ctx, ev.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{})
		if !apierrors.IsNotFound(err) {
			return got, err
		}
	}
	ev.ResourceVersion = ""
	return api.Create(ctx, ev, metav1.CreateOptions{})
}

// eventPatch is the patch of a repeated event, as client-go's.
type eventPatch struct {
	Count         int32       `json:"count"`
	LastTimestamp metav1.Time `json:"lastTimestamp"`
	Message       string      `json:"message"`
}

// retriable: the API server did not answer, or answered that it could not
// now; an answer about the event itself (invalid, forbidden, the namespace
// terminating) will be the same next time.
func retriable(err error) bool {
	var status apierrors.APIStatus
	var construct *rest.RequestConstructionError
	switch {
	case errors.As(err, &construct):
		return false
	case errors.As(err, &status):
		return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
			apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err)
	}
	return true
}

// objectRef is the event's involvedObject: a pod's built directly (the
// hot path: three events per container start), anything else through the
// scheme, as client-go does.
func objectRef(object runtime.Object) (v1.ObjectReference, error) {
	switch o := object.(type) {
	case *v1.Pod:
		if o == nil {
			return v1.ObjectReference{}, errors.New("nil pod")
		}
		return v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: o.Namespace, Name: o.Name,
			UID: o.UID, ResourceVersion: o.ResourceVersion}, nil
	case *v1.ObjectReference:
		if o == nil {
			return v1.ObjectReference{}, errors.New("nil reference")
		}
		return *o, nil // as given: upstream's Node events carry no apiVersion either
	}
	r, err := reference.GetReference(scheme.Scheme, object)
	if err != nil {
		return v1.ObjectReference{}, err
	}
	return *r, nil
}

// objectKey is the key of an object's state: its UID, or its kind,
// namespace and name.
func objectKey(ref *v1.ObjectReference) string {
	if ref.UID != "" {
		return string(ref.UID)
	}
	return ref.Kind + "/" + ref.Namespace + "/" + ref.Name
}

// eventName is the Event's name, as client-go's: the object's name and the
// time in hexadecimal nanoseconds, or a random one where that is not a
// valid name.
func eventName(obj string, unixNano int64) string {
	name := fmt.Sprintf("%s.%x", obj, unixNano)
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return string(uuid.NewUUID())
	}
	return name
}

// onlyString is the string of Eventf(..., "%s", s).
func onlyString(format string, args []any) (string, bool) {
	if format != "%s" || len(args) != 1 {
		return "", false
	}
	s, ok := args[0].(string)
	return s, ok
}
