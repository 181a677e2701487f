package source

import (
	"context"
	"log/slog"
	"math/rand/v2"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// MirrorAnnotation marks a mirror pod (the API's copy of a static pod).
const MirrorAnnotation = "kubernetes.io/config.mirror"

// PodWatcher watches the pods bound to this node until ctx is done, calling
// upsert and remove for every change and synced once the first list is in.
// Callbacks run on the watcher's goroutine. The pods passed are read only
// for both sides, as the objects of a client-go informer's cache: the
// watcher never changes one it passed, and the source shares them with
// the other actors (see the messages package doc).
type PodWatcher interface {
	WatchPods(ctx context.Context, upsert, remove func(*v1.Pod), synced func())
}

// NewAPI returns the API pod source (messages.SourceAPI): pods bound to this
// node go to the NodeActor; mirror pods are not run, their presence goes to
// the StatusActor (which keeps them).
func NewAPI(node, status *actor.PID, w PodWatcher, log *slog.Logger) actor.Producer {
	if node == nil || status == nil || w == nil {
		panic("source.NewAPI: node, status and watcher are required")
	}
	if log == nil {
		log = slog.Default()
	}
	log = log.With("source", messages.SourceAPI)
	return func() actor.Actor { return &apiSource{node: node, status: status, w: w, log: log} }
}

type apiSource struct {
	node, status *actor.PID
	w            PodWatcher
	log          *slog.Logger

	gen    uint64
	cancel context.CancelFunc
	pods   map[types.UID]*v1.Pod
	shrink actorkit.Shrinker // of pods
	synced bool
}

type (
	apiUpsert struct {
		gen uint64
		pod *v1.Pod
	}
	apiRemove struct {
		gen uint64
		pod *v1.Pod
	}
	apiSynced struct{ gen uint64 }
)

func (a *apiSource) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.handleStarted(ctx)
	case *actor.Restarting, *actor.Stopping:
		if a.cancel != nil {
			a.cancel()
		}
	case *apiUpsert:
		if m.gen == a.gen {
			a.handleUpsert(ctx, m.pod)
		}
	case *apiRemove:
		if m.gen == a.gen {
			a.handleRemove(ctx, m.pod)
		}
	case *apiSynced:
		if m.gen == a.gen && !a.synced {
			a.synced = true
			a.log.Info("pods from the API server synced", "pods", len(a.pods))
			ctx.Send(a.node, &messages.SourceSynced{Source: messages.SourceAPI})
		}
	case *messages.Resync:
		a.handleResync(ctx)
	}
}

func (a *apiSource) handleStarted(ctx actor.Context) {
	a.gen = rand.Uint64()
	a.pods, a.shrink = map[types.UID]*v1.Pod{}, actorkit.Shrinker{}
	sys, self, gen := ctx.ActorSystem(), ctx.Self(), a.gen
	wctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	// A restarted source starts a new watch: its initial list re-adds every
	// pod (the NodeActor ignores what did not change).
	go a.w.WatchPods(wctx,
		func(p *v1.Pod) { sys.Root.Send(self, &apiUpsert{gen: gen, pod: p}) },
		func(p *v1.Pod) { sys.Root.Send(self, &apiRemove{gen: gen, pod: p}) },
		func() { sys.Root.Send(self, &apiSynced{gen: gen}) })
}

func isMirror(p *v1.Pod) bool {
	_, ok := p.Annotations[MirrorAnnotation]
	return ok
}

// relevant is what the NodeActor acts on: not the status (which actorlet
// itself writes) nor the resource version.
func relevant(a, b *v1.Pod) bool {
	return !sameSpec(a, b) ||
		!apiequality.Semantic.DeepEqual(a.Labels, b.Labels) ||
		!apiequality.Semantic.DeepEqual(a.Annotations, b.Annotations) ||
		!apiequality.Semantic.DeepEqual(a.DeletionTimestamp, b.DeletionTimestamp) ||
		!apiequality.Semantic.DeepEqual(a.DeletionGracePeriodSeconds, b.DeletionGracePeriodSeconds) ||
		// The conditions of readiness gates (set by others) make Ready.
		!apiequality.Semantic.DeepEqual(podspec.ReadinessGateConditions(a), podspec.ReadinessGateConditions(b))
}

// sameSpec reports whether two versions of a pod have the same spec. The
// API server (1.33 and later) sets a pod's generation at its creation and
// bumps it with every change of its spec; older ones leave it 0. Two
// versions of the same generation, not 0, have the same spec: most updates
// of a pod are of its status (the echo of every status patch) and cost no
// comparison of the spec.
func sameSpec(a, b *v1.Pod) bool {
	if a.Generation > 0 && a.Generation == b.Generation && a.UID == b.UID {
		return true
	}
	return apiequality.Semantic.DeepEqual(a.Spec, b.Spec)
}

func (a *apiSource) handleUpsert(ctx actor.Context, p *v1.Pod) {
	if isMirror(p) {
		ctx.Send(a.status, &messages.MirrorPod{Pod: p})
		return
	}
	old, ok := a.pods[p.UID]
	a.pods[p.UID] = p
	a.pods = actorkit.Shrink(&a.shrink, a.pods) // sees the peak
	if ok && old.ResourceVersion != "" && old.ResourceVersion == p.ResourceVersion {
		// The same version of the object again (a watch restarted and
		// listed it): nothing in it is new.
		return
	}
	// p is read only from here on: the NodeActor, the PodActor and the
	// StatusActor share it (see the messages package doc).
	if !ok || !apiequality.Semantic.DeepEqual(old.Status, p.Status) {
		// The StatusActor writes its own status again where another
		// writer changed it (e.g. Ready=False from the node lifecycle
		// controller after an API server outage).
		ctx.Send(a.status, &messages.PodAPIStatus{UID: p.UID, ResourceVersion: p.ResourceVersion, Status: &p.Status})
	}
	if ok && !relevant(old, p) {
		return
	}
	ctx.Send(a.node, &messages.PodUpdate{Source: messages.SourceAPI, Op: messages.OpAdd, Pods: []*v1.Pod{p}})
}

func (a *apiSource) handleRemove(ctx actor.Context, p *v1.Pod) {
	if isMirror(p) {
		ctx.Send(a.status, &messages.MirrorPod{Pod: p, Deleted: true})
		return
	}
	delete(a.pods, p.UID)
	a.pods = actorkit.Shrink(&a.shrink, a.pods)
	ctx.Send(a.node, &messages.PodUpdate{Source: messages.SourceAPI, Op: messages.OpRemove, Pods: []*v1.Pod{p}})
}

func (a *apiSource) handleResync(ctx actor.Context) {
	if !a.synced {
		return // the first list is still to come
	}
	pods := make([]*v1.Pod, 0, len(a.pods))
	for _, p := range a.pods {
		pods = append(pods, p) // read only, shared
	}
	ctx.Send(a.node, &messages.PodUpdate{Source: messages.SourceAPI, Op: messages.OpSet, Pods: pods})
}
