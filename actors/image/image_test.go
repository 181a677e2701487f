package image

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/internal/fakecri"
	"github.com/actorlet/actorlet/messages"
)

var _ ImageService = (*fakecri.Runtime)(nil)

// counts are the fake runtime's image calls: pulls and status checks
// started, pulls in flight.
func counts(svc *fakecri.Runtime) (pulls, statuses, inFlight int) {
	return svc.Count("PullImage"), svc.Count("ImageStatus"), svc.InFlight("PullImage")
}

// results records what the ImageActor replies.
type results struct {
	mu  sync.Mutex
	got []messages.ImageResult
}

func (r *results) receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*messages.ImageResult); ok {
		r.mu.Lock()
		r.got = append(r.got, *m)
		r.mu.Unlock()
	}
}

func (r *results) all() []messages.ImageResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]messages.ImageResult(nil), r.got...)
}

type harness struct {
	t    *testing.T
	sys  *actor.ActorSystem
	pid  *actor.PID
	rec  *results
	recP *actor.PID
	svc  *fakecri.Runtime
	clk  *testclock.FakeClock
	next uint64
}

func newHarness(t *testing.T, svc *fakecri.Runtime) *harness {
	t.Helper()
	sys := actor.NewActorSystem()
	t.Cleanup(func() { sys.Shutdown() })
	h := &harness{t: t, sys: sys, svc: svc, rec: &results{}, clk: testclock.NewFakeClock(time.Unix(1000, 0))}
	h.recP = sys.Root.Spawn(actor.PropsFromFunc(h.rec.receive))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h.pid = sys.Root.Spawn(actor.PropsFromProducer(New(svc, h.clk, Config{}, log)))
	t.Cleanup(func() { sys.Root.Stop(h.pid) })
	return h
}

// ensure sends a request and returns its id.
func (h *harness) ensure(image string, policy v1.PullPolicy) uint64 {
	h.next++
	h.sys.Root.Send(h.pid, &messages.EnsureImage{RequestID: h.next, Image: image, Policy: policy, ReplyTo: h.recP})
	return h.next
}

// waitPulls waits (what: for what) until n pulls are in flight.
func (h *harness) waitPulls(what string, n int) {
	h.t.Helper()
	actortest.Eventually(h.t, what, func() bool { _, _, inFlight := counts(h.svc); return inFlight == n })
}

// wait waits for n results in all and returns them.
func (h *harness) wait(n int) []messages.ImageResult {
	h.t.Helper()
	var got []messages.ImageResult
	actortest.EventuallyDetail(h.t, fmt.Sprintf("%d results", n), func() bool {
		got = h.rec.all()
		return len(got) >= n
	}, func() string { return fmt.Sprintf("have %+v", h.rec.all()) })
	if len(got) > n {
		h.t.Fatalf("got %d results, want %d: %+v", len(got), n, got)
	}
	return got
}

// ensureAndWait sends one request and returns its result.
func (h *harness) ensureAndWait(image string, policy v1.PullPolicy) messages.ImageResult {
	h.t.Helper()
	n := len(h.rec.all())
	id := h.ensure(image, policy)
	r := h.wait(n + 1)[n]
	if r.RequestID != id || r.Image != image {
		h.t.Fatalf("result %+v does not answer request %d for %s", r, id, image)
	}
	return r
}

