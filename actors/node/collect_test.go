package node

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"weak"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

// stubPodActor is a stub PodActor that holds what a real one holds (its pod)
// and a payload, and reports PodTerminated when killed.
type stubPodActor struct {
	uid     types.UID
	pod     *v1.Pod
	payload []byte
	stopped func()
}

func (p *stubPodActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.SyncPod:
		p.pod = m.Pod
	case *messages.KillPod:
		c.Send(c.Parent(), &messages.PodTerminated{UID: p.uid})
	case *actor.Stopped:
		p.stopped()
	}
}

// TestDeletedPodsActorsAreCollected: once every pod of a source is removed
// and its PodActor stopped, the NodeActor keeps none of them reachable.
// More than 256 pods, so the NodeActor's maps are rebuilt on the way.
func TestDeletedPodsActorsAreCollected(t *testing.T) {
	const n = 300
	var (
		mu      sync.Mutex
		made    []weak.Pointer[stubPodActor]
		stopped int
	)
	podProps := func(uid types.UID) *actor.Props {
		return actor.PropsFromProducer(func() actor.Actor {
			p := &stubPodActor{uid: uid, payload: make([]byte, 16<<10), stopped: func() {
				mu.Lock()
				stopped++
				mu.Unlock()
			}}
			mu.Lock()
			made = append(made, weak.Make(p))
			mu.Unlock()
			return p
		})
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	status := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	node, err := sys.Root.SpawnNamed(actor.PropsFromProducer(New(Config{NodeName: "n1"}, status, podProps, nil, quiet)), "node")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Root.Stop(node); sys.Root.Stop(status) })

	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = mkPod(fmt.Sprintf("u%03d", i), "img")
	}
	sys.Root.Send(node, add(messages.SourcePush, pods...))
	actortest.Eventually(t, "every PodActor spawned", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(made) == n
	})
	sys.Root.Send(node, remove(messages.SourcePush, pods...))
	actortest.Eventually(t, "every PodActor stopped", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return stopped == n
	})
	mu.Lock()
	ws := made
	mu.Unlock()
	actortest.Collected(t, "the stopped PodActors", ws)
}
