package source

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/messages"
)

// recorder stands in for the NodeActor: it records what the sources send.
type recorder struct {
	sys  *actor.ActorSystem
	pid  *actor.PID
	mu   sync.Mutex
	msgs []any
}

// flush is answered once every message queued before it was recorded.
type flush struct{}

func (r *recorder) receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.PodUpdate, *messages.SourceSynced:
		r.mu.Lock()
		r.msgs = append(r.msgs, m)
		r.mu.Unlock()
	case flush:
		ctx.Respond(m)
	}
}

// snapshot returns what was recorded, including every message already in the
// recorder's mailbox when it is called: a source's Send enqueues before it
// returns, so a test that saw the source act sees its messages too.
func (r *recorder) snapshot() []any {
	if _, err := r.sys.Root.RequestFuture(r.pid, flush{}, 5*time.Second).Result(); err != nil {
		panic(fmt.Sprintf("recorder flush: %v", err))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]any(nil), r.msgs...)
}

func (r *recorder) updates() []*messages.PodUpdate {
	var out []*messages.PodUpdate
	for _, m := range r.snapshot() {
		if u, ok := m.(*messages.PodUpdate); ok {
			out = append(out, u)
		}
	}
	return out
}

func newSystem(t *testing.T) (*actor.ActorSystem, *recorder, *actor.PID) {
	t.Helper()
	sys := actor.NewActorSystem()
	rec := &recorder{sys: sys}
	pid := sys.Root.Spawn(actor.PropsFromFunc(rec.receive))
	rec.pid = pid
	t.Cleanup(func() { sys.Shutdown() })
	return sys, rec, pid
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func pod(name, uid string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid),
			Annotations: map[string]string{"kubernetes.io/config.hash": uid}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
}

func names(pods []*v1.Pod) string {
	s := ""
	for i, p := range pods {
		if i > 0 {
			s += ","
		}
		s += p.Name
	}
	return s
}

func describe(msgs []any) string {
	s := ""
	for _, m := range msgs {
		switch m := m.(type) {
		case *messages.PodUpdate:
			s += fmt.Sprintf("%s %s [%s]; ", m.Source, m.Op, names(m.Pods))
		case *messages.SourceSynced:
			s += fmt.Sprintf("synced %s; ", m.Source)
		}
	}
	return s
}
