package pod

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/internal/fakecri"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// fakePLEG stands for the PLEG's runtime cache: it records GetRuntimePod
// and answers each with the pod's slice of a relist at that moment on the
// fake clock, unless it is silent.
type fakePLEG struct {
	silent bool

	pid  *actor.PID
	mu   sync.Mutex
	asks []messages.GetRuntimePod
}

// withPLEG is the harness option that makes p the PodActor's Deps.PLEG.
func withPLEG(p *fakePLEG) func(*actor.ActorSystem, *Deps) {
	return func(sys *actor.ActorSystem, d *Deps) {
		rt, clk := d.Runtime.(*fakecri.Runtime), d.Clock
		p.pid = sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			m, ok := c.Message().(*messages.GetRuntimePod)
			if !ok {
				return
			}
			p.mu.Lock()
			p.asks = append(p.asks, *m)
			p.mu.Unlock()
			if !p.silent {
				c.Send(m.ReplyTo, sliceFrom(rt, m.UID, clk.Now()))
			}
		}, actor.WithReceiverMiddleware(actortest.Barrier())))
		d.PLEG = p.pid
	}
}

// asked returns the GetRuntimePod requests the PLEG has handled.
func (p *fakePLEG) asked(t *testing.T, sys *actor.ActorSystem) []messages.GetRuntimePod {
	t.Helper()
	actortest.Sync(t, sys, p.pid)
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.asks)
}

func (p *fakePLEG) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.asks)
}

// cacheConfig sets the periods the tests step through.
// withAndWithoutPLEG runs test on a harness of pod with cacheConfig, as a
// subtest without a PLEG (pleg is nil) and one with the fake PLEG.
func withAndWithoutPLEG(t *testing.T, pod *v1.Pod, test func(t *testing.T, h *harness, pleg *fakePLEG)) {
	for _, withPleg := range []bool{false, true} {
		name := "without a PLEG"
		if withPleg {
			name = "with a PLEG"
		}
		t.Run(name, func(t *testing.T) {
			var pleg *fakePLEG
			if withPleg {
				pleg = &fakePLEG{}
			}
			test(t, cachedHarness(t, pod.DeepCopy(), pleg, nil), pleg)
		})
	}
}

// cachedHarness starts a harness of pod with cacheConfig, the fake PLEG p
// (none where nil), then adjust (if any).
func cachedHarness(t *testing.T, pod *v1.Pod, p *fakePLEG, adjust func(*Deps)) *harness {
	return newHarnessSys(t, pod, func(sys *actor.ActorSystem, d *Deps) {
		cacheConfig(d)
		if p != nil {
			withPLEG(p)(sys, d)
		}
		if adjust != nil {
			adjust(d)
		}
	})
}

func cacheConfig(d *Deps) {
	d.Config.SyncPeriod = 30 * time.Second
	d.Config.CacheWait = 10 * time.Second
}

// sliceFrom is the pod's slice of a relist that started at relisted, as
// the PLEG sends it; it calls no runtime method.
func sliceFrom(rt *fakecri.Runtime, uid types.UID, relisted time.Time) *messages.RuntimePod {
	p := &messages.RuntimePod{UID: uid, Relisted: relisted}
	for _, sb := range rt.Sandboxes() {
		if sb.Labels[podspec.LabelPodUID] == string(uid) {
			p.Sandboxes = append(p.Sandboxes, messages.RuntimeSandbox{ID: sb.Id, State: sb.State})
		}
	}
	for _, c := range rt.Containers() {
		if c.Labels[podspec.LabelPodUID] == string(uid) {
			p.Containers = append(p.Containers, messages.RuntimeContainer{ID: c.Id, SandboxID: rt.SandboxOf(c.Id), State: c.State})
		}
	}
	return p
}

// callsSince returns the runtime calls after the first n.
func (h *harness) callsSince(n int) []string {
	return h.rt.Calls()[n:]
}

// restarted: running again after one crash that exited with code.
func restarted(code int32) func(*v1.PodStatus) bool {
	return func(s *v1.PodStatus) bool {
		cs := s.ContainerStatuses[0]
		return running(s) && cs.RestartCount == 1 &&
			cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode == code
	}
}

var (
	restartCalls = []string{"CreateContainer", "StartContainer", "ContainerStatus"}
	listCalls    = []string{"ListPodSandbox", "ListContainers"}
)

