package pod

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/actors/probe"
	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/internal/fakecri"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
	"github.com/actorlet/actorlet/supervisors"
)

// harness runs one PodActor under a test parent, with a fake runtime, a
// fake clock, an image actor that always succeeds and a status sink.
type harness struct {
	t      *testing.T
	sys    *actor.ActorSystem
	clk    *clocktesting.FakeClock
	rt     *fakecri.Runtime
	pod    *v1.Pod
	parent *actor.PID
	once   sync.Once // stop

	mu         sync.Mutex
	statuses   []v1.PodStatus
	terminated bool
	needPods   int
	pulls      int
	pullFail   string // reason to fail pulls with, when set
}

var quiet = slog.New(slog.DiscardHandler)

// The one fake runtime is what a PodActor needs, and runs exec probes and
// hooks (New takes the Runtime as the probe.Execer).
var (
	_ Runtime      = (*fakecri.Runtime)(nil)
	_ probe.Execer = (*fakecri.Runtime)(nil)
)

type spawnPod struct{}
type getChild struct{}

func newHarness(t *testing.T, pod *v1.Pod) *harness {
	t.Helper()
	return newHarnessWith(t, pod, nil)
}

// newHarnessWith lets a test adjust the PodActor's Deps.
func newHarnessWith(t *testing.T, pod *v1.Pod, adjust func(*Deps)) *harness {
	t.Helper()
	return newHarnessSys(t, pod, func(_ *actor.ActorSystem, d *Deps) {
		if adjust != nil {
			adjust(d)
		}
	})
}

// newHarnessSys also gives the adjustment the actor system (to spawn fakes).
func newHarnessSys(t *testing.T, pod *v1.Pod, adjust func(*actor.ActorSystem, *Deps)) *harness {
	t.Helper()
	return newHarnessPulls(t, pod, "", adjust)
}

// newHarnessPulls starts with image pulls failing with pullFail (when set),
// from the very first pull.
func newHarnessPulls(t *testing.T, pod *v1.Pod, pullFail string, adjust func(*actor.ActorSystem, *Deps)) *harness {
	t.Helper()
	return startHarness(t, pod, pullFail, time.Time{}, adjust)
}

// startHarness starts the harness; the first SyncPod carries newSince (the
// NodeActor's for a pod new to the node), the answers to NeedPod never do.
func startHarness(t *testing.T, pod *v1.Pod, pullFail string, newSince time.Time, adjust func(*actor.ActorSystem, *Deps)) *harness {
	t.Helper()
	h := &harness{t: t, sys: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet })), clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), pod: pod, pullFail: pullFail}
	h.rt = fakecri.New(h.clk)
	status := h.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.PodStatusUpdate); ok {
			h.mu.Lock()
			h.statuses = append(h.statuses, m.Pod.Status)
			h.mu.Unlock()
		}
	}))
	images := h.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.EnsureImage); ok {
			h.mu.Lock()
			h.pulls++
			fail := h.pullFail
			h.mu.Unlock()
			res := &messages.ImageResult{RequestID: m.RequestID, Image: m.Image, ImageRef: "sha256:" + m.Image}
			if fail != "" {
				res = &messages.ImageResult{RequestID: m.RequestID, Image: m.Image, Reason: fail, Message: "no such image"}
			}
			c.Send(m.ReplyTo, res)
		}
	}))
	deps := Deps{Runtime: h.rt, Images: images, Status: status, Clock: h.clk, Log: quiet,
		Config: Config{RuntimeName: "fake", HostIP: "192.0.2.1", PodLogsDir: t.TempDir(), BackoffBase: 10 * time.Second, BackoffMax: 40 * time.Second}}
	if adjust != nil {
		adjust(h.sys, &deps)
	}
	var child *actor.PID
	parentProps := actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case spawnPod:
			props := actor.PropsFromProducer(New(pod.UID, deps), actor.WithReceiverMiddleware(supervisors.Chaos(), actortest.Barrier()))
			child = c.Spawn(props)
			c.Send(child, &messages.SyncPod{Pod: pod.DeepCopy(), NewSince: newSince})
		case getChild:
			c.Respond(child)
		case *messages.NeedPod:
			h.mu.Lock()
			h.needPods++
			h.mu.Unlock()
			c.Send(child, &messages.SyncPod{Pod: pod.DeepCopy()})
		case *messages.PodTerminated:
			h.mu.Lock()
			h.terminated = true
			h.mu.Unlock()
		case *messages.KillPod, *messages.PodLifecycleEvent, *messages.ChaosPanic:
			c.Send(child, m)
		}
	}, actor.WithSupervisor(actor.NewRestartingStrategy()))
	h.parent = h.sys.Root.Spawn(parentProps)
	h.sys.Root.Send(h.parent, spawnPod{})
	t.Cleanup(h.stop)
	return h
}

