package status

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

// fakeAPI is an in-memory API server for pods, with an on/off switch.
type fakeAPI struct {
	mu      sync.Mutex
	pods    map[string]*v1.Pod // ns/name
	down    bool
	calls   []string
	block   chan struct{} // when set, patches wait on it
	nextUID int
}

var _ API = (*fakeAPI)(nil)

func newFakeAPI() *fakeAPI { return &fakeAPI{pods: map[string]*v1.Pod{}} }

func (f *fakeAPI) record(call string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	if f.down {
		return errdefs.Wrap(errdefs.ErrUnavailable, errors.New("connection refused"))
	}
	return nil
}

func (f *fakeAPI) PatchPodStatus(_ context.Context, ns, name string, uid types.UID, _, st *v1.PodStatus) (*v1.Pod, error) {
	f.mu.Lock()
	block := f.block
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	if err := f.record("patch " + name + " " + string(st.Phase)); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pods[ns+"/"+name]
	if !ok {
		return nil, errdefs.Wrap(errdefs.ErrNotFound, errors.New("pods not found"))
	}
	if p.UID != uid {
		return nil, errdefs.Wrap(errdefs.ErrConflict, errors.New("uid precondition"))
	}
	p.Status = *st.DeepCopy()
	return p.DeepCopy(), nil
}

func (f *fakeAPI) GetPod(_ context.Context, ns, name string) (*v1.Pod, error) {
	if err := f.record("get " + name); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.pods[ns+"/"+name]; ok {
		return p.DeepCopy(), nil
	}
	return nil, errdefs.Wrap(errdefs.ErrNotFound, errors.New("pods not found"))
}

func (f *fakeAPI) CreatePod(_ context.Context, p *v1.Pod) (*v1.Pod, error) {
	if err := f.record("create " + p.Name); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.pods[p.Namespace+"/"+p.Name]; ok {
		return nil, errdefs.Wrap(errdefs.ErrAlreadyExists, errors.New("exists"))
	}
	f.nextUID++
	c := p.DeepCopy()
	c.UID = types.UID(fmt.Sprintf("mirror-%d", f.nextUID))
	f.pods[p.Namespace+"/"+p.Name] = c
	return c.DeepCopy(), nil
}

func (f *fakeAPI) DeletePod(_ context.Context, ns, name string, uid types.UID) error {
	if err := f.record("delete " + name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pods[ns+"/"+name]
	if !ok {
		return errdefs.Wrap(errdefs.ErrNotFound, errors.New("pods not found"))
	}
	if p.UID != uid {
		return errdefs.Wrap(errdefs.ErrConflict, errors.New("uid precondition"))
	}
	delete(f.pods, ns+"/"+name)
	return nil
}

func (f *fakeAPI) get(name string) *v1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.pods["default/"+name]; ok {
		return p.DeepCopy()
	}
	return nil
}

func (f *fakeAPI) snapshotCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeAPI) count(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if len(c) >= len(prefix) && c[:len(prefix)] == prefix {
			n++
		}
	}
	return n
}

type wharness struct {
	t   *testing.T
	sys *actor.ActorSystem
	pid *actor.PID
	api *fakeAPI
	clk *clocktesting.FakeClock
}

func newWriterHarness(t *testing.T) *wharness {
	h := &wharness{t: t, sys: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet })),
		api: newFakeAPI(), clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	h.pid = h.sys.Root.Spawn(actor.PropsFromProducer(NewWithAPI(nil, h.api, WriterConfig{RetryBase: time.Second, RetryMax: 4 * time.Second}, h.clk, quiet)))
	t.Cleanup(func() { h.sys.Root.Stop(h.pid) })
	return h
}

func (h *wharness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	actortest.EventuallyDetail(h.t, what, cond, func() string { return fmt.Sprintf("calls %v", h.api.snapshotCalls()) })
}

func apiPodWith(name string, uid types.UID, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: uid}, Status: v1.PodStatus{Phase: phase}}
}

func (h *wharness) update(p *v1.Pod) { h.sys.Root.Send(h.pid, &messages.PodStatusUpdate{Pod: p}) }

func TestWriterCoalescesToTheNewestStatus(t *testing.T) {
	h := newWriterHarness(t)
	h.api.pods["default/a"] = apiPodWith("a", "uid-a", v1.PodPending)
	block := make(chan struct{})
	h.api.block = block
	h.update(apiPodWith("a", "uid-a", v1.PodPending))
	// While the first write is held, three newer statuses arrive: only the
	// newest is written after it.
	for _, ph := range []v1.PodPhase{v1.PodRunning, v1.PodRunning, v1.PodSucceeded} {
		p := apiPodWith("a", "uid-a", ph)
		p.Status.Message = string(ph) + time.Now().String()
		h.update(p)
	}
	// Let the actor take them in, then release the writes.
	_ = h.sys.Root.RequestFuture(h.pid, &messages.GetPods{}, time.Second).Wait()
	h.api.mu.Lock()
	h.api.block = nil
	h.api.mu.Unlock()
	close(block)
	h.waitFor("Succeeded written", func() bool { p := h.api.get("a"); return p != nil && p.Status.Phase == v1.PodSucceeded })
	if n := h.api.count("patch a"); n != 2 {
		t.Fatalf("%d patches, want 2 (the first and the newest)", n)
	}
}

