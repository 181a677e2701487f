package node

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestStartSlotsBound(t *testing.T) {
	s := newStartSlots(2)
	if !s.ask("a") || !s.ask("b") {
		t.Fatal("a and b not granted under the bound")
	}
	if !s.ask("a") {
		t.Fatal("a asked again while holding its slot: not granted")
	}
	if s.ask("c") || s.ask("d") || s.ask("c") {
		t.Fatal("granted over the bound")
	}
	if !slices.Equal(s.waiting, []types.UID{"c", "d"}) {
		t.Fatalf("waiting %v, want c then d, once each", s.waiting)
	}
	all := func(types.UID) bool { return true }
	if got := s.release("a", all); !slices.Equal(got, []types.UID{"c"}) {
		t.Fatalf("release a granted %v, want c", got)
	}
	// A pod waiting that may not start any more (killed) leaves the queue.
	if got := s.release("b", func(uid types.UID) bool { return uid != "d" }); len(got) != 0 {
		t.Fatalf("release b granted %v, want none (d killed)", got)
	}
	if len(s.waiting) != 0 || len(s.starting) != 1 || !s.starting["c"] {
		t.Fatalf("after the releases: starting %v, waiting %v", s.starting, s.waiting)
	}
}

// A pod released while waiting leaves the queue and takes no slot.
func TestStartSlotsReleaseWhileWaiting(t *testing.T) {
	s := newStartSlots(1)
	s.ask("a")
	s.ask("b")
	s.ask("c")
	if got := s.release("b", func(types.UID) bool { return true }); len(got) != 0 {
		t.Fatalf("releasing a waiting pod granted %v", got)
	}
	if !slices.Equal(s.waiting, []types.UID{"c"}) {
		t.Fatalf("waiting %v, want c", s.waiting)
	}
}

func TestStartSlotsUnbounded(t *testing.T) {
	s := newStartSlots(0)
	for _, uid := range []types.UID{"a", "b", "c"} {
		if !s.ask(uid) {
			t.Fatalf("%s not granted without a bound", uid)
		}
	}
	if got := s.release("a", func(types.UID) bool { return true }); len(got) != 0 || len(s.waiting) != 0 {
		t.Fatalf("granted %v, waiting %v", got, s.waiting)
	}
}
