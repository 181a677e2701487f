package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/messages"
)

// fakeImages is the runtime's image list.
type fakeImages struct {
	mu   sync.Mutex
	imgs []*runtimeapi.Image
	err  error
}

var _ ImageLister = (*fakeImages)(nil)

func (f *fakeImages) ListImages(context.Context) ([]*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.imgs, f.err
}

func (f *fakeImages) set(imgs []*runtimeapi.Image, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imgs, f.err = imgs, err
}

func img(id string, size uint64, tags, digests []string) *runtimeapi.Image {
	return &runtimeapi.Image{Id: id, Size: size, RepoTags: tags, RepoDigests: digests}
}

func names(imgs []v1.ContainerImage) []string {
	var out []string
	for _, i := range imgs {
		out = append(out, fmt.Sprintf("%v=%d", i.Names, i.SizeBytes))
	}
	return out
}

func TestNodeImages(t *testing.T) {
	pause := img("sha256:p", 300_000, []string{"registry.k8s.io/pause:3.10"}, []string{"registry.k8s.io/pause@sha256:ee"})
	busybox := img("sha256:b", 4_000_000, []string{"busybox:1"}, nil)
	nginx := img("sha256:n", 70_000_000, []string{"nginx:1.27", "nginx:latest"}, []string{"nginx@sha256:aa"})
	tieA := img("sha256:a", 4_000_000, []string{"tie:a"}, nil)
	many := img("sha256:m", 1, []string{"m:1", "m:2", "m:3", "m:4"}, []string{"m@sha256:1", "m@sha256:2"})
	tests := []struct {
		name  string
		imgs  []*runtimeapi.Image
		limit int32
		want  []string
	}{
		{name: "largest first, digests then tags", imgs: []*runtimeapi.Image{pause, busybox, nginx}, limit: 50,
			want: []string{"[nginx@sha256:aa nginx:1.27 nginx:latest]=70000000", "[busybox:1]=4000000",
				"[registry.k8s.io/pause@sha256:ee registry.k8s.io/pause:3.10]=300000"}},
		{name: "capped", imgs: []*runtimeapi.Image{pause, busybox, nginx}, limit: 2,
			want: []string{"[nginx@sha256:aa nginx:1.27 nginx:latest]=70000000", "[busybox:1]=4000000"}},
		{name: "-1: no cap", imgs: []*runtimeapi.Image{pause, busybox, nginx}, limit: -1,
			want: []string{"[nginx@sha256:aa nginx:1.27 nginx:latest]=70000000", "[busybox:1]=4000000",
				"[registry.k8s.io/pause@sha256:ee registry.k8s.io/pause:3.10]=300000"}},
		{name: "0: none", imgs: []*runtimeapi.Image{pause, busybox}, limit: 0},
		{name: "equal sizes: by ID, descending", imgs: []*runtimeapi.Image{tieA, busybox}, limit: 50,
			want: []string{"[busybox:1]=4000000", "[tie:a]=4000000"}},
		{name: "at most 5 names", imgs: []*runtimeapi.Image{many}, limit: 50,
			want: []string{"[m@sha256:1 m@sha256:2 m:1 m:2 m:3]=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := names(NodeImages(tt.imgs, tt.limit)); !slices.Equal(got, tt.want) {
				t.Errorf("images\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestStatusReportsImages(t *testing.T) {
	imgs := &fakeImages{imgs: []*runtimeapi.Image{
		img("sha256:p", 300_000, []string{"pause:1"}, nil),
		img("sha256:n", 70_000_000, []string{"nginx:1.27"}, nil),
		img("sha256:b", 4_000_000, []string{"busybox:1"}, nil),
	}}
	h := newHarness(t, func(c *Config) { c.Images, c.MaxImages = imgs, 2 })
	n := h.waitNode("images reported", func(n *v1.Node, _, _, _ int) bool { return len(n.Status.Images) > 0 })
	if got, want := names(n.Status.Images), []string{"[nginx:1.27]=70000000", "[busybox:1]=4000000"}; !slices.Equal(got, want) {
		t.Errorf("status.images %q, want %q", got, want)
	}
	// A new image shows within one update period.
	imgs.set(append(imgs.imgs, img("sha256:x", 900_000_000, []string{"big:1"}, nil)), nil)
	h.clk.Step(10 * time.Second)
	n = h.waitNode("the new image reported", func(n *v1.Node, _, _, _ int) bool {
		return len(n.Status.Images) > 0 && n.Status.Images[0].Names[0] == "big:1"
	})
	if got, want := names(n.Status.Images), []string{"[big:1]=900000000", "[nginx:1.27]=70000000"}; !slices.Equal(got, want) {
		t.Errorf("status.images %q, want %q", got, want)
	}
	// A list that fails reports none, as upstream.
	imgs.set(nil, errors.New("rpc error: code = Unavailable"))
	h.clk.Step(10 * time.Second)
	h.waitNode("no images while the list fails", func(n *v1.Node, _, _, _ int) bool { return len(n.Status.Images) == 0 })
}

func TestRegistersWithTaints(t *testing.T) {
	taints := []v1.Taint{
		{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule},
		{Key: "node.example/maintenance", Effect: v1.TaintEffectNoExecute},
	}
	t.Run("a new Node gets them", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.RegisterWithTaints = taints })
		n := h.waitNode("registered", func(_ *v1.Node, creates, _, _ int) bool { return creates == 1 })
		if !slices.EqualFunc(n.Spec.Taints, taints, func(a, b v1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }) {
			t.Errorf("taints %v, want %v", n.Spec.Taints, taints)
		}
	})
	t.Run("a Node that exists keeps its own", func(t *testing.T) {
		// Registered without taints; an admin sets one; actorlet restarts
		// with --register-with-taints.
		h := newHarness(t)
		h.waitNode("registered", func(_ *v1.Node, creates, patches, _ int) bool { return creates == 1 && patches > 0 })
		h.api.mu.Lock()
		h.api.node.Spec.Taints = []v1.Taint{{Key: "set-by-admin", Effect: v1.TaintEffectPreferNoSchedule}}
		patches := h.api.patches
		h.api.mu.Unlock()
		if err := h.sys.Root.StopFuture(h.pid).Wait(); err != nil {
			t.Fatal(err)
		}
		pleg := h.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if _, ok := c.Message().(*messages.GetHealth); ok {
				c.Respond(&messages.Health{LastRelist: h.clk.Now(), Threshold: 3 * time.Minute})
			}
		}))
		cfg := Config{NodeName: "n1", NodeIP: "192.0.2.7", Hostname: "n1", Labels: map[string]string{"pool": "a"}, MaxPods: 110, RegisterWithTaints: taints}
		pid := h.sys.Root.Spawn(actor.PropsFromProducer(New(cfg, h.api, h.api, fakeMachine{}, pleg, h.clk, quiet)))
		t.Cleanup(func() { h.sys.Root.Stop(pid) })
		n := h.waitNode("reported again", func(_ *v1.Node, _, p, _ int) bool { return p > patches })
		if _, creates, _, _ := h.api.snapshot(); creates != 1 {
			t.Errorf("%d creates, want the Node adopted", creates)
		}
		if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "set-by-admin" {
			t.Errorf("taints %v, want the Node's own", n.Spec.Taints)
		}
	})
	t.Run("none", func(t *testing.T) {
		h := newHarness(t)
		n := h.waitNode("registered", func(_ *v1.Node, creates, _, _ int) bool { return creates == 1 })
		if len(n.Spec.Taints) != 0 {
			t.Errorf("taints %v, want none", n.Spec.Taints)
		}
	})
}