func TestPodStartCallsTheRuntimeSevenTimes(t *testing.T) {
	want := []string{"ListPodSandbox", "ListContainers", "RunPodSandbox", "PodSandboxStatus", "CreateContainer", "StartContainer", "ContainerStatus"}
	withAndWithoutPLEG(t, testPod(v1.RestartPolicyAlways, "app"), func(t *testing.T, h *harness, pleg *fakePLEG) {
		h.waitStatus("Running", running)
		h.settle()
		if got := h.rt.Calls(); !slices.Equal(got, want) {
			t.Fatalf("runtime calls %q, want %q", got, want)
		}
		for _, m := range listCalls {
			if n := h.rt.Count(m); n != 1 {
				t.Errorf("%s called %d times, want once", m, n)
			}
		}
		if pleg != nil {
			if asks := pleg.asked(t, h.sys); len(asks) != 0 {
				t.Errorf("asked the runtime cache %d times during a start", len(asks))
			}
		}
	})
}

// TestNewPodStartReadsTheCache: a pod new to the node (SyncPod.NewSince)
// is read from the runtime cache first, not listed: its start calls the
// runtime only to make and read back what it starts. Without a PLEG it
// lists, as any first read.
func TestNewPodStartReadsTheCache(t *testing.T) {
	startOnly := []string{"RunPodSandbox", "PodSandboxStatus", "CreateContainer", "StartContainer", "ContainerStatus"}
	for _, withPleg := range []bool{true, false} {
		t.Run(fmt.Sprintf("PLEG %v", withPleg), func(t *testing.T) {
			var pleg *fakePLEG
			adjust := cacheConfig
			if withPleg {
				pleg = &fakePLEG{}
			}
			clk0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // the harness clock's start
			h := startHarness(t, testPod(v1.RestartPolicyAlways, "app"), "", clk0.Add(-time.Second), func(sys *actor.ActorSystem, d *Deps) {
				adjust(d)
				if pleg != nil {
					withPLEG(pleg)(sys, d)
				}
			})
			h.waitStatus("Running", running)
			h.settle()
			want := startOnly
			if !withPleg {
				want = append(slices.Clone(listCalls), startOnly...)
			}
			if got := h.rt.Calls(); !slices.Equal(got, want) {
				t.Fatalf("runtime calls %q, want %q", got, want)
			}
			if pleg != nil {
				asks := pleg.asked(t, h.sys)
				if len(asks) != 1 || !asks[0].NotBefore.Equal(clk0.Add(-time.Second)) {
					t.Fatalf("asked the runtime cache %+v, want once for a relist after NewSince", asks)
				}
			}
		})
	}
}

// TestNewPodAdoptsWhatTheCacheShows: a pod new to this NodeActor whose
// containers run already (an earlier actorlet made them) is adopted from
// the cache's slice: nothing listed, nothing made again.
func TestNewPodAdoptsWhatTheCacheShows(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, "app")
	first := newHarness(t, pod.DeepCopy())
	first.waitStatus("Running", running)
	first.settle()
	rt := first.rt
	first.stop()

	pleg := &fakePLEG{}
	clk0 := first.clk.Now()
	n := len(rt.Calls())
	h := startHarness(t, pod.DeepCopy(), "", clk0.Add(-time.Second), func(sys *actor.ActorSystem, d *Deps) {
		cacheConfig(d)
		d.Runtime = rt
		withPLEG(pleg)(sys, d)
	})
	h.rt = rt
	h.waitStatus("Running", running)
	h.settle()
	// The statuses of what the slice shows are read; nothing is listed,
	// nothing made again.
	if got, want := h.callsSince(n), []string{"PodSandboxStatus", "ContainerStatus"}; !slices.Equal(got, want) {
		t.Fatalf("runtime calls %q adopting what runs, want %q", got, want)
	}
	if st := h.latest(); st.ContainerStatuses[0].RestartCount != 0 {
		t.Fatalf("adopted container restarted: %+v", st.ContainerStatuses[0])
	}
}

