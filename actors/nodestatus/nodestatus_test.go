package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

var quiet = slog.New(slog.DiscardHandler)

// fakeAPI is an in-memory API server for one Node.
type fakeAPI struct {
	mu       sync.Mutex
	node     *v1.Node
	creates  int
	patches  int
	renewals int
	failNext string // "patch-notfound"
	down     bool   // the API server does not answer: every call fails (Unavailable)
	failed   int    // calls failed because down
}

var errDown = errdefs.Wrap(errdefs.ErrUnavailable, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"))

// isDown counts a failed call; call with mu held.
func (f *fakeAPI) isDown() bool {
	if f.down {
		f.failed++
	}
	return f.down
}

func (f *fakeAPI) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *fakeAPI) failures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

var (
	_ API     = (*fakeAPI)(nil)
	_ Leaser  = (*fakeAPI)(nil)
	_ Machine = fakeMachine{}
)

func (f *fakeAPI) GetNode(_ context.Context, name string) (*v1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.isDown() {
		return nil, errDown
	}
	if f.node == nil {
		return nil, errdefs.Wrap(errdefs.ErrNotFound, errors.New("nodes "+name+" not found"))
	}
	return f.node.DeepCopy(), nil
}

func (f *fakeAPI) CreateNode(_ context.Context, n *v1.Node) (*v1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates++
	f.node = n.DeepCopy()
	f.node.UID = "node-uid"
	return f.node.DeepCopy(), nil
}

func (f *fakeAPI) PatchNodeStatus(_ context.Context, name string, _, st *v1.NodeStatus) (*v1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.isDown() {
		return nil, errDown
	}
	if f.failNext == "patch-notfound" || f.node == nil {
		f.failNext = ""
		f.node = nil
		return nil, errdefs.Wrap(errdefs.ErrNotFound, errors.New("nodes "+name+" not found"))
	}
	f.patches++
	f.node.Status = *st.DeepCopy()
	return f.node.DeepCopy(), nil
}

func (f *fakeAPI) PatchNodeMeta(_ context.Context, _ string, labels, annotations map[string]string) (*v1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, v := range labels {
		f.node.Labels[k] = v
	}
	for k, v := range annotations {
		if f.node.Annotations == nil {
			f.node.Annotations = map[string]string{}
		}
		f.node.Annotations[k] = v
	}
	return f.node.DeepCopy(), nil
}

func (f *fakeAPI) RenewLease(context.Context, *v1.Node, int32, time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.isDown() {
		return errDown
	}
	f.renewals++
	return nil
}

func (f *fakeAPI) snapshot() (node *v1.Node, creates, patches, renewals int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.node != nil {
		node = f.node.DeepCopy()
	}
	return node, f.creates, f.patches, f.renewals
}

type fakeMachine struct{}

func (fakeMachine) Info(context.Context) (v1.NodeSystemInfo, v1.ResourceList, error) {
	return v1.NodeSystemInfo{KernelVersion: "6.1.0", OSImage: "Debian GNU/Linux 12 (bookworm)"}, v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi"),
	}, nil
}

type harness struct {
	t      *testing.T
	sys    *actor.ActorSystem
	clk    *clocktesting.FakeClock
	api    *fakeAPI
	events *fakeRecorder
	mu     sync.Mutex
	health messages.Health
	pid    *actor.PID // the NodeStatusActor
}

// fakeRecorder keeps the events recorded, as "reason: message".
type fakeRecorder struct {
	mu     sync.Mutex
	events []string
}

var _ Recorder = (*fakeRecorder)(nil)

func (f *fakeRecorder) Eventf(_ kruntime.Object, _, reason, messageFmt string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, reason+": "+fmt.Sprintf(messageFmt, args...))
}

func (f *fakeRecorder) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events...)
}

func newHarness(t *testing.T, opts ...func(*Config)) *harness {
	h := &harness{t: t, sys: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet })),
		clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), api: &fakeAPI{}, events: &fakeRecorder{}}
	h.health = messages.Health{LastRelist: h.clk.Now(), Threshold: 3 * time.Minute}
	pleg := h.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*messages.GetHealth); ok {
			h.mu.Lock()
			hl := h.health
			h.mu.Unlock()
			c.Respond(&hl)
		}
	}))
	cfg := Config{NodeName: "n1", NodeIP: "192.0.2.7", Hostname: "n1", Labels: map[string]string{"pool": "a"}, MaxPods: 110,
		KubeReserved: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}, KubeletVersion: "v1.37.2-actorlet",
		RuntimeVersion: "sim://0.1.0", Port: 10250, Events: h.events}
	for _, o := range opts {
		o(&cfg)
	}
	pid := h.sys.Root.Spawn(actor.PropsFromProducer(New(cfg, h.api, h.api, fakeMachine{}, pleg, h.clk, quiet)))
	h.pid = pid
	t.Cleanup(func() { h.sys.Root.Stop(pid) })
	return h
}

