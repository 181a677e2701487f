package pod

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/actorlet/actorlet/internal/fakecri"
)

// imageUserRuntime is the fake runtime whose images run as img's user.
type imageUserRuntime struct {
	*fakecri.Runtime
	img *runtimeapi.Image
}

var _ ImageInspector = imageUserRuntime{}

func (r imageUserRuntime) ImageStatus(context.Context, string) (*runtimeapi.Image, error) {
	return r.img, nil
}

func (r *fakeRecorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func TestRunAsNonRootIsCreateContainerConfigError(t *testing.T) {
	const pod = `"web-node1_default(uid-1)"`
	tests := []struct {
		name    string
		sc      *v1.SecurityContext
		img     *runtimeapi.Image // nil: the image sets no user (root)
		wantMsg string            // "": the container runs
	}{
		{name: "explicit root uid", sc: &v1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)},
			img:     &runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: 1234}},
			wantMsg: "container's runAsUser breaks non-root policy (pod: " + pod + ", container: app)"},
		{name: "the image runs as root", sc: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			wantMsg: "container has runAsNonRoot and image will run as root (pod: " + pod + ", container: app)"},
		{name: "the image has a user name", sc: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}, img: &runtimeapi.Image{Username: "nobody"},
			wantMsg: "container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root (pod: " + pod + ", container: app)"},
		{name: "the image's uid is not root", sc: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}, img: &runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: 1234}}},
		{name: "an explicit non-root uid", sc: &v1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod(v1.RestartPolicyAlways, "app")
			p.Spec.Containers[0].SecurityContext = tt.sc
			rec := &fakeRecorder{}
			var rt imageUserRuntime
			h := newHarnessWith(t, p, func(d *Deps) {
				rt = imageUserRuntime{Runtime: d.Runtime.(*fakecri.Runtime), img: tt.img}
				d.Runtime, d.Events = rt, rec
			})
			if tt.wantMsg == "" {
				h.waitStatus("Running", running)
				return
			}
			st := h.waitStatus("CreateContainerConfigError", func(s *v1.PodStatus) bool {
				w := s.ContainerStatuses[0].State.Waiting
				return w != nil && w.Reason == ReasonCreateContainerConfigError
			})
			if got := st.ContainerStatuses[0].State.Waiting.Message; got != tt.wantMsg {
				t.Errorf("waiting message %q,\nwant %q", got, tt.wantMsg)
			}
			if want := "Warning Failed Error: " + tt.wantMsg; !slices.Contains(rec.list(), want) {
				t.Errorf("events %q, want %q", rec.list(), want)
			}
			if n := rt.Count("CreateContainer"); n != 0 {
				t.Errorf("%d containers created, want none", n)
			}
		})
	}
}

func TestSandboxFailureIsAnEventAndRetried(t *testing.T) {
	rec := &fakeRecorder{}
	// The failure is armed before the spawn: the actor runs its sandbox at once.
	h := newHarnessWith(t, testPod(v1.RestartPolicyAlways, "app"), func(d *Deps) {
		d.Events = rec
		d.Runtime.(*fakecri.Runtime).Inject("RunPodSandbox", errors.New("failed to create containerd task: sethostname: invalid argument"))
	})
	const want = "Warning FailedCreatePodSandBox Failed to create pod sandbox: failed to create containerd task: sethostname: invalid argument"
	h.waitFor("FailedCreatePodSandBox event", func() bool { return slices.Contains(rec.list(), want) })
	h.settle()
	if n := h.rt.Count("RunPodSandbox"); n != 1 {
		t.Fatalf("RunPodSandbox %d times before the back-off ran out, want 1", n)
	}
	h.clk.Step(2 * time.Second) // the retry back-off (1 s)
	h.waitStatus("Running after the retry", running)
	if n := h.rt.Count("RunPodSandbox"); n != 2 {
		t.Errorf("RunPodSandbox %d times, want 2", n)
	}
}

func TestInvalidHostnameFailsTheSandbox(t *testing.T) {
	rec := &fakeRecorder{}
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.HostnameOverride = ptr.To("Not-RFC1123")
	h := newHarnessWith(t, p, func(d *Deps) { d.Events = rec })
	h.waitFor("FailedCreatePodSandBox event", func() bool {
		for _, e := range rec.list() {
			if strings.HasPrefix(e, `Warning FailedCreatePodSandBox Failed to create pod sandbox: pod HostnameOverride "Not-RFC1123" is not a valid DNS subdomain`) {
				return true
			}
		}
		return false
	})
	if n := h.rt.Count("RunPodSandbox"); n != 0 {
		t.Errorf("RunPodSandbox called %d times with a hostname the kernel may refuse", n)
	}
}

func TestSandboxChangedEvent(t *testing.T) {
	rec := &fakeRecorder{}
	h := newHarnessWith(t, testPod(v1.RestartPolicyAlways, "app"), func(d *Deps) { d.Events = rec })
	h.waitStatus("Running", running)
	const want = "Normal SandboxChanged Pod sandbox changed, it will be killed and re-created."
	if slices.Contains(rec.list(), want) {
		t.Fatalf("SandboxChanged for the pod's first sandbox: %q", rec.list())
	}
	sb := h.rt.Sandboxes()[0]
	if err := h.rt.StopPodSandbox(context.Background(), sb.Id); err != nil {
		t.Fatal(err)
	}
	h.poke()
	h.waitFor("SandboxChanged event", func() bool { return slices.Contains(rec.list(), want) })
	h.waitFor("a second sandbox", func() bool { return h.rt.Count("RunPodSandbox") == 2 })
}
