package pleg

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/internal/fakecri"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// leanRuntime is fakecri's runtime with the lean listing, as the CRI
// client has it: each lean call is a full call (counted, blocked and
// failed as fakecri's) of which it reports what the client's decoder
// reads off the wire.
type leanRuntime struct {
	*fakecri.Runtime
	mu    sync.Mutex
	calls map[string]int
	// cut, when set, fails the lean calls after they reported every
	// object, as a response that breaks off after its objects.
	cut error
}

var _ LeanLister = (*leanRuntime)(nil)

func newLeanRuntime() *leanRuntime {
	return &leanRuntime{Runtime: fakecri.New(nil), calls: map[string]int{}}
}

func (r *leanRuntime) called(method string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[method]++
	return r.cut
}

func (r *leanRuntime) leanCalls(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[method]
}

func (r *leanRuntime) setCut(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = err
}

func (r *leanRuntime) ListPodSandboxLean(ctx context.Context, fn func(id, podUID, metadataUID string, state int32)) error {
	cut := r.called("ListPodSandboxLean")
	items, err := r.ListPodSandbox(ctx, nil)
	if err != nil {
		return err
	}
	for _, s := range items {
		fn(s.GetId(), s.GetLabels()[podspec.LabelPodUID], s.GetMetadata().GetUid(), int32(s.GetState()))
	}
	return cut
}

func (r *leanRuntime) ListContainersLean(ctx context.Context, fn func(id, sandboxID, podUID string, state int32)) error {
	cut := r.called("ListContainersLean")
	items, err := r.ListContainers(ctx, nil)
	if err != nil {
		return err
	}
	for _, c := range items {
		fn(c.GetId(), c.GetPodSandboxId(), c.GetLabels()[podspec.LabelPodUID], int32(c.GetState()))
	}
	return cut
}

// oddities is a runtime with every case the PLEG tells apart: foreign
// objects, sandboxes named by their metadata only, a label and a metadata
// that disagree, states out of the enums.
func oddities() view {
	disagree := sandbox("s3", "u3", ready)
	disagree.Metadata = &runtimeapi.PodSandboxMetadata{Uid: "other"}
	emptyLabel := sandboxByMetadata("s4", "u4", notDone)
	emptyLabel.Labels = map[string]string{podspec.LabelPodUID: ""}
	c1, c2, c3 := container("c1", "u1", running), container("c2", "u2", exited), container("c3", "u3", runtimeapi.ContainerState(42))
	c1.PodSandboxId, c2.PodSandboxId, c3.PodSandboxId = "s1", "s2", "s-none"
	return view{
		sandboxes: []*runtimeapi.PodSandbox{sandbox("s1", "u1", ready), sandboxByMetadata("s2", "u2", ready), disagree, emptyLabel,
			sandbox("s-x", "", ready), sandboxByMetadata("s-y", "", notDone), sandbox("s5", "u5", runtimeapi.PodSandboxState(-1))},
		containers: []*runtimeapi.Container{c1, c2, c3, container("c-x", "", running), container("c4", "u4", created), container("c5", "u5", unknown)},
	}
}

// The lean listing gives the PLEG the relist the full listing gives, and
// the PLEG takes it where its Lister has it.
func TestLeanRelistIsTheFullOne(t *testing.T) {
	ctx := context.Background()
	for name, v := range map[string]view{"oddities": oddities(), "view1": view1, "view2": view2, "empty": {}} {
		t.Run(name, func(t *testing.T) {
			full, lean := fakecri.New(nil), newLeanRuntime()
			full.Replace(v.sandboxes, v.containers)
			lean.Replace(v.sandboxes, v.containers)
			want, got := &relisted{}, &relisted{}
			if err := want.list(ctx, full); err != nil {
				t.Fatal(err)
			}
			if err := got.listLean(ctx, lean); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.sandboxes, want.sandboxes) || !slices.Equal(got.containers, want.containers) {
				t.Errorf("lean relist %+v\nfull relist %+v", got, want)
			}
		})
	}
	t.Run("the PLEG takes the lean listing where there is one", func(t *testing.T) {
		clk, node := clocktesting.NewFakeClock(t0), actor.NewPID("local", "node")
		if a := New(node, newLeanRuntime(), clk, Config{}, nil, quiet)().(*Actor); a.lean == nil {
			t.Error("a Lister with the lean listing: the PLEG does not use it")
		}
		if a := New(node, fakecri.New(nil), clk, Config{}, nil, quiet)().(*Actor); a.lean != nil {
			t.Error("a Lister without the lean listing: the PLEG has one")
		}
	})
}

