package status

import (
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

var quiet = slog.New(slog.DiscardHandler)

func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
}

// nodeStub records the Resync requests the StatusActor sends (their Ask);
// it never answers: the tests answer for it.
type nodeStub struct {
	mu   sync.Mutex
	asks []uint64
}

func (n *nodeStub) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.asks)
}

func (n *nodeStub) lastAsk() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.asks[len(n.asks)-1]
}

func nodeStubProps(n *nodeStub) *actor.Props {
	return actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.Resync); ok {
			n.mu.Lock()
			n.asks = append(n.asks, m.Ask)
			n.mu.Unlock()
		}
	})
}

func spawnNodeStub(sys *actor.ActorSystem) (*actor.PID, *nodeStub) {
	n := &nodeStub{}
	return sys.Root.Spawn(nodeStubProps(n)), n
}

func pod(ns, name, uid string, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)},
		Status:     v1.PodStatus{Phase: phase},
	}
}

func update(ns, name, uid string, phase v1.PodPhase) *messages.PodStatusUpdate {
	return &messages.PodStatusUpdate{Pod: pod(ns, name, uid, phase)}
}

// getPods asks the StatusActor for its pods; messages sent before from
// Root are in the mailbox ahead of the request, so no wait is needed.
func getPods(t *testing.T, sys *actor.ActorSystem, pid *actor.PID) []*v1.Pod {
	t.Helper()
	res, err := sys.Root.RequestFuture(pid, &messages.GetPods{}, 5*time.Second).Result()
	if err != nil {
		t.Fatalf("GetPods: %v", err)
	}
	list, ok := res.(*messages.PodList)
	if !ok {
		t.Fatalf("GetPods answered %T", res)
	}
	return list.Items
}

// read is a step that reads the pods (GetPods) between two messages.
type read struct{ want []string }

// summary renders pods as "ns/name=phase" for comparison.
func summary(items []*v1.Pod) []string {
	out := make([]string, 0, len(items))
	for _, p := range items {
		out = append(out, p.Namespace+"/"+p.Name+"="+string(p.Status.Phase))
	}
	return out
}