func (h *harness) setHealth(f func(*messages.Health)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(&h.health)
}

func (h *harness) waitNode(what string, cond func(n *v1.Node, creates, patches, renewals int) bool) *v1.Node {
	h.t.Helper()
	var node *v1.Node
	actortest.EventuallyDetail(h.t, what, func() bool {
		n, c, p, r := h.api.snapshot()
		node = n
		return n != nil && cond(n, c, p, r)
	}, func() string {
		n, c, p, r := h.api.snapshot()
		return fmt.Sprintf("node %+v creates %d patches %d renewals %d", n, c, p, r)
	})
	return node
}

func ready(n *v1.Node) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func TestRegistersAndReportsReady(t *testing.T) {
	h := newHarness(t)
	n := h.waitNode("Ready status", func(n *v1.Node, _, patches, _ int) bool {
		return patches > 0 && ready(n) != nil && ready(n).Status == v1.ConditionTrue
	})
	if n.Labels["kubernetes.io/hostname"] != "n1" || n.Labels["pool"] != "a" || n.Labels["kubernetes.io/os"] != "linux" {
		t.Errorf("labels %v", n.Labels)
	}
	if got := n.Status.Allocatable.Memory().String(); got != "3Gi" {
		t.Errorf("allocatable memory %s, want 3Gi (4Gi minus 1Gi kube-reserved)", got)
	}
	if n.Status.Capacity.Pods().Value() != 110 || n.Status.NodeInfo.ContainerRuntimeVersion != "sim://0.1.0" {
		t.Errorf("status %+v", n.Status)
	}
	if n.Status.Addresses[0] != (v1.NodeAddress{Type: v1.NodeInternalIP, Address: "192.0.2.7"}) {
		t.Errorf("addresses %v", n.Status.Addresses)
	}
}

func TestRuntimeDownMakesNotReadyAndBack(t *testing.T) {
	h := newHarness(t)
	h.waitNode("Ready", func(n *v1.Node, _, _, _ int) bool { return ready(n) != nil && ready(n).Status == v1.ConditionTrue })
	h.setHealth(func(hl *messages.Health) { hl.RuntimeErr = "connection refused" })
	h.clk.Step(10 * time.Second)
	n := h.waitNode("NotReady", func(n *v1.Node, _, _, _ int) bool { return ready(n).Status == v1.ConditionFalse })
	if !strings.Contains(ready(n).Message, "container runtime is down") {
		t.Errorf("message %q", ready(n).Message)
	}
	transition := ready(n).LastTransitionTime
	h.setHealth(func(hl *messages.Health) { hl.RuntimeErr = ""; hl.LastRelist = h.clk.Now() })
	h.clk.Step(10 * time.Second)
	n = h.waitNode("Ready again", func(n *v1.Node, _, _, _ int) bool { return ready(n).Status == v1.ConditionTrue })
	if !ready(n).LastTransitionTime.After(transition.Time) {
		t.Errorf("transition time not updated")
	}
}

func TestStalePLEGMakesNotReady(t *testing.T) {
	h := newHarness(t)
	h.waitNode("Ready", func(n *v1.Node, _, _, _ int) bool { return ready(n) != nil && ready(n).Status == v1.ConditionTrue })
	h.clk.Step(4 * time.Minute) // the relist time stays where it was
	n := h.waitNode("NotReady", func(n *v1.Node, _, _, _ int) bool { return ready(n).Status == v1.ConditionFalse })
	if !strings.Contains(ready(n).Message, "PLEG is not healthy") {
		t.Errorf("message %q", ready(n).Message)
	}
}

func TestPatchesOnlyOnChangeOrReportFrequency(t *testing.T) {
	h := newHarness(t)
	h.waitNode("first report", func(_ *v1.Node, _, patches, renewals int) bool { return patches == 1 && renewals >= 1 })
	// step advances the fake clock by one period and waits for the lease
	// renewal of that period, so the actor has handled its ticks.
	step := func() {
		_, _, _, before := h.api.snapshot()
		h.setHealth(func(hl *messages.Health) { hl.LastRelist = h.clk.Now() })
		h.clk.Step(10 * time.Second)
		h.waitNode("lease renewed", func(_ *v1.Node, _, _, renewals int) bool { return renewals > before })
	}
	// Nothing changes for a minute (health stays fresh): no patch.
	for i := 0; i < 6; i++ {
		step()
	}
	if _, _, patches, _ := h.api.snapshot(); patches != 1 {
		t.Fatalf("%d patches without a change", patches)
	}
	// After the report frequency (5 min) a patch goes out even without a change.
	for i := 0; i < 25; i++ {
		step()
	}
	h.waitNode("periodic report", func(_ *v1.Node, _, patches, _ int) bool { return patches >= 2 })
}

