package node

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/messages"
)

func TestSourceSetWanted(t *testing.T) {
	s := newSourceSet(nil)
	s.of(messages.SourceFile)["a"] = mkPod("a", "img")
	s.replace(messages.SourceAPI, map[types.UID]*v1.Pod{"b": mkPod("b", "img"), "a": mkPod("a", "img:2")})
	if _, ok := s.wants(messages.SourceFile, "b"); ok {
		t.Error("file wants b")
	}
	if p, ok := s.wants(messages.SourceAPI, "a"); !ok || p.Spec.Containers[0].Image != "img:2" {
		t.Errorf("api's a = %v, %v", p, ok)
	}
	if !s.wanted("a") || !s.wanted("b") || s.wanted("c") {
		t.Error("wanted: want a and b, not c")
	}
	set := map[types.UID]bool{}
	s.addUIDs(set)
	if len(set) != 2 || !set["a"] || !set["b"] {
		t.Errorf("addUIDs %v, want a and b", set)
	}
	// of keeps the set it has.
	if len(s.of(messages.SourceAPI)) != 2 {
		t.Error("of replaced a set")
	}
}

// A UID another source also wants is handed over to the first of them by
// name, never back to the source it leaves.
func TestSourceSetOther(t *testing.T) {
	s := newSourceSet(nil)
	s.of(messages.SourceURL)["a"] = mkPod("a", "url")
	s.of(messages.SourceFile)["a"] = mkPod("a", "file")
	s.of(messages.SourceAPI)["a"] = mkPod("a", "api")
	for _, tc := range []struct{ from, want string }{
		{from: messages.SourceAPI, want: messages.SourceFile},
		{from: messages.SourceFile, want: messages.SourceAPI},
	} {
		p, name, ok := s.other("a", tc.from)
		if !ok || name != tc.want || p.Spec.Containers[0].Image != tc.want {
			t.Errorf("from %s: %v %q %v, want %s's", tc.from, p, name, ok, tc.want)
		}
	}
	if _, _, ok := s.other("b", messages.SourceAPI); ok {
		t.Error("b handed over, no source wants it")
	}
	s2 := newSourceSet(nil)
	s2.of(messages.SourceFile)["a"] = mkPod("a", "file")
	if _, _, ok := s2.other("a", messages.SourceFile); ok {
		t.Error("handed over to the source it leaves")
	}
}

func TestSourceSetSyncAndResyncAsks(t *testing.T) {
	s := newSourceSet([]string{messages.SourceFile, messages.SourceAPI})
	if s.allSynced() {
		t.Fatal("synced before any source delivered")
	}
	// A Resync waits for every source; the same one asked again is
	// answered early.
	if answer, early := s.ask(1); answer || early {
		t.Fatalf("ask 1: answer %v early %v, want it waiting", answer, early)
	}
	if answer, _ := s.ask(2); answer {
		t.Fatal("ask 2 answered before the sources synced")
	}
	if answer, early := s.ask(1); !answer || !early {
		t.Fatalf("ask 1 again: answer %v early %v, want early", answer, early)
	}
	if first, answer := s.markSynced(messages.SourceFile); !first || answer != nil {
		t.Fatalf("file synced: first %v answer %v", first, answer)
	}
	if first, _ := s.markSynced(messages.SourceFile); first {
		t.Fatal("file synced twice")
	}
	if first, answer := s.markSynced(messages.SourceAPI); !first || !slices.Equal(answer, []uint64{2}) {
		t.Fatalf("api synced: first %v answer %v, want ask 2 answered", first, answer)
	}
	if !s.allSynced() {
		t.Fatal("not synced after every required source")
	}
	if answer, early := s.ask(3); !answer || early {
		t.Fatalf("ask once synced: answer %v early %v", answer, early)
	}
	if len(s.asks) != 0 {
		t.Fatalf("asks left %v", s.asks)
	}
}

// A source that is not required counts for nothing.
func TestSourceSetOnlyRequiredSourcesCount(t *testing.T) {
	s := newSourceSet([]string{messages.SourceAPI})
	s.markSynced(messages.SourceFile)
	if s.allSynced() {
		t.Fatal("synced without the API source")
	}
	if none := newSourceSet(nil); !none.allSynced() {
		t.Fatal("no required source: not synced")
	}
}

func TestSourceSetCompact(t *testing.T) {
	s := newSourceSet(nil)
	set := s.of(messages.SourceAPI)
	for i := range 1000 {
		uid := types.UID(fmt.Sprint(i))
		set[uid] = mkPod(string(uid), "img")
	}
	s.compact()
	for i := range 990 {
		delete(s.pods[messages.SourceAPI], types.UID(fmt.Sprint(i)))
	}
	before := s.pods[messages.SourceAPI]
	s.compact()
	after := s.pods[messages.SourceAPI]
	if len(after) != 10 || !s.wanted("995") {
		t.Fatalf("compact lost pods: %d left", len(after))
	}
	after["new"] = nil
	if _, shared := before["new"]; shared {
		t.Fatal("compact kept the map that shrank")
	}
}
