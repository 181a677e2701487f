// Package status is the StatusActor: it keeps the newest status of every pod
// and serves reads; in cluster mode it also writes them to the API server
// (writer.go).
package status

import (
	"sort"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/messages"
)

// New returns the StatusActor producer. node, when given, is asked to have
// every pod's status republished after a restart of this actor.
func New(node *actor.PID) actor.Producer {
	return func() actor.Actor { return &Actor{node: node} }
}

// Actor is the StatusActor. Pods it stores are never mutated after they
// arrive (senders deep-copy), so reads may share them.
type Actor struct {
	node *actor.PID
	pods map[types.UID]*v1.Pod
	w    *writer // cluster mode: writes to the API server
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.pods = map[types.UID]*v1.Pod{}
		if a.w != nil {
			a.w.start(ctx)
		}
		if a.node != nil {
			// A (re)started StatusActor starts empty: have everything
			// republished (nothing yet at the first start).
			ctx.Send(a.node, &messages.Resync{})
		}
	case *actor.Restarting, *actor.Stopping:
		if a.w != nil {
			a.w.stop()
		}
	case *messages.PodStatusUpdate:
		a.handleUpdate(m)
	case *messages.PodForget:
		delete(a.pods, m.UID)
		if a.w != nil {
			a.w.forget(m)
		}
	case *messages.GetPods:
		ctx.Respond(a.list())
	case *messages.GetPod:
		ctx.Respond(a.find(m.Namespace, m.Name))
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
	if old, ok := a.pods[m.Pod.UID]; ok && terminal(old.Status.Phase) && !terminal(m.Pod.Status.Phase) {
		// Never move a pod back from a terminal phase (as upstream).
		return
	}
	a.pods[m.Pod.UID] = m.Pod
	if a.w != nil {
		a.w.update(m.Pod)
	}
}

func terminal(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

// find looks one pod up without copying the others (a log or exec request
// on a node with thousands of pods).
func (a *Actor) find(namespace, name string) *messages.PodFound {
	for _, p := range a.pods {
		if p.Namespace == namespace && p.Name == name {
			return &messages.PodFound{Pod: p.DeepCopy()}
		}
	}
	return &messages.PodFound{}
}

func (a *Actor) list() *messages.PodList {
	out := &messages.PodList{Items: make([]v1.Pod, 0, len(a.pods))}
	for _, p := range a.pods {
		out.Items = append(out.Items, *p)
	}
	sort.Slice(out.Items, func(i, j int) bool {
		if out.Items[i].Namespace != out.Items[j].Namespace {
			return out.Items[i].Namespace < out.Items[j].Namespace
		}
		return out.Items[i].Name < out.Items[j].Name
	})
	return out
}
