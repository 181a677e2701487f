package node

import (
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/internal/checkpoint"
	"github.com/actorlet/actorlet/messages"
)

// memStore is an AllocationStore in memory.
type memStore struct {
	mu    sync.Mutex
	b     []byte
	saves int
}

func (s *memStore) Load() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b, nil
}

func (s *memStore) Save(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append([]byte(nil), b...)
	s.saves++
	return nil
}

// storedCPU is the checkpointed cpu request of uid's container "app"
// ("": none).
func (s *memStore) storedCPU(t *testing.T, uid string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b == nil {
		return ""
	}
	var d allocData
	if err := checkpoint.Decode(s.b, allocationVersion, &d); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	for _, r := range d.Pods {
		if r.UID == types.UID(uid) {
			q := r.Containers["app"].Requests[v1.ResourceCPU]
			return q.String()
		}
	}
	return ""
}

// waitStored waits until the checkpoint holds want as uid's cpu request
// (it is written off the mailbox).
func (h *harness) waitStored(store *memStore, uid, want string) {
	h.t.Helper()
	actortest.EventuallyDetail(h.t, "checkpoint of "+uid+" holds cpu "+want, func() bool {
		return store.storedCPU(h.t, uid) == want
	}, func() string { return "stored: " + store.storedCPU(h.t, uid) })
}

func resizeHarness(t *testing.T, store *memStore) *harness {
	t.Helper()
	return newHarness(t, Config{NodeName: "n1", AllocationStore: store, Allocatable: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}})
}

// stopNode stops the NodeActor (and its PodActors) and waits until it is gone.
func (h *harness) stopNode() {
	h.t.Helper()
	if err := h.sys.Root.StopFuture(h.node).Wait(); err != nil {
		h.t.Fatalf("stop node: %v", err)
	}
}

// cpuPod is a burstable push pod whose container "app" requests cpu, at
// generation gen.
func cpuPod(uid, cpu string, gen int64) *v1.Pod {
	p := mkPod(uid, "img")
	p.Generation = gen
	p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
	return p
}

// lastSynced is the cpu request of the newest pod uid's PodActor was sent.
func (h *harness) lastSynced(uid string) string {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	incs := h.rec.pods[types.UID(uid)]
	if len(incs) == 0 || len(incs[len(incs)-1].synced) == 0 {
		return ""
	}
	s := incs[len(incs)-1].synced
	q := s[len(s)-1].Spec.Containers[0].Resources.Requests[v1.ResourceCPU]
	return q.String()
}

// lastPending is the newest PodResizePending uid's PodActor was sent.
func (h *harness) lastPending(uid string) *messages.PodResizePending {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	incs := h.rec.pods[types.UID(uid)]
	if len(incs) == 0 || len(incs[len(incs)-1].pending) == 0 {
		return nil
	}
	p := incs[len(incs)-1].pending
	return p[len(p)-1]
}

// A resize that fits is allocated at once: the PodActor gets the new
// resources, the checkpoint holds them, and the pod counts with them at
// the admission of the next pod.
func TestResizeAllocatedAndCountedAtAdmission(t *testing.T) {
	store := &memStore{}
	h := resizeHarness(t, store)
	h.send(add(messages.SourcePush, cpuPod("a", "1", 1)))
	h.quiesce()
	h.waitStored(store, "a", "1")
	h.send(add(messages.SourcePush, cpuPod("a", "3", 2)))
	h.quiesce()
	if got := h.lastSynced("a"); got != "3" {
		t.Fatalf("PodActor sent cpu %q, want 3", got)
	}
	if p := h.lastPending("a"); p != nil {
		t.Fatalf("pending %+v sent for a resize that fits", p)
	}
	h.waitStored(store, "a", "3")
	h.send(add(messages.SourcePush, cpuPod("b", "2", 1)))
	h.quiesce()
	p := h.rec.last["b"]
	if p == nil || p.Status.Reason != ReasonOutOfCPU ||
		p.Status.Message != "Node didn't have enough resource: cpu, requested: 2000, used: 3000, capacity: 4000" {
		t.Fatalf("b: %+v, want OutOfcpu counting a's new request", p)
	}
}

// A resize that does not fit beside the other pods is Deferred with
// upstream's message, the PodActor keeps the allocated resources, and it
// is allocated once room is made.
func TestResizeDeferredThenRetried(t *testing.T) {
	store := &memStore{}
	h := resizeHarness(t, store)
	h.send(add(messages.SourcePush, cpuPod("a", "1", 1), cpuPod("b", "2", 1)))
	h.send(add(messages.SourcePush, cpuPod("a", "3", 2)))
	h.quiesce()
	pend := h.lastPending("a")
	want := messages.PodResizePending{UID: "a", Generation: 2, Reason: messages.ResizeDeferred,
		Message: "Node didn't have enough resource: cpu, requested: 3000, used: 2000, capacity: 4000"}
	if pend == nil || *pend != want {
		t.Fatalf("pending %+v, want %+v", pend, want)
	}
	if got := h.lastSynced("a"); got != "1" {
		t.Fatalf("PodActor sent cpu %q while deferred, want 1", got)
	}
	h.waitStored(store, "a", "1")
	// A restarted PodActor is told again.
	h.tell("a", needPod{})
	h.quiesce()
	if n := len(h.latest("a").pending); n != 2 {
		t.Fatalf("PodResizePending sent %d times, want again with NeedPod", n)
	}

	h.send(remove(messages.SourcePush, cpuPod("b", "2", 1)))
	h.quiesce()
	if got := h.lastSynced("a"); got != "3" {
		t.Fatalf("after b left: PodActor sent cpu %q, want 3", got)
	}
	if p := h.lastPending("a"); p == nil || p.Reason != "" {
		t.Fatalf("after b left: pending %+v, want cleared", p)
	}
	h.waitStored(store, "a", "3")
}