func TestDeletedNodeIsRegisteredAgain(t *testing.T) {
	h := newHarness(t)
	h.waitNode("registered", func(_ *v1.Node, creates, patches, _ int) bool { return creates == 1 && patches >= 1 })
	h.api.mu.Lock()
	h.api.failNext = "patch-notfound"
	h.api.mu.Unlock()
	h.setHealth(func(hl *messages.Health) { hl.RuntimeErr = "changed" }) // forces a patch
	h.clk.Step(10 * time.Second)
	h.waitNode("registered again", func(_ *v1.Node, creates, _, _ int) bool { return creates == 2 })
}

// TestRuntimeDownRecordsNodeEvents: the Ready condition's changes are
// recorded as the Node's events, as upstream (NodeNotReady, NodeReady).
func TestRuntimeDownRecordsNodeEvents(t *testing.T) {
	h := newHarness(t)
	h.waitNode("Ready", func(n *v1.Node, _, _, _ int) bool { return ready(n) != nil && ready(n).Status == v1.ConditionTrue })
	h.setHealth(func(hl *messages.Health) { hl.RuntimeErr = "connection refused" })
	h.clk.Step(10 * time.Second)
	h.waitNode("NotReady", func(n *v1.Node, _, _, _ int) bool { return ready(n).Status == v1.ConditionFalse })
	h.setHealth(func(hl *messages.Health) { hl.RuntimeErr = ""; hl.LastRelist = h.clk.Now() })
	h.clk.Step(10 * time.Second)
	h.waitNode("Ready again", func(n *v1.Node, _, _, _ int) bool { return ready(n).Status == v1.ConditionTrue })
	want := []string{"NodeReady: Node n1 status is now: NodeReady", "NodeNotReady: Node n1 status is now: NodeNotReady",
		"NodeReady: Node n1 status is now: NodeReady"}
	actortest.EventuallyDetail(t, "the events of the runtime outage", func() bool {
		return strings.Join(h.events.got(), "|") == strings.Join(want, "|")
	}, func() string { return fmt.Sprintf("events %q, want %q", h.events.got(), want) })
}

// TestAPIOutageRetriesWithBackoff: while the API server does not answer,
// a status patch and a lease renewal that failed are tried again after a
// back-off (200 ms, doubling, at most the period), not only at the next
// period, so the node is reported soon after the API server is back. On the
// old code the next try came only with the next period (10 s).
func TestAPIOutageRetriesWithBackoff(t *testing.T) {
	h := newHarness(t)
	h.waitNode("Ready and the lease renewed", func(n *v1.Node, _, patches, renewals int) bool {
		return patches >= 1 && renewals >= 1 && ready(n).Status == v1.ConditionTrue
	})
	h.api.setDown(true)
	// The runtime goes down too: the Ready condition changes and must be
	// patched; the period's tick tries the patch and the lease, both fail.
	h.setHealth(func(hl *messages.Health) { hl.RuntimeErr = "connection refused" })
	h.clk.Step(10 * time.Second)
	actortest.Eventually(t, "the patch and the renewal failed", func() bool { return h.api.failures() >= 2 })
	// Failures keep being retried while it is down, faster than the
	// period: three more of each within 10 s of fake time (the back-off
	// is 200 ms, 400 ms, 800 ms, ...).
	failed := h.api.failures()
	h.stepUntil("three more retries of the patch and the lease", 8*time.Second, func() bool { return h.api.failures() >= failed+6 })
	_, _, patches, renewals := h.api.snapshot()
	h.api.setDown(false)
	// Back: the status and the lease are written within the back-off,
	// before the period's next tick would have tried.
	h.stepUntil("a patch and a renewal after the outage", 8*time.Second, func() bool {
		_, _, p, r := h.api.snapshot()
		return p > patches && r > renewals
	})
	n, _, _, _ := h.api.snapshot()
	if ready(n).Status != v1.ConditionFalse || !strings.Contains(ready(n).Message, "container runtime is down") {
		t.Errorf("Ready after the outage %+v, want False: container runtime is down", ready(n))
	}
}