func TestStatusActorStoresAndServesPods(t *testing.T) {
	tests := []struct {
		name  string
		steps []any
		want  []string
	}{
		{
			name:  "empty",
			steps: nil,
			want:  []string{},
		},
		{
			name: "sorted by namespace then name",
			steps: []any{
				update("kube-system", "a", "u1", v1.PodRunning),
				update("default", "web", "u2", v1.PodRunning),
				update("default", "api", "u3", v1.PodPending),
			},
			want: []string{"default/api=Pending", "default/web=Running", "kube-system/a=Running"},
		},
		{
			name: "newest status wins",
			steps: []any{
				update("default", "web", "u1", v1.PodPending),
				update("default", "web", "u1", v1.PodRunning),
			},
			want: []string{"default/web=Running"},
		},
		{
			name: "forget removes the pod",
			steps: []any{
				update("default", "web", "u1", v1.PodRunning),
				update("default", "api", "u2", v1.PodRunning),
				&messages.PodForget{UID: "u1"},
			},
			want: []string{"default/api=Running"},
		},
		{
			// A forget lost with a NodeActor restart: the node's
			// housekeeping says which pods it knows.
			name: "pods the node no longer knows are dropped",
			steps: []any{
				update("default", "web", "u1", v1.PodRunning),
				update("default", "api", "u2", v1.PodRunning),
				update("default", "db", "u3", v1.PodSucceeded),
				&messages.PodsKnown{UIDs: map[types.UID]bool{"u2": true, "u9": true}},
			},
			want: []string{"default/api=Running"},
		},
		{
			name: "forget of an unknown pod is harmless",
			steps: []any{
				update("default", "web", "u1", v1.PodRunning),
				&messages.PodForget{UID: "nope"},
			},
			want: []string{"default/web=Running"},
		},
		{
			name: "failed is not replaced by running",
			steps: []any{
				update("default", "web", "u1", v1.PodFailed),
				update("default", "web", "u1", v1.PodRunning),
			},
			want: []string{"default/web=Failed"},
		},
		{
			name: "succeeded is not replaced by pending",
			steps: []any{
				update("default", "job", "u1", v1.PodSucceeded),
				update("default", "job", "u1", v1.PodPending),
			},
			want: []string{"default/job=Succeeded"},
		},
		{
			name: "succeeded is not replaced by unknown",
			steps: []any{
				update("default", "job", "u1", v1.PodSucceeded),
				update("default", "job", "u1", v1.PodUnknown),
			},
			want: []string{"default/job=Succeeded"},
		},
		{
			name: "running may become failed",
			steps: []any{
				update("default", "web", "u1", v1.PodRunning),
				update("default", "web", "u1", v1.PodFailed),
			},
			want: []string{"default/web=Failed"},
		},
		{
			name: "a forgotten terminal pod may come back",
			steps: []any{
				update("default", "web", "u1", v1.PodFailed),
				&messages.PodForget{UID: "u1"},
				update("default", "web", "u1", v1.PodPending),
			},
			want: []string{"default/web=Pending"},
		},
		{
			// The list is built once per change and kept for the
			// next reads: every change between two reads shows.
			name: "each change shows in the next read",
			steps: []any{
				update("default", "web", "u1", v1.PodPending),
				read{[]string{"default/web=Pending"}},
				read{[]string{"default/web=Pending"}},
				update("default", "web", "u1", v1.PodRunning),
				read{[]string{"default/web=Running"}},
				update("default", "api", "u2", v1.PodRunning),
				read{[]string{"default/api=Running", "default/web=Running"}},
				&messages.PodForget{UID: "u2"},
				read{[]string{"default/web=Running"}},
				update("default", "db", "u3", v1.PodRunning),
				read{[]string{"default/db=Running", "default/web=Running"}},
				&messages.PodsKnown{UIDs: map[types.UID]bool{"u1": true}},
			},
			want: []string{"default/web=Running"},
		},
		{
			name: "update without a pod is ignored",
			steps: []any{
				update("default", "web", "u1", v1.PodRunning),
				&messages.PodStatusUpdate{},
			},
			want: []string{"default/web=Running"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys := newSystem()
			pid := sys.Root.Spawn(actor.PropsFromProducer(New(nil)))
			t.Cleanup(func() { sys.Root.Stop(pid) })
			for _, m := range tt.steps {
				if r, ok := m.(read); ok {
					if got := summary(getPods(t, sys, pid)); !slices.Equal(got, r.want) {
						t.Errorf("pods before the last step = %v, want %v", got, r.want)
					}
					continue
				}
				sys.Root.Send(pid, m)
			}
			if got := summary(getPods(t, sys, pid)); !slices.Equal(got, tt.want) {
				t.Errorf("pods = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStatusActorAsksNodeToResyncOnStart(t *testing.T) {
	sys := newSystem()
	nodePID, node := spawnNodeStub(sys)
	pid := sys.Root.Spawn(actor.PropsFromProducer(New(nodePID)))
	t.Cleanup(func() { sys.Root.Stop(pid) })
	actortest.Eventually(t, "a Resync at the node", func() bool { return node.count() == 1 })
}

func TestGetPodFindsOnePod(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	pid := sys.Root.Spawn(actor.PropsFromProducer(New(nil)))
	sys.Root.Send(pid, update("default", "web", "u1", v1.PodRunning))
	sys.Root.Send(pid, update("other", "web", "u2", v1.PodPending))
	tests := []struct {
		ns, name, wantUID string
	}{
		{ns: "default", name: "web", wantUID: "u1"},
		{ns: "other", name: "web", wantUID: "u2"},
		{ns: "default", name: "nope"},
	}
	for _, tt := range tests {
		res, err := sys.Root.RequestFuture(pid, &messages.GetPod{Namespace: tt.ns, Name: tt.name}, 5*time.Second).Result()
		if err != nil {
			t.Fatalf("GetPod: %v", err)
		}
		found, ok := res.(*messages.PodFound)
		if !ok {
			t.Fatalf("GetPod answered %T", res)
		}
		var uid string
		if found.Pod != nil {
			uid = string(found.Pod.UID)
		}
		if uid != tt.wantUID {
			t.Errorf("%s/%s: uid %q, want %q", tt.ns, tt.name, uid, tt.wantUID)
		}
	}
}