// stop stops the parent and the PodActor under it, and returns once they
// are gone (more than once is fine).
func (h *harness) stop() {
	h.once.Do(func() { _ = h.sys.Root.StopFuture(h.parent).Wait() })
}

func (h *harness) send(m any) { h.sys.Root.Send(h.parent, m) }

// poke tells the PodActor the runtime changed, as the PLEG would.
func (h *harness) poke() {
	h.send(&messages.PodLifecycleEvent{UID: h.pod.UID, Type: messages.ContainerChanged})
}

func (h *harness) latest() *v1.PodStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.statuses) == 0 {
		return nil
	}
	s := h.statuses[len(h.statuses)-1]
	return &s
}

// waitStatus waits until the newest published status satisfies cond.
func (h *harness) waitStatus(what string, cond func(*v1.PodStatus) bool) *v1.PodStatus {
	h.t.Helper()
	var got *v1.PodStatus
	actortest.EventuallyDetail(h.t, what, func() bool {
		got = h.latest()
		return got != nil && cond(got)
	}, func() string { return fmt.Sprintf("last status: %+v", h.latest()) })
	return got
}

func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	actortest.Eventually(h.t, what, cond)
}

// execLog is the ExecSync calls that reached a running container, each as
// "<container name> <command>", in order.
func (h *harness) execLog() []string {
	var out []string
	for _, e := range h.rt.Execs() {
		out = append(out, e.Name+" "+strings.Join(e.Cmd, " "))
	}
	return out
}

// execCount is how many ExecSync calls reached the container of name.
func (h *harness) execCount(name string) int {
	n := 0
	for _, e := range h.rt.Execs() {
		if e.Name == name {
			n++
		}
	}
	return n
}

// sync returns once the PodActor has handled every message sent to it so
// far (timer callbacks the fake clock already ran included).
func (h *harness) sync() {
	h.t.Helper()
	actortest.Sync(h.t, h.sys, h.childPID())
}

// settle returns once the PodActor is idle: it asks it to publish its
// status again (Resync) and waits for that status, which follows any read
// or operation in flight.
func (h *harness) settle() {
	h.t.Helper()
	h.mu.Lock()
	n := len(h.statuses)
	h.mu.Unlock()
	h.sys.Root.Send(h.childPID(), &messages.Resync{})
	h.waitFor("the status published again", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.statuses) > n
	})
}

func testPod(policy v1.RestartPolicy, containers ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default", UID: types.UID("uid-1")},
		Spec:       v1.PodSpec{RestartPolicy: policy},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c, Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent})
	}
	return p
}

func running(s *v1.PodStatus) bool {
	if s.Phase != v1.PodRunning {
		return false
	}
	for _, cs := range s.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return true
}

