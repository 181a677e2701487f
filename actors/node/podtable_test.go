package node

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/messages"
)

func TestPodTableEntries(t *testing.T) {
	tab := newPodTable()
	e := &entry{pod: mkPod("a", "img"), source: messages.SourceAPI}
	tab.add("a", e)
	if got, ok := tab.get("a"); !ok || got != e {
		t.Fatalf("get a = %v, %v", got, ok)
	}
	// An entry replaced since is not dropped for the old one.
	if tab.drop("a", &entry{}) {
		t.Fatal("dropped for another entry")
	}
	if !tab.drop("a", e) {
		t.Fatal("not dropped")
	}
	if _, ok := tab.get("a"); ok || tab.drop("a", e) {
		t.Fatal("still there after the drop")
	}
}

// A refused pod is kept with its source, and forgotten only for that
// source.
func TestPodTableRefused(t *testing.T) {
	tab := newPodTable()
	out := mkPod("a", "img")
	out.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: ReasonOutOfPods}
	tab.refuse(out, messages.SourceFile)
	if !tab.refused("a") || tab.refused("b") {
		t.Fatal("refused: want a only")
	}
	if got := tab.rejected["a"]; got.Annotations[rejectedBy] != messages.SourceFile || got.Status.Reason != ReasonOutOfPods {
		t.Fatalf("kept %+v", got)
	}
	if tab.unrefuse("a", messages.SourceAPI) || !tab.refused("a") {
		t.Fatal("another source forgot it")
	}
	if !tab.unrefuse("a", messages.SourceFile) || tab.refused("a") {
		t.Fatal("its source did not forget it")
	}
	if tab.unrefuse("a", messages.SourceFile) {
		t.Fatal("forgotten twice")
	}
}

func TestPodTableFinished(t *testing.T) {
	tab := newPodTable()
	tab.finish(&messages.PodForget{UID: "a", DeleteFromAPI: true})
	if !tab.isFinished("a") || tab.isFinished("b") {
		t.Fatal("finished: want a only")
	}
}

// The pods whose status a restarted StatusActor gets again: admitted and
// refused ones, not those killed, stopping or orphaned.
func TestPodTableResyncUIDs(t *testing.T) {
	tab := newPodTable()
	tab.add("run", &entry{pod: mkPod("run", "img")})
	tab.add("kill", &entry{pod: mkPod("kill", "img"), killing: &messages.KillPod{UID: "kill"}})
	tab.add("stop", &entry{pod: mkPod("stop", "img"), stopping: true})
	tab.add("orphan", &entry{killing: &messages.KillPod{UID: "orphan"}})
	tab.refuse(mkPod("refused", "img"), messages.SourceAPI)
	got := tab.resyncUIDs()
	slices.Sort(got)
	if want := []types.UID{"refused", "run"}; !slices.Equal(got, want) {
		t.Fatalf("resync UIDs %v, want %v", got, want)
	}
}

func TestPodTableUIDs(t *testing.T) {
	tab := newPodTable()
	if tab.haveRuntime {
		t.Fatal("runtime listed before RuntimePods")
	}
	tab.add("a", &entry{})
	tab.setRuntime([]types.UID{"b", "a"})
	if !tab.haveRuntime {
		t.Fatal("runtime not listed after RuntimePods")
	}
	withRuntime, without := map[types.UID]bool{}, map[types.UID]bool{}
	tab.addUIDs(withRuntime, true)
	tab.addUIDs(without, false)
	if len(withRuntime) != 2 || !withRuntime["a"] || !withRuntime["b"] {
		t.Errorf("with the runtime %v, want a and b", withRuntime)
	}
	if len(without) != 1 || !without["a"] {
		t.Errorf("without the runtime %v, want a", without)
	}
}

func TestPodTableCompact(t *testing.T) {
	tab := newPodTable()
	for i := range 1000 {
		uid := types.UID(fmt.Sprint(i))
		tab.add(uid, &entry{})
		tab.refuse(mkPod(string(uid), "img"), messages.SourceAPI)
		tab.finish(&messages.PodForget{UID: uid})
	}
	tab.compact()
	for i := range 990 {
		uid := types.UID(fmt.Sprint(i))
		tab.drop(uid, tab.entries[uid])
		tab.unrefuse(uid, messages.SourceAPI)
		delete(tab.finished, uid)
	}
	entries, rejected, finished := tab.entries, tab.rejected, tab.finished
	tab.compact()
	if len(tab.entries) != 10 || len(tab.rejected) != 10 || len(tab.finished) != 10 {
		t.Fatalf("compact lost pods: %d %d %d left", len(tab.entries), len(tab.rejected), len(tab.finished))
	}
	if _, ok := tab.get("995"); !ok || !tab.refused("995") || !tab.isFinished("995") {
		t.Fatal("compact lost pod 995")
	}
	tab.add("new", &entry{})
	tab.refuse(mkPod("new", "img"), messages.SourceAPI)
	tab.finish(&messages.PodForget{UID: "new"})
	_, e := entries["new"]
	_, r := rejected["new"]
	_, f := finished["new"]
	if e || r || f {
		t.Fatalf("compact kept a map that shrank (entries %v, rejected %v, finished %v)", e, r, f)
	}
}

func TestEntryAdmitted(t *testing.T) {
	var none *entry
	for _, tc := range []struct {
		name string
		e    *entry
		want bool
	}{
		{name: "nil", e: none},
		{name: "orphan", e: &entry{killing: &messages.KillPod{}}},
		{name: "killing", e: &entry{pod: mkPod("a", "img"), killing: &messages.KillPod{}}},
		{name: "running", e: &entry{pod: mkPod("a", "img")}, want: true},
		{name: "stopping, killed", e: &entry{pod: mkPod("a", "img"), stopping: true, killing: &messages.KillPod{}}},
	} {
		if got := tc.e.admitted(); got != tc.want {
			t.Errorf("%s: admitted %v, want %v", tc.name, got, tc.want)
		}
	}
}
