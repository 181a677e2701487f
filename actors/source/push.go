package source

import (
	"log/slog"
	"sort"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// pushStore holds the push source's pods. It belongs to one producer and is
// used by one actor incarnation at a time (a restart runs on the mailbox), so
// the pods survive a restart of the actor (not of the process).
type pushStore struct {
	pods   map[string]*v1.Pod // by namespace/name
	shrunk actorkit.Shrinker
}

// shrink rebuilds the map once most pods are gone (Go keeps a map's memory
// after its keys are deleted).
func (s *pushStore) shrink() { s.pods = actorkit.Shrink(&s.shrunk, s.pods) }

// push is the node API's push source (messages.SourcePush). Pods arrive
// already decoded, validated and defaulted by the node API layer; the actor
// keys them by namespace/name and tells the NodeActor what changed.
//
// Copies: the PushPod's pod is the node API's own decoding, made for this
// message (the receiver owns it); the store keeps it and the PodUpdates
// share it read only, as every desired pod is shared from its source to
// the PodActor (messages' package doc). So a pushed pod is held once, not
// once in the store and once more along the path.
//
// Restarts: the pods are kept in a store owned by the producer, so a
// restarted push actor still knows them; on Started it re-sends them all as
// an OpSet (idempotent for the NodeActor) before SourceSynced. Pods pushed
// before a process restart are lost, as upstream has no push source to copy:
// their containers are orphans once all sources are synced.
type push struct {
	node     *actor.PID
	nodeName string
	log      *slog.Logger
	store    *pushStore
}

// NewPush returns the push source. nodeName is informational (logged).
func NewPush(node *actor.PID, nodeName string, log *slog.Logger) actor.Producer {
	if node == nil {
		panic("source: node is required")
	}
	if log == nil {
		log = slog.Default()
	}
	log = log.With("source", messages.SourcePush)
	store := &pushStore{pods: map[string]*v1.Pod{}}
	return func() actor.Actor {
		return &push{node: node, nodeName: nodeName, log: log, store: store}
	}
}

// Receive implements actor.Actor.
func (a *push) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.handleStarted(ctx)
	case *actor.Restarting:
		a.handleRestarting()
	case *actor.Stopping:
		a.handleStopping()
	case *messages.PushPod:
		a.handlePushPod(ctx, m)
	case *messages.RemovePushedPod:
		a.handleRemovePushedPod(ctx, m)
	case *messages.Resync:
		a.sendAll(ctx)
	}
}

func (a *push) handleStarted(ctx actor.Context) {
	if len(a.store.pods) > 0 {
		a.log.Info("restarted, re-sending pushed pods", "pods", len(a.store.pods))
	}
	a.sendAll(ctx)
}

// sendAll sends every pushed pod as one OpSet, then SourceSynced.
func (a *push) sendAll(ctx actor.Context) {
	if n := len(a.store.pods); n > 0 {
		keys := make([]string, 0, n)
		for k := range a.store.pods {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		pods := make([]*v1.Pod, 0, n)
		for _, k := range keys {
			pods = append(pods, a.store.pods[k])
		}
		ctx.Send(a.node, &messages.PodUpdate{Source: messages.SourcePush, Op: messages.OpSet, Pods: pods})
	}
	ctx.Send(a.node, &messages.SourceSynced{Source: messages.SourcePush})
}

func (a *push) handleRestarting() {
	a.log.Warn("restarting; pushed pods are kept", "pods", len(a.store.pods))
}

func (a *push) handleStopping() {}

func (a *push) handlePushPod(ctx actor.Context, m *messages.PushPod) {
	if m.Pod == nil || m.Pod.Name == "" || m.Pod.UID == "" {
		ctx.Respond(&messages.PushResult{Err: "pod with a name and a UID is required"})
		return
	}
	pod := m.Pod // the node API's own decoding, handed over (see push)
	key := pod.Namespace + "/" + pod.Name
	old, existed := a.store.pods[key]
	switch {
	case existed && samePushedPod(old, pod):
		ctx.Respond(&messages.PushResult{UID: old.UID, Name: pod.Name, Existed: true, Unchanged: true})
		return
	case existed && !m.Replace:
		a.log.Info("push refused: the name holds another pod", "pod", key, "uid", old.UID, "refused", pod.UID)
		ctx.Respond(&messages.PushResult{UID: old.UID, Name: pod.Name, Existed: true, Conflict: true})
		return
	case existed && old.UID != pod.UID:
		ctx.Send(a.node, &messages.PodUpdate{Source: messages.SourcePush, Op: messages.OpRemove, Pods: []*v1.Pod{old}})
		a.log.Info("pushed pod replaced", "pod", key, "old", old.UID, "uid", pod.UID)
	}
	a.store.pods[key] = pod
	a.store.shrink() // sees the peak
	ctx.Send(a.node, &messages.PodUpdate{Source: messages.SourcePush, Op: messages.OpAdd, Pods: []*v1.Pod{pod}})
	ctx.Respond(&messages.PushResult{UID: pod.UID, Name: pod.Name, Existed: existed})
}

// configSeenAnnotation is the time a source first saw a pod
// (adapters/manifest sets it, as upstream): two pushes of one manifest
// differ in it only.
const configSeenAnnotation = "kubernetes.io/config.seen"

// samePushedPod: b is a again, pushed twice (an idempotent retry): the same
// UID, spec, labels and annotations but when it was seen.
func samePushedPod(a, b *v1.Pod) bool {
	return a.UID == b.UID && equality.Semantic.DeepEqual(a.Spec, b.Spec) &&
		equality.Semantic.DeepEqual(a.Labels, b.Labels) && sameButSeen(a.Annotations, b.Annotations)
}

// sameButSeen: a and b hold the same annotations, config.seen aside.
func sameButSeen(a, b map[string]string) bool {
	for k, v := range a {
		if bv, ok := b[k]; k != configSeenAnnotation && (!ok || bv != v) {
			return false
		}
	}
	for k := range b {
		if _, ok := a[k]; k != configSeenAnnotation && !ok {
			return false
		}
	}
	return true
}

func (a *push) handleRemovePushedPod(ctx actor.Context, m *messages.RemovePushedPod) {
	key := m.Namespace + "/" + m.Name
	old, ok := a.store.pods[key]
	if !ok {
		ctx.Respond(&messages.PushResult{Name: m.Name, NotFound: true})
		return
	}
	delete(a.store.pods, key)
	a.store.shrink()
	ctx.Send(a.node, &messages.PodUpdate{Source: messages.SourcePush, Op: messages.OpRemove, Pods: []*v1.Pod{old}})
	ctx.Respond(&messages.PushResult{UID: old.UID, Name: old.Name})
}