func TestPodReachesRunning(t *testing.T) {
	h := newHarness(t, testPod(v1.RestartPolicyAlways, "app", "sidecar"))
	st := h.waitStatus("Running", running)
	if st.PodIP == "" || st.HostIP != "192.0.2.1" {
		t.Errorf("podIP %q hostIP %q", st.PodIP, st.HostIP)
	}
	if st.QOSClass != v1.PodQOSBestEffort {
		t.Errorf("qos %s", st.QOSClass)
	}
	for _, c := range st.Conditions {
		if c.Status != v1.ConditionTrue {
			t.Errorf("condition %s is %s (%s)", c.Type, c.Status, c.Message)
		}
	}
	if got := h.rt.Count("CreateContainer"); got != 2 {
		t.Errorf("CreateContainer calls = %d, want 2", got)
	}
	for _, c := range h.rt.Containers() {
		if c.Labels[podspec.LabelPodUID] != "uid-1" || c.Labels[podspec.LabelContainerName] == "" || c.Annotations[podspec.AnnotationContainerHash] == "" {
			t.Errorf("container %s lacks upstream labels: %v %v", c.Id, c.Labels, c.Annotations)
		}
	}
}

func TestCrashLoopBackOffGrowsAndCaps(t *testing.T) {
	h := newHarness(t, testPod(v1.RestartPolicyAlways, "app"))
	h.waitStatus("Running", running)

	// The first crash restarts at once (as upstream), then 10 s, 20 s, 40 s, 40 s.
	for i, wantDelay := range []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 40 * time.Second} {
		restarts := int32(i + 1)
		if !h.rt.ExitNamed("app", 3) {
			t.Fatalf("crash %d: no running container", i)
		}
		h.poke()
		if wantDelay > 0 {
			st := h.waitStatus("CrashLoopBackOff", func(s *v1.PodStatus) bool {
				w := s.ContainerStatuses[0].State.Waiting
				return w != nil && w.Reason == ReasonCrashLoopBackOff
			})
			cs := st.ContainerStatuses[0]
			if cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 3 {
				t.Fatalf("crash %d: lastState %+v", i, cs.LastTerminationState)
			}
			if want := fmt.Sprintf("back-off %s", wantDelay); !contains(cs.State.Waiting.Message, want) {
				t.Fatalf("crash %d: message %q, want %q", i, cs.State.Waiting.Message, want)
			}
			// Step to just before the end of the back-off, let the actor
			// look, then step the last second: the restart must start at
			// exactly finish+delay on the fake clock, not a second early.
			h.clk.Step(wantDelay - time.Second)
			h.poke()
			h.clk.Step(time.Second)
		}
		st := h.waitStatus(fmt.Sprintf("restart %d", restarts), func(s *v1.PodStatus) bool {
			return running(s) && s.ContainerStatuses[0].RestartCount == restarts
		})
		cs := st.ContainerStatuses[0]
		gap := cs.State.Running.StartedAt.Sub(cs.LastTerminationState.Terminated.FinishedAt.Time)
		if gap != wantDelay {
			t.Fatalf("crash %d: restarted %s after the crash, want %s", i, gap, wantDelay)
		}
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestRestartPolicies(t *testing.T) {
	tests := []struct {
		name      string
		policy    v1.RestartPolicy
		exitCode  int32
		wantPhase v1.PodPhase
		restarts  bool
	}{
		{name: "Never success", policy: v1.RestartPolicyNever, exitCode: 0, wantPhase: v1.PodSucceeded},
		{name: "Never failure", policy: v1.RestartPolicyNever, exitCode: 2, wantPhase: v1.PodFailed},
		{name: "OnFailure success", policy: v1.RestartPolicyOnFailure, exitCode: 0, wantPhase: v1.PodSucceeded},
		{name: "OnFailure failure restarts", policy: v1.RestartPolicyOnFailure, exitCode: 2, wantPhase: v1.PodRunning, restarts: true},
		{name: "Always success restarts", policy: v1.RestartPolicyAlways, exitCode: 0, wantPhase: v1.PodRunning, restarts: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, testPod(tt.policy, "app"))
			h.waitStatus("Running", running)
			h.rt.ExitNamed("app", tt.exitCode)
			h.poke()
			if tt.restarts {
				h.waitStatus("restarted", func(s *v1.PodStatus) bool {
					return running(s) && s.ContainerStatuses[0].RestartCount == 1
				})
				return
			}
			st := h.waitStatus(string(tt.wantPhase), func(s *v1.PodStatus) bool { return s.Phase == tt.wantPhase })
			if term := st.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != tt.exitCode {
				t.Fatalf("terminated state %+v", st.ContainerStatuses[0].State)
			}
			// A finished pod's sandbox is stopped; no container is restarted.
			h.waitFor("sandbox stopped", func() bool { return h.rt.Count("StopPodSandbox") == 1 })
			if got := h.rt.Count("CreateContainer"); got != 1 {
				t.Fatalf("CreateContainer calls = %d, want 1", got)
			}
		})
	}
}