// randomView is a runtime of up to five pods, with their objects in random
// states and labelled in every way the PLEG tells apart; an object keeps
// its ID from view to view, so that states change.
func randomView(rng *rand.Rand) view {
	var v view
	sbStates := []runtimeapi.PodSandboxState{ready, notDone}
	ctrStates := []runtimeapi.ContainerState{running, exited, created, unknown}
	for p := 1; p <= 5; p++ {
		if rng.IntN(4) == 0 {
			continue
		}
		uid := fmt.Sprintf("u%d", p)
		for k := range 1 + rng.IntN(2) {
			id, state := fmt.Sprintf("s%d-%d", p, k), sbStates[rng.IntN(2)]
			var s *runtimeapi.PodSandbox
			switch rng.IntN(5) {
			case 0:
				s = sandboxByMetadata(id, uid, state)
			case 1:
				s = sandbox(id, uid, state)
				s.Metadata = &runtimeapi.PodSandboxMetadata{Uid: "m" + uid}
			case 2:
				s = sandbox(id, "", state) // foreign
			default:
				s = sandbox(id, uid, state)
				s.Metadata = &runtimeapi.PodSandboxMetadata{Uid: uid}
			}
			v.sandboxes = append(v.sandboxes, s)
		}
		for k := range rng.IntN(4) {
			label := uid
			if rng.IntN(8) == 0 {
				label = ""
			}
			c := container(fmt.Sprintf("c%d-%d", p, k), label, ctrStates[rng.IntN(4)])
			c.PodSandboxId = fmt.Sprintf("s%d-%d", p, rng.IntN(3)) // sometimes none listed
			v.containers = append(v.containers, c)
		}
	}
	return v
}

// described renders events with their pods' slices, states and sandboxes
// included, sorted.
func described(events []messages.PodLifecycleEvent) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		out = append(out, ev(string(e.UID), e.Type, e.ID)+" | "+sliceDetail(e.Pod))
	}
	sort.Strings(out)
	return out
}

func sliceDetail(p *messages.RuntimePod) string {
	if p == nil {
		return "no slice"
	}
	var parts []string
	for _, s := range p.Sandboxes {
		parts = append(parts, s.ID+"="+s.State.String())
	}
	for _, c := range p.Containers {
		parts = append(parts, c.ID+"@"+c.SandboxID+"="+c.State.String())
	}
	return fmt.Sprintf("%s %s", p.UID, strings.Join(parts, " "))
}

