package pod

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/internal/fakecri"
	"github.com/actorlet/actorlet/messages"
)

// parentRecorder is the fake runtime, noting the cgroup parent of every
// sandbox and container config it is given.
type parentRecorder struct {
	*fakecri.Runtime
	mu      sync.Mutex
	parents []string
}

func (p *parentRecorder) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, h string) (string, error) {
	p.note(cfg)
	return p.Runtime.RunPodSandbox(ctx, cfg, h)
}

func (p *parentRecorder) CreateContainer(ctx context.Context, id string, cfg *runtimeapi.ContainerConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	p.note(sb)
	return p.Runtime.CreateContainer(ctx, id, cfg, sb)
}

func (p *parentRecorder) note(cfg *runtimeapi.PodSandboxConfig) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.parents = append(p.parents, cfg.GetLinux().GetCgroupParent())
}

func (p *parentRecorder) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.parents...)
}

// cgroupStub is a CgroupActor that answers EnsurePodCgroup with fail (until
// cleared) or parent, and notes the removals.
type cgroupStub struct {
	mu      sync.Mutex
	fail    error
	parent  string
	ensures int
	removed []types.UID
}

func (s *cgroupStub) receive(c actor.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m := c.Message().(type) {
	case *messages.EnsurePodCgroup:
		s.ensures++
		c.Send(m.ReplyTo, &messages.PodCgroup{UID: m.Pod.UID, Parent: s.parent, Err: s.fail})
	case *messages.RemovePodCgroup:
		s.removed = append(s.removed, m.UID)
	}
}

func (s *cgroupStub) get() (ensures int, removed []types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ensures, append([]types.UID(nil), s.removed...)
}

// The sandbox and its containers get the parent the CgroupActor answered;
// a refused cgroup holds the pod in ContainerCreating with upstream's
// event until a retry succeeds; the cgroup's removal is asked once the
// pod is gone.
func TestPodCgroupBeforeSandboxAndRemovedAfter(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app", "side")
	const parent = "/actorlet-x/kubepods/besteffort/poduid-1"
	stub := &cgroupStub{fail: errors.New("failed to ensure that the pod: uid-1 cgroups exist and are correctly applied: " + syscall.EINVAL.Error()), parent: parent}
	rec := &fakeRecorder{}
	var rt *parentRecorder
	h := newHarnessSys(t, p, func(sys *actor.ActorSystem, d *Deps) {
		rt = &parentRecorder{Runtime: d.Runtime.(*fakecri.Runtime)}
		d.Runtime = rt
		d.Events = rec
		d.Cgroups = sys.Root.Spawn(actor.PropsFromFunc(stub.receive))
	})
	h.waitStatus("waiting on the pod cgroup", func(s *v1.PodStatus) bool {
		w := s.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == ReasonContainerCreating && contains(w.Message, ReasonFailedCreatePodContainer) &&
			contains(w.Message, "invalid argument")
	})
	if n := h.rt.Count("RunPodSandbox"); n != 0 {
		t.Fatalf("sandbox run (%d) before its cgroup was made", n)
	}
	if !rec.has(ReasonFailedCreatePodContainer) {
		t.Fatalf("no %s event: %v", ReasonFailedCreatePodContainer, rec.events)
	}
	stub.mu.Lock()
	stub.fail = nil
	stub.mu.Unlock()
	h.clk.Step(time.Second) // the retry after the refusal
	h.waitStatus("Running", running)
	got := rt.all()
	if len(got) < 3 {
		t.Fatalf("parents seen %v: want the sandbox's and two containers'", got)
	}
	for _, pa := range got {
		if pa != parent {
			t.Errorf("cgroup parent %q, want %q", pa, parent)
		}
	}
	if ensures, _ := stub.get(); ensures != 2 {
		t.Errorf("EnsurePodCgroup asked %d times, want 2 (the refusal and the retry)", ensures)
	}
	h.send(&messages.KillPod{UID: p.UID, Reason: "deleted"})
	h.waitFor("RemovePodCgroup after the pod is gone", func() bool {
		_, removed := stub.get()
		return len(removed) == 1 && removed[0] == p.UID
	})
	if n := h.rt.Count("RemovePodSandbox"); n == 0 {
		t.Error("cgroup removal asked before the sandbox was removed")
	}
}