func TestInitContainersRunInOrder(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.InitContainers = []v1.Container{{Name: "init-a", Image: "busybox:1"}, {Name: "init-b", Image: "busybox:1"}}
	h := newHarness(t, p)
	h.waitStatus("init-a running", func(s *v1.PodStatus) bool {
		return s.Phase == v1.PodPending && s.InitContainerStatuses[0].State.Running != nil &&
			s.InitContainerStatuses[1].State.Waiting != nil &&
			s.ContainerStatuses[0].State.Waiting != nil && s.ContainerStatuses[0].State.Waiting.Reason == ReasonPodInitializing
	})
	h.rt.ExitNamed("init-a", 0)
	h.poke()
	h.waitStatus("init-b running", func(s *v1.PodStatus) bool { return s.InitContainerStatuses[1].State.Running != nil })
	// init-b fails once: with restartPolicy Always it is run again.
	h.rt.ExitNamed("init-b", 1)
	h.poke()
	h.waitStatus("init-b rerun", func(s *v1.PodStatus) bool {
		return s.InitContainerStatuses[1].State.Running != nil && s.InitContainerStatuses[1].RestartCount == 1
	})
	h.rt.ExitNamed("init-b", 0)
	h.poke()
	st := h.waitStatus("Running", running)
	if st.InitContainerStatuses[0].State.Terminated == nil || st.InitContainerStatuses[1].State.Terminated == nil {
		t.Fatalf("init statuses %+v", st.InitContainerStatuses)
	}
	var order []string
	for _, c := range h.rt.Containers() {
		order = append(order, c.Metadata.Name)
	}
	if len(order) != 4 {
		t.Fatalf("containers %v: want init-a, init-b and its failed attempt, app", order)
	}
}

func TestInitContainerFailureWithNeverFailsPod(t *testing.T) {
	p := testPod(v1.RestartPolicyNever, "app")
	p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox:1"}}
	h := newHarness(t, p)
	h.waitStatus("init running", func(s *v1.PodStatus) bool { return s.InitContainerStatuses[0].State.Running != nil })
	h.rt.ExitNamed("init", 1)
	h.poke()
	h.waitStatus("Failed", func(s *v1.PodStatus) bool { return s.Phase == v1.PodFailed })
	if h.rt.Count("CreateContainer") != 1 {
		t.Fatalf("app container must never be created")
	}
}

func TestKillPodRemovesEverything(t *testing.T) {
	h := newHarness(t, testPod(v1.RestartPolicyAlways, "app"))
	h.waitStatus("Running", running)
	h.send(&messages.KillPod{UID: "uid-1", Reason: "test"})
	h.waitFor("terminated", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.terminated
	})
	if n := len(h.rt.Containers()); n != 0 || len(h.rt.Sandboxes()) != 0 {
		t.Fatalf("left behind: %d containers, %d sandboxes", n, len(h.rt.Sandboxes()))
	}
}