func TestWriterKeepsNewestWhileAPIDownAndFlushes(t *testing.T) {
	h := newWriterHarness(t)
	h.api.pods["default/a"] = apiPodWith("a", "uid-a", v1.PodPending)
	h.api.down = true
	h.update(apiPodWith("a", "uid-a", v1.PodRunning))
	h.waitFor("a failed write", func() bool { return h.api.count("patch") >= 1 })
	h.update(apiPodWith("a", "uid-a", v1.PodFailed))
	h.api.mu.Lock()
	h.api.down = false
	h.api.mu.Unlock()
	// The failed write's result reaches the actor after the call is
	// recorded: step the clock only once its retry is armed.
	h.waitFor("the retry armed", h.clk.HasWaiters)
	h.clk.Step(5 * time.Second)
	h.waitFor("Failed written after the API returned", func() bool {
		p := h.api.get("a")
		return p != nil && p.Status.Phase == v1.PodFailed
	})
}

func TestWriterNeverGoesBackFromTerminal(t *testing.T) {
	h := newWriterHarness(t)
	h.api.pods["default/a"] = apiPodWith("a", "uid-a", v1.PodPending)
	h.update(apiPodWith("a", "uid-a", v1.PodSucceeded))
	h.waitFor("Succeeded written", func() bool { p := h.api.get("a"); return p.Status.Phase == v1.PodSucceeded })
	h.update(apiPodWith("a", "uid-a", v1.PodRunning))
	_ = h.sys.Root.RequestFuture(h.pid, &messages.GetPods{}, time.Second).Wait()
	if n := h.api.count("patch a Running"); n != 0 {
		t.Fatalf("a terminal pod was moved back to Running")
	}
}

func TestWriterFinalDelete(t *testing.T) {
	h := newWriterHarness(t)
	h.api.pods["default/a"] = apiPodWith("a", "uid-a", v1.PodRunning)
	h.update(apiPodWith("a", "uid-a", v1.PodSucceeded))
	h.sys.Root.Send(h.pid, &messages.PodForget{UID: "uid-a", Namespace: "default", Name: "a", DeleteFromAPI: true})
	h.waitFor("deleted", func() bool { return h.api.get("a") == nil })
	if h.api.count("patch a Succeeded") != 1 {
		t.Fatalf("the final status was not written before the delete: %v", h.api.snapshotCalls())
	}
}

func TestWriterMirrorPods(t *testing.T) {
	h := newWriterHarness(t)
	static := apiPodWith("web-n1", "static-uid", v1.PodRunning)
	static.Annotations = map[string]string{annotationSource: "file", annotationHash: "static-uid"}
	h.update(static)
	// No mirror before the Node's UID is known (it owns the mirror pod).
	_ = h.sys.Root.RequestFuture(h.pid, &messages.GetPods{}, time.Second).Wait()
	if h.api.count("create") != 0 {
		t.Fatalf("mirror created without a node owner")
	}
	h.sys.Root.Send(h.pid, &messages.NodeRegistered{Name: "n1", UID: "node-uid"})
	h.waitFor("mirror with status", func() bool {
		p := h.api.get("web-n1")
		return p != nil && p.Status.Phase == v1.PodRunning
	})
	m := h.api.get("web-n1")
	if m.Annotations[annotationMirror] != "static-uid" || len(m.OwnerReferences) != 1 || m.OwnerReferences[0].UID != "node-uid" {
		t.Fatalf("mirror %+v", m.ObjectMeta)
	}
	// Someone deletes the mirror pod: it is made again.
	h.api.mu.Lock()
	delete(h.api.pods, "default/web-n1")
	h.api.mu.Unlock()
	h.sys.Root.Send(h.pid, &messages.MirrorPod{Pod: m, Deleted: true})
	h.waitFor("mirror recreated", func() bool { p := h.api.get("web-n1"); return p != nil && p.UID != m.UID })
	// The static pod goes: its mirror goes.
	h.sys.Root.Send(h.pid, &messages.PodForget{UID: "static-uid"})
	h.waitFor("mirror deleted", func() bool { return h.api.get("web-n1") == nil })
}