func TestEventSlice(t *testing.T) {
	tests := []struct {
		name      string
		exit      bool // the container exits before the event
		fresh     bool // relisted after the actor's last operation ended
		wantCalls []string
	}{
		{name: "the actor's own view, fresh: nothing read", fresh: true},
		{name: "the actor's own view, from before its last operation: nothing read"},
		{
			name: "fresh, the container exited: its status is read, nothing listed", exit: true, fresh: true,
			wantCalls: append([]string{"ContainerStatus"}, restartCalls...),
		},
		{
			name: "from before the last operation, the container exited: the runtime is listed", exit: true,
			wantCalls: append(append(slices.Clone(listCalls), "ContainerStatus"), restartCalls...),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessWith(t, testPod(v1.RestartPolicyAlways, "app"), cacheConfig)
			h.waitStatus("Running", running)
			h.settle()
			opEnd := h.clk.Now() // the start's operations ended here
			n := len(h.rt.Calls())
			if tt.fresh {
				h.clk.Step(time.Second)
			}
			if tt.exit && !h.rt.ExitNamed("app", 3) {
				t.Fatal("no running container")
			}
			ev := sliceFrom(h.rt, h.pod.UID, h.clk.Now())
			if !tt.fresh && !ev.Relisted.Equal(opEnd) {
				t.Fatalf("relisted %s, want the last operation's end %s", ev.Relisted, opEnd)
			}
			h.send(&messages.PodLifecycleEvent{UID: h.pod.UID, Type: messages.ContainerDied, Pod: ev})
			if tt.exit {
				h.waitStatus("restarted after the exit", restarted(3))
			}
			h.settle()
			if got := h.callsSince(n); !slices.Equal(got, tt.wantCalls) {
				t.Fatalf("runtime calls after the event %q, want %q", got, tt.wantCalls)
			}
			if st := h.latest(); !tt.exit && (!running(st) || st.ContainerStatuses[0].RestartCount != 0) {
				t.Fatalf("status changed with an event that shows nothing new: %+v", st.ContainerStatuses)
			}
		})
	}
}

func TestLookAgainAsksThePLEG(t *testing.T) {
	pleg := &fakePLEG{}
	var release func()
	h := cachedHarness(t, testPod(v1.RestartPolicyAlways, "app"), pleg, func(d *Deps) {
		release = d.Runtime.(*fakecri.Runtime).Block("CreateContainer")
	})
	start := h.clk.Now()
	// The last operation of the start (the container's) ends 5 s after the
	// incarnation began.
	h.waitFor("CreateContainer in flight", func() bool { return h.rt.InFlight("CreateContainer") == 1 })
	h.clk.Step(5 * time.Second)
	release()
	h.waitStatus("Running", running)
	h.settle()
	opEnd := start.Add(5 * time.Second)

	// The container exits and no event says so: the periodic look finds it.
	h.rt.ExitNamed("app", 2)
	n := len(h.rt.Calls())
	h.clk.Step(25 * time.Second) // SyncPeriod after the start
	h.waitStatus("restarted after the exit", restarted(2))
	h.settle()

	asks := pleg.asked(t, h.sys)
	if len(asks) != 1 {
		t.Fatalf("asked the runtime cache %d times, want once: %+v", len(asks), asks)
	}
	if a := asks[0]; a.UID != h.pod.UID || !a.NotBefore.Equal(opEnd) || a.ReplyTo == nil || a.ReplyTo.Id != h.childPID().Id {
		t.Fatalf("asked %+v, want UID %s, NotBefore %s (the last operation's end), ReplyTo the PodActor", a, h.pod.UID, opEnd)
	}
	want := append([]string{"ContainerStatus"}, restartCalls...)
	if got := h.callsSince(n); !slices.Equal(got, want) {
		t.Fatalf("runtime calls after the look %q, want %q: the cache's answer, not a list", got, want)
	}
}

func TestCacheWaitListsWhenThePLEGDoesNotAnswer(t *testing.T) {
	pleg := &fakePLEG{silent: true}
	h := cachedHarness(t, testPod(v1.RestartPolicyAlways, "app"), pleg, nil)
	h.waitStatus("Running", running)
	h.settle()
	before := sliceFrom(h.rt, h.pod.UID, h.clk.Now())
	h.rt.ExitNamed("app", 2)
	n := len(h.rt.Calls())

	h.clk.Step(30 * time.Second) // SyncPeriod: the actor looks again
	h.waitFor("GetRuntimePod", func() bool { return pleg.count() == 1 })
	h.clk.Step(9 * time.Second) // a second short of CacheWait
	h.sync()
	if got := h.callsSince(n); len(got) != 0 {
		t.Fatalf("runtime calls %q before CacheWait ran out", got)
	}
	h.clk.Step(time.Second)
	h.waitStatus("restarted after the exit", restarted(2))
	h.settle()
	want := append(append(slices.Clone(listCalls), "ContainerStatus"), restartCalls...)
	if got := h.callsSince(n); !slices.Equal(got, want) {
		t.Fatalf("runtime calls %q, want %q", got, want)
	}

	// The answer comes after all, from a relist newer than every operation
	// but showing the pod as it was: it is no longer waited for, and
	// nothing follows from it.
	n = len(h.rt.Calls())
	h.clk.Step(time.Second)
	before.Relisted = h.clk.Now()
	h.sys.Root.Send(h.childPID(), before)
	h.settle()
	if got := h.callsSince(n); len(got) != 0 {
		t.Fatalf("runtime calls %q after a late answer", got)
	}
	if st := h.latest(); !restarted(2)(st) {
		t.Fatalf("status after a late answer: %+v", st.ContainerStatuses)
	}
}