// What can never be done is Infeasible with the upstream message and never
// retried; the pod keeps running with what it has.
func TestResizeInfeasible(t *testing.T) {
	guaranteed := func(uid, cpu string, gen int64) *v1.Pod {
		p := cpuPod(uid, cpu, gen)
		p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = resource.MustParse("1Gi")
		p.Spec.Containers[0].Resources.Limits = p.Spec.Containers[0].Resources.Requests.DeepCopy()
		return p
	}
	withInit := func(p *v1.Pod, cpu string) *v1.Pod {
		p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "img", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}}
		return p
	}
	tests := []struct {
		name       string
		before     *v1.Pod
		after      *v1.Pod
		wantMsg    string
		wantSynced string
	}{
		{name: "beyond allocatable", before: cpuPod("a", "1", 1), after: cpuPod("a", "5", 2),
			wantMsg: "Node didn't have enough capacity: cpu, requested: 5000, capacity: 4000", wantSynced: "1"},
		{name: "a QoS class change", before: guaranteed("a", "1", 1), after: func() *v1.Pod {
			p := guaranteed("a", "1", 2)
			p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("500m")
			return p
		}(), wantMsg: "Pod QOS Class may not change as a result of resizing", wantSynced: "1"},
		{name: "a resource other than cpu and memory", before: cpuPod("a", "1", 1), after: func() *v1.Pod {
			p := cpuPod("a", "1", 2)
			p.Spec.Containers[0].Resources.Requests[v1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
			return p
		}(), wantMsg: `only cpu and memory resources are mutable: ephemeral-storage of container "app" changed`, wantSynced: "1"},
		{name: "a non-restartable init container", before: withInit(cpuPod("a", "1", 1), "100m"), after: withInit(cpuPod("a", "1", 2), "200m"),
			wantMsg: `Resize is infeasible for non-restartable init container "init"`, wantSynced: "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := resizeHarness(t, &memStore{})
			h.send(add(messages.SourcePush, tt.before))
			h.send(add(messages.SourcePush, tt.after))
			h.quiesce()
			pend := h.lastPending("a")
			if pend == nil || pend.Reason != messages.ResizeInfeasible || pend.Message != tt.wantMsg || pend.Generation != 2 {
				t.Fatalf("pending %+v, want Infeasible %q at generation 2", pend, tt.wantMsg)
			}
			if got := h.lastSynced("a"); got != tt.wantSynced {
				t.Fatalf("PodActor sent cpu %q, want %s", got, tt.wantSynced)
			}
			if h.msgs("a") == "" || !h.alive("a") {
				t.Fatalf("pod a not running: %q", h.msgs("a"))
			}
			// Room made does not retry it.
			n := len(h.latest("a").pending)
			h.send(add(messages.SourcePush, cpuPod("z", "100m", 1)))
			h.send(remove(messages.SourcePush, cpuPod("z", "100m", 1)))
			h.quiesce()
			if got := len(h.latest("a").pending); got != n {
				t.Fatalf("an infeasible resize was retried: %d pending messages, want %d", got, n)
			}
		})
	}
}

// A restarted agent admits the pod with the allocation it checkpointed: a
// resize allocated before the restart is neither lost nor checked again,
// and one asked while the agent was down is checked after the pod runs.
func TestResizeAllocationSurvivesAgentRestart(t *testing.T) {
	store := &memStore{}
	h := resizeHarness(t, store)
	h.send(add(messages.SourcePush, cpuPod("a", "1", 1), cpuPod("b", "1", 1)))
	h.send(add(messages.SourcePush, cpuPod("a", "2", 2)))
	h.quiesce()
	h.waitStored(store, "a", "2")
	h.sys.Root.Stop(h.node)
	h.stopNode()

	h2 := resizeHarness(t, store)
	// a comes back as resized; b asks for more than it was given.
	h2.send(add(messages.SourcePush, cpuPod("a", "2", 2), cpuPod("b", "2", 2)))
	h2.quiesce()
	if got := h2.lastSynced("a"); got != "2" {
		t.Fatalf("a after restart: sent cpu %q, want 2", got)
	}
	if n := len(h2.latest("a").synced); n != 1 {
		t.Fatalf("a after restart: %d SyncPods, want 1", n)
	}
	if p := h2.lastPending("a"); p != nil {
		t.Fatalf("a after restart: pending %+v", p)
	}
	if got := h2.latest("b").synced[0].Spec.Containers[0].Resources.Requests[v1.ResourceCPU]; got.String() != "1" {
		t.Fatalf("b admitted with cpu %s, want its allocation 1", got.String())
	}
	if got := h2.lastSynced("b"); got != "2" {
		t.Fatalf("b's resize asked while down: sent cpu %q, want 2", got)
	}
	h2.waitStored(store, "b", "2")
}

// An allocation is dropped once its pod is gone, and one loaded for a pod
// that did not come back once every source has synced.
func TestAllocationForgotten(t *testing.T) {
	store := &memStore{}
	h := resizeHarness(t, store)
	h.send(set(messages.SourceFile, cpuPod("a", "1", 1), cpuPod("b", "1", 1)))
	h.quiesce()
	h.send(set(messages.SourceFile, cpuPod("a", "1", 1)))
	h.quiesce()
	h.terminated("b")
	h.waitStored(store, "b", "")
	h.waitStored(store, "a", "1")
	h.sys.Root.Stop(h.node)
	h.stopNode()
	h2 := newHarness(t, Config{NodeName: "n1", AllocationStore: store, Sources: []string{messages.SourceFile}})
	h2.send(set(messages.SourceFile))
	h2.quiesce()
	h2.waitStored(store, "a", "")
}