func TestPolicies(t *testing.T) {
	tests := []struct {
		name       string
		present    bool
		pullErr    error
		policy     v1.PullPolicy
		image      string
		want       messages.ImageResult // RequestID and Image are checked apart
		wantPulls  int
		wantStatus int
	}{
		{name: "IfNotPresent present", present: true, policy: v1.PullIfNotPresent, image: "nginx:1",
			want: messages.ImageResult{ImageRef: "sha256:local"}, wantStatus: 1},
		{name: "IfNotPresent absent pulls", policy: v1.PullIfNotPresent, image: "nginx:1",
			want: messages.ImageResult{ImageRef: "sha256:nginx:1", Pulled: true}, wantPulls: 1, wantStatus: 1},
		{name: "Never present", present: true, policy: v1.PullNever, image: "nginx:1",
			want: messages.ImageResult{ImageRef: "sha256:local"}, wantStatus: 1},
		{name: "Never absent", policy: v1.PullNever, image: "nginx:1",
			want: messages.ImageResult{Reason: messages.ReasonErrImageNeverPull,
				Message: `Container image "nginx:1" is not present with pull policy of Never`}, wantStatus: 1},
		{name: "Always pulls even when present", present: true, policy: v1.PullAlways, image: "nginx:1",
			want: messages.ImageResult{ImageRef: "sha256:nginx:1", Pulled: true}, wantPulls: 1},
		{name: "pull failure", policy: v1.PullAlways, image: "nginx:1", pullErr: errors.New("registry unreachable"),
			want: messages.ImageResult{Reason: messages.ReasonErrImagePull,
				Message: `Failed to pull image "nginx:1": registry unreachable`}, wantPulls: 1},
		{name: "empty image", policy: v1.PullAlways, image: "",
			want: messages.ImageResult{Reason: messages.ReasonInvalidImageName,
				Message: `Failed to apply default image tag "": invalid reference format: empty`}},
		{name: "upper case repository", policy: v1.PullIfNotPresent, image: "library/Nginx",
			want: messages.ImageResult{Reason: messages.ReasonInvalidImageName,
				Message: `Failed to apply default image tag "library/Nginx": invalid reference format: repository name must be lowercase`}},
		{name: "space", policy: v1.PullIfNotPresent, image: "nginx :1",
			want: messages.ImageResult{Reason: messages.ReasonInvalidImageName,
				Message: `Failed to apply default image tag "nginx :1": invalid reference format: contains whitespace`}},
		{name: "registry with port, path, tag and digest", policy: v1.PullIfNotPresent, present: true,
			image: "Reg.example:5000/a/b-c:v1.2@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			want:  messages.ImageResult{ImageRef: "sha256:local"}, wantStatus: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := fakecri.New(nil)
			if tt.present {
				svc.AddImage(tt.image, "sha256:local")
			}
			svc.FailPull(tt.image, tt.pullErr)
			h := newHarness(t, svc)
			got := h.ensureAndWait(tt.image, tt.policy)
			got.RequestID, got.Image = 0, ""
			if got != tt.want {
				t.Fatalf("result %+v, want %+v", got, tt.want)
			}
			if p, s, _ := counts(svc); p != tt.wantPulls || s != tt.wantStatus {
				t.Fatalf("pulls %d statuses %d, want %d %d", p, s, tt.wantPulls, tt.wantStatus)
			}
		})
	}
}

func TestDedup(t *testing.T) {
	tests := []struct {
		name     string
		policies []v1.PullPolicy
	}{
		{name: "two Always", policies: []v1.PullPolicy{v1.PullAlways, v1.PullAlways}},
		{name: "Always then IfNotPresent", policies: []v1.PullPolicy{v1.PullAlways, v1.PullIfNotPresent}},
		{name: "three IfNotPresent", policies: []v1.PullPolicy{v1.PullIfNotPresent, v1.PullIfNotPresent, v1.PullIfNotPresent}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := fakecri.New(nil)
			release := svc.Block("PullImage")
			h := newHarness(t, svc)
			var ids []uint64
			for _, p := range tt.policies {
				ids = append(ids, h.ensure("busybox:1", p))
			}
			h.waitPulls("the pull to start", 1)
			release() // every request is in the mailbox before the pull's result
			got := h.wait(len(tt.policies))
			for i, r := range got {
				if r.RequestID != ids[i] || r.Reason != "" || r.ImageRef != "sha256:busybox:1" || !r.Pulled {
					t.Errorf("result %d: %+v", i, r)
				}
			}
			if p, _, _ := counts(svc); p != 1 {
				t.Fatalf("pulls = %d, want 1", p)
			}
		})
	}
}