func TestRestartedActorAdoptsContainers(t *testing.T) {
	h := newHarness(t, testPod(v1.RestartPolicyAlways, "app"))
	h.waitStatus("Running", running)
	h.rt.ExitNamed("app", 1)
	h.poke()
	h.waitStatus("restart 1", func(s *v1.PodStatus) bool { return running(s) && s.ContainerStatuses[0].RestartCount == 1 })
	before := h.rt.Count("CreateContainer")

	h.send(&messages.ChaosPanic{Reason: "test"})
	h.waitFor("NeedPod after restart", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.needPods > 0
	})
	// The new incarnation inspects and republishes: same container, same count.
	h.mu.Lock()
	h.statuses = nil
	h.mu.Unlock()
	h.sys.Root.Send(h.childPID(), &messages.Resync{}) // publish again, even if it already did
	st := h.waitStatus("Running after restart", running)
	if st.ContainerStatuses[0].RestartCount != 1 {
		t.Fatalf("restart count %d, want 1: an actor restart is not a container restart", st.ContainerStatuses[0].RestartCount)
	}
	if got := h.rt.Count("CreateContainer"); got != before {
		t.Fatalf("CreateContainer calls %d -> %d: the restarted actor created instead of adopting", before, got)
	}
}

func TestAlreadyExistsIsAdopted(t *testing.T) {
	// Another incarnation's sandbox holds the name: the actor must wait,
	// look again and adopt, never create a second one. The failure is armed
	// before the PodActor starts.
	h := newHarnessWith(t, testPod(v1.RestartPolicyAlways, "app"), func(d *Deps) {
		d.Runtime.(*fakecri.Runtime).Inject("RunPodSandbox", errdefs.Wrap(errdefs.ErrAlreadyExists, errors.New("name is reserved")))
	})
	// The look that adopts follows the failure, and the hold is armed with
	// it: step past the hold only then.
	h.waitFor("the look after the failed RunPodSandbox", func() bool {
		return h.rt.Count("RunPodSandbox") == 1 && h.rt.Count("ListPodSandbox") == 2
	})
	h.clk.Step(2 * time.Second)
	h.waitStatus("Running", running)
	if len(h.rt.Sandboxes()) != 1 {
		t.Fatalf("sandboxes %d", len(h.rt.Sandboxes()))
	}
}

func TestImagePullFailureShowsReason(t *testing.T) {
	h := newHarnessPulls(t, testPod(v1.RestartPolicyAlways, "app"), messages.ReasonErrImagePull, nil)
	h.waitStatus("ErrImagePull", func(s *v1.PodStatus) bool {
		w := s.ContainerStatuses[0].State.Waiting
		return s.Phase == v1.PodPending && w != nil && w.Reason == messages.ReasonErrImagePull
	})
	h.mu.Lock()
	h.pullFail = ""
	h.mu.Unlock()
	h.clk.Step(10 * time.Second)
	h.waitStatus("Running after the pull works", running)
}

func TestContainerSpecChangeRestartsContainer(t *testing.T) {
	h := newHarness(t, testPod(v1.RestartPolicyAlways, "app"))
	h.waitStatus("Running", running)
	changed := h.pod.DeepCopy()
	changed.Spec.Containers[0].Image = "busybox:2"
	h.sys.Root.Send(h.childPID(), &messages.SyncPod{Pod: changed})
	h.waitStatus("new image running", func(s *v1.PodStatus) bool {
		return running(s) && s.ContainerStatuses[0].Image == "busybox:2"
	})
	h.waitFor("recreated", func() bool { return h.rt.Count("CreateContainer") == 2 })
	var runningCount int
	for _, c := range h.rt.Containers() {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			runningCount++
			if c.Image.UserSpecifiedImage != "busybox:2" {
				t.Errorf("running image %s", c.Image.UserSpecifiedImage)
			}
		}
	}
	if runningCount != 1 {
		t.Fatalf("running containers %d", runningCount)
	}
}

func (h *harness) childPID() *actor.PID {
	res, err := h.sys.Root.RequestFuture(h.parent, getChild{}, time.Second).Result()
	if err != nil {
		h.t.Fatal(err)
	}
	return res.(*actor.PID)
}