// Two PLEGs, one on the full listing and one on the lean one, relist the
// same runtime through random changes and failures: they send the same
// events with the same slices, the same RuntimePods, the same answers and
// the same metrics.
func TestPLEGLeanAndFullAgree(t *testing.T) {
	full, lean := fakecri.New(nil), newLeanRuntime()
	hFull, hLean := newHarness(t, full), newHarnessOn(t, lean.Runtime, lean)
	hFull.settle()
	hLean.settle()
	rng := rand.New(rand.NewPCG(7, 11))
	boom := errors.New("runtime down")
	for step := range 60 {
		v := randomView(rng)
		full.Replace(v.sandboxes, v.containers)
		lean.Replace(v.sandboxes, v.containers)
		failing := ""
		if rng.IntN(6) == 0 {
			failing = []string{"ListPodSandbox", "ListContainers"}[rng.IntN(2)]
			full.InjectAlways(failing, boom)
			lean.InjectAlways(failing, boom)
		}
		hFull.next()
		hLean.next()
		if failing != "" {
			full.InjectAlways(failing, nil)
			lean.InjectAlways(failing, nil)
		}
		got, want := described(hLean.node.takeRaw()), described(hFull.node.takeRaw())
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: events\nlean %v\nfull %v", step, got, want)
		}
		if got, want := hLean.node.runtimePods(), hFull.node.runtimePods(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("step %d: RuntimePods\nlean %v\nfull %v", step, got, want)
		}
		lp, lc, lr, _ := hLean.m.snapshot()
		fp, fc, fr, _ := hFull.m.snapshot()
		if lp != fp || fmt.Sprint(lc) != fmt.Sprint(fc) || lr != fr {
			t.Fatalf("step %d: metrics lean %d %v %d, full %d %v %d", step, lp, lc, lr, fp, fc, fr)
		}
		if got, want := hLean.health().RuntimeErr, hFull.health().RuntimeErr; got != want {
			t.Fatalf("step %d: runtime error lean %q, full %q", step, got, want)
		}
		for p := 0; p <= 5; p++ {
			uid := types.UID(fmt.Sprintf("u%d", p))
			hFull.ask(uid, t0)
			hLean.ask(uid, t0)
		}
		replies := func(h *harness) []string {
			var out []string
			for _, rs := range h.node.takeReplies() {
				for _, r := range rs {
					out = append(out, sliceDetail(r)+" @"+r.Relisted.String())
				}
			}
			sort.Strings(out)
			return out
		}
		if got, want := replies(hLean), replies(hFull); !slices.Equal(got, want) {
			t.Fatalf("step %d: GetRuntimePod answers\nlean %v\nfull %v", step, got, want)
		}
	}
	// Every relist of the lean PLEG went through the lean listing.
	if n, m := lean.leanCalls("ListPodSandboxLean"), lean.Count("ListPodSandbox"); n != m || n < 60 {
		t.Errorf("lean sandbox listings %d of %d", n, m)
	}
	if n, m := lean.leanCalls("ListContainersLean"), lean.Count("ListContainers"); n != m || n == 0 {
		t.Errorf("lean container listings %d of %d", n, m)
	}
}

// A lean listing that fails after it reported objects is no relist: the
// PLEG drops what it was given, reports nothing, and its next good relist
// is diffed against the last good one.
func TestPLEGLeanDropsAFailedListing(t *testing.T) {
	boom := errors.New("response cut short")
	for _, first := range []bool{false, true} {
		t.Run(fmt.Sprintf("the first relist fails: %v", first), func(t *testing.T) {
			rt := newLeanRuntime()
			rt.Replace(view1.sandboxes, view1.containers)
			if first {
				rt.setCut(boom)
			}
			h := newHarnessOn(t, rt.Runtime, rt)
			h.settle()
			if first {
				if got := h.node.takeEvents(); len(got) != 0 {
					t.Fatalf("a failed first relist sent events %v", got)
				}
				if got := h.node.runtimePods(); len(got) != 0 {
					t.Fatalf("a failed first relist sent RuntimePods %v", got)
				}
				rt.setCut(nil)
				h.next()
			}
			h.node.takeEvents()

			rt.Replace(view2.sandboxes, view2.containers)
			rt.setCut(boom)
			h.next()
			if got := h.node.takeEvents(); len(got) != 0 {
				t.Errorf("a failed relist sent events %v", got)
			}
			if hl := h.health(); hl.RuntimeErr != boom.Error() {
				t.Errorf("RuntimeErr = %q, want %q", hl.RuntimeErr, boom.Error())
			}
			rt.setCut(nil)
			h.next()
			want := []string{ev("u2", messages.ContainerRemoved, "c2"), ev("u2", messages.SandboxChanged, "s2"), ev("u1", messages.ContainerChanged, "c3")}
			if got := h.node.takeEvents(); !equal(got, want) {
				t.Errorf("events after recovery = %v, want %v", got, want)
			}
		})
	}
}