func TestDifferentImagesPullConcurrently(t *testing.T) {
	h := newHarness(t, fakecri.New(nil))
	release := h.svc.Block("PullImage")
	h.ensure("a:1", v1.PullAlways)
	h.ensure("b:1", v1.PullAlways)
	h.waitPulls("the two pulls to run together", 2)
	release()
	h.wait(2)
}

func TestBackoff(t *testing.T) {
	svc := fakecri.New(nil)
	svc.FailPull("bad:1", errors.New("not found"))
	h := newHarness(t, svc)
	const img = "bad:1"
	pulls := func() int { p, _, _ := counts(svc); return p }

	backOff := messages.ImageResult{Reason: messages.ReasonImagePullBackOff, Message: `Back-off pulling image "bad:1"`}
	check := func(what string, got messages.ImageResult, want messages.ImageResult) {
		t.Helper()
		got.RequestID, got.Image = 0, ""
		if got.Reason != want.Reason || (want.Message != "" && got.Message != want.Message) {
			t.Fatalf("%s: %+v, want %+v", what, got, want)
		}
	}

	check("first pull", h.ensureAndWait(img, v1.PullAlways), messages.ImageResult{Reason: messages.ReasonErrImagePull})
	// Delays double from 10s and stop at 300s.
	for i, delay := range []time.Duration{10, 20, 40, 80, 160, 300, 300} {
		delay *= time.Second
		before := pulls()
		check(fmt.Sprintf("failure %d: right after", i), h.ensureAndWait(img, v1.PullAlways), backOff)
		h.clk.Step(delay - time.Second)
		check(fmt.Sprintf("failure %d: a second before the end", i), h.ensureAndWait(img, v1.PullIfNotPresent), backOff)
		if pulls() != before {
			t.Fatalf("failure %d: pulled during back-off", i)
		}
		h.clk.Step(time.Second)
		check(fmt.Sprintf("failure %d: after %v", i, delay), h.ensureAndWait(img, v1.PullAlways), messages.ImageResult{Reason: messages.ReasonErrImagePull})
		if pulls() != before+1 {
			t.Fatalf("failure %d: pulls %d, want %d", i, pulls(), before+1)
		}
	}

	// Success clears the back-off: the next failure backs off 10s again.
	h.clk.Step(300 * time.Second)
	svc.FailPull(img, nil)
	check("success", h.ensureAndWait(img, v1.PullAlways), messages.ImageResult{})
	svc.FailPull(img, errors.New("gone"))
	check("fails again", h.ensureAndWait(img, v1.PullAlways), messages.ImageResult{Reason: messages.ReasonErrImagePull})
	h.clk.Step(10 * time.Second)
	check("10s later", h.ensureAndWait(img, v1.PullAlways), messages.ImageResult{Reason: messages.ReasonErrImagePull})
}

func TestBackoffDoesNotHidePresentImage(t *testing.T) {
	svc := fakecri.New(nil)
	svc.FailPull("x:1", errors.New("registry down"))
	h := newHarness(t, svc)
	if r := h.ensureAndWait("x:1", v1.PullAlways); r.Reason != messages.ReasonErrImagePull {
		t.Fatalf("%+v", r)
	}
	svc.AddImage("x:1", "sha256:side-loaded")
	// IfNotPresent checks presence first, as upstream: no back-off when present.
	if r := h.ensureAndWait("x:1", v1.PullIfNotPresent); r.Reason != "" || r.ImageRef != "sha256:side-loaded" {
		t.Fatalf("%+v", r)
	}
	if r := h.ensureAndWait("x:1", v1.PullAlways); r.Reason != messages.ReasonImagePullBackOff {
		t.Fatalf("%+v", r)
	}
}

func TestStopAnswersWaiters(t *testing.T) {
	h := newHarness(t, fakecri.New(nil))
	release := h.svc.Block("PullImage")
	h.ensure("slow:1", v1.PullAlways)
	h.waitPulls("the pull to start", 1)
	if err := h.sys.Root.StopFuture(h.pid).Wait(); err != nil {
		t.Fatal(err)
	}
	got := h.wait(1)
	if got[0].Reason != messages.ReasonErrImagePull {
		t.Fatalf("%+v", got[0])
	}
	release()
}