func TestRestartedActorListsOnceAndAdopts(t *testing.T) {
	pleg := &fakePLEG{}
	h := cachedHarness(t, testPod(v1.RestartPolicyAlways, "app"), pleg, nil)
	h.waitStatus("Running", running)
	h.settle()
	n := len(h.rt.Calls())
	h.mu.Lock()
	statuses := len(h.statuses)
	h.mu.Unlock()

	h.send(&messages.ChaosPanic{Reason: "test"})
	h.waitFor("a status from the new incarnation", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.needPods == 2 && len(h.statuses) > statuses
	})
	h.settle()
	st := h.latest()
	if !running(st) || st.ContainerStatuses[0].RestartCount != 0 {
		t.Fatalf("after the actor's restart: %+v", st.ContainerStatuses)
	}
	// The new incarnation has no view: it lists once and reads each
	// object's status, then makes nothing.
	want := append(slices.Clone(listCalls), "PodSandboxStatus", "ContainerStatus")
	if got := h.callsSince(n); !slices.Equal(got, want) {
		t.Fatalf("runtime calls after the actor's restart %q, want %q", got, want)
	}
	if asks := pleg.asked(t, h.sys); len(asks) != 0 {
		t.Fatalf("asked the runtime cache %d times: a new incarnation lists", len(asks))
	}
}

// An operation in flight when the actor restarts finishes in the runtime;
// the new incarnation's own try of it meets the name reservation and adopts
// what the old one made: one container, no restart counted.
func TestRestartWithCreateInFlightAdopts(t *testing.T) {
	pleg := &fakePLEG{}
	var release func()
	h := cachedHarness(t, testPod(v1.RestartPolicyAlways, "app"), pleg, func(d *Deps) {
		release = d.Runtime.(*fakecri.Runtime).Block("CreateContainer")
	})
	h.waitFor("CreateContainer in flight", func() bool { return h.rt.InFlight("CreateContainer") == 1 })
	h.send(&messages.ChaosPanic{Reason: "test"})
	h.waitFor("the new incarnation's CreateContainer in flight too", func() bool { return h.rt.InFlight("CreateContainer") == 2 })
	release()
	h.stepUntil("Running, no restart", func(s *v1.PodStatus) bool {
		return running(s) && s.ContainerStatuses[0].RestartCount == 0
	})
	h.settle()
	var ctrs []string
	for _, c := range h.rt.Containers() {
		ctrs = append(ctrs, fmt.Sprintf("%s/%d=%s", c.Metadata.Name, c.Metadata.Attempt, c.State))
	}
	if want := []string{"app/0=CONTAINER_RUNNING"}; !slices.Equal(ctrs, want) {
		t.Fatalf("containers %q, want %q", ctrs, want)
	}
	if n := len(h.rt.Sandboxes()); n != 1 {
		t.Fatalf("%d sandboxes, want 1", n)
	}
}

// One relist's events for a pod carry one slice. The second event comes
// while the first one's read is in flight: the read's view shows all the
// slice shows, so nothing more is read.
func TestEventsOfOneRelistReadOnce(t *testing.T) {
	withAndWithoutPLEG(t, testPod(v1.RestartPolicyAlways, "app", "side"), func(t *testing.T, h *harness, pleg *fakePLEG) {
		h.waitStatus("Running", running)
		h.settle()
		n := len(h.rt.Calls())
		h.clk.Step(time.Second)
		h.rt.ExitNamed("app", 3)
		slice := sliceFrom(h.rt, h.pod.UID, h.clk.Now())
		release := h.rt.Block("ContainerStatus") // the read stays in flight
		h.send(&messages.PodLifecycleEvent{UID: h.pod.UID, Type: messages.ContainerDied, Pod: slice})
		h.waitFor("the read in flight", func() bool { return h.rt.InFlight("ContainerStatus") == 1 })
		h.send(&messages.PodLifecycleEvent{UID: h.pod.UID, Type: messages.ContainerChanged, Pod: slice})
		h.sync() // the second event is handled while the read is in flight
		release()
		h.waitStatus("app restarted", func(s *v1.PodStatus) bool {
			return running(s) && s.ContainerStatuses[0].RestartCount == 1
		})
		h.settle()
		want := append([]string{"ContainerStatus"}, restartCalls...)
		if got := h.callsSince(n); !slices.Equal(got, want) {
			t.Errorf("runtime calls %q, want %q", got, want)
		}
		if pleg != nil {
			if asks := pleg.asked(t, h.sys); len(asks) != 0 {
				t.Errorf("asked the runtime cache %d times: %+v", len(asks), asks)
			}
		}
	})
}