// stepUntil steps the fake clock 100 ms at a time, giving the actor up to
// 20 ms of real time after each step to act, until cond holds; it fails the
// test when limit of fake time passes first.
func (h *harness) stepUntil(what string, limit time.Duration, cond func() bool) {
	h.t.Helper()
	for stepped := time.Duration(0); ; stepped += 100 * time.Millisecond {
		for deadline := time.Now().Add(20 * time.Millisecond); time.Now().Before(deadline); {
			if cond() {
				return
			}
			runtime.Gosched()
		}
		if stepped >= limit {
			_, c, p, r := h.api.snapshot()
			h.t.Fatalf("%s: not within %s of fake time (creates %d patches %d renewals %d failed calls %d)", what, limit, c, p, r, h.api.failures())
		}
		h.clk.Step(100 * time.Millisecond)
	}
}

// The hard eviction thresholds are kept out of the Node's allocatable, as
// upstream and as the NodeActor admits pods: a pod the scheduler places
// fits what the node admits.
func TestAllocatableLeavesOutTheEvictionThresholds(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.EvictionHard = func(capacity v1.ResourceList) v1.ResourceList {
			if _, ok := capacity[v1.ResourceMemory]; !ok {
				return nil
			}
			return v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi")}
		}
	})
	n := h.waitNode("a status", func(n *v1.Node, _, patches, _ int) bool { return patches > 0 })
	if got, want := n.Status.Allocatable.Memory(), resource.MustParse("2972Mi"); got.Cmp(want) != 0 {
		t.Errorf("allocatable memory %s, want %s (4Gi minus 1Gi kube-reserved minus 100Mi eviction)", got, want.String())
	}
	if got := n.Status.Capacity.Memory().String(); got != "4Gi" {
		t.Errorf("capacity memory %s, want 4Gi", got)
	}
}

func TestDevicesJoinCapacityAndLabels(t *testing.T) {
	h := newHarness(t)
	h.waitNode("registered", func(n *v1.Node, _, patches, _ int) bool { return patches > 0 })
	h.sys.Root.Send(h.pid, &messages.DeviceCapacity{
		Capacity:    map[v1.ResourceName]int64{"nvidia.com/gpu": 8},
		Allocatable: map[v1.ResourceName]int64{"nvidia.com/gpu": 7},
		Labels:      map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "pool": "gpu"},
		Annotations: map[string]string{"actorlet.io/gpus": "[]"},
		Ready:       true,
	})
	n := h.waitNode("GPUs in the status and labels", func(n *v1.Node, _, _, _ int) bool {
		q, ok := n.Status.Allocatable["nvidia.com/gpu"]
		return ok && q.Value() == 7 && n.Labels["nvidia.com/gpu.product"] != ""
	})
	if q := n.Status.Capacity["nvidia.com/gpu"]; q.Value() != 8 {
		t.Errorf("capacity %s, want 8 (every GPU, the unhealthy one too)", q.String())
	}
	if n.Labels["pool"] != "a" {
		t.Errorf("label pool=%q: --node-labels must win over the devices' labels", n.Labels["pool"])
	}
	if n.Annotations["actorlet.io/gpus"] != "[]" {
		t.Errorf("annotations %v", n.Annotations)
	}
	h.sys.Root.Send(h.pid, &messages.DeviceCapacity{
		Capacity:    map[v1.ResourceName]int64{"nvidia.com/gpu": 8},
		Allocatable: map[v1.ResourceName]int64{"nvidia.com/gpu": 6},
		Labels:      map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
		Ready:       true,
	})
	h.waitNode("one more GPU unhealthy", func(n *v1.Node, _, _, _ int) bool {
		q := n.Status.Allocatable["nvidia.com/gpu"]
		return q.Value() == 6
	})
}

func TestDeviceLabelsThatComeDuringRegistration(t *testing.T) {
	h := newHarness(t)
	// Sent at once: the registration started with the actor has no labels
	// of the devices; the Node gets them anyway.
	h.sys.Root.Send(h.pid, &messages.DeviceCapacity{
		Capacity: map[v1.ResourceName]int64{"nvidia.com/gpu": 2}, Allocatable: map[v1.ResourceName]int64{"nvidia.com/gpu": 2},
		Labels: map[string]string{"nvidia.com/gpu.present": "true"}, Ready: true,
	})
	h.waitNode("the GPU label", func(n *v1.Node, _, _, _ int) bool { return n.Labels["nvidia.com/gpu.present"] == "true" })
}
