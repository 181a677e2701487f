package node

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// blockingStore holds Save until released.
type blockingStore struct {
	memStore
	release chan struct{}
}

func cpuOf(l v1.ResourceList) string {
	q := l[v1.ResourceCPU]
	return q.String()
}

func (s *blockingStore) Save(b []byte) error {
	<-s.release
	return s.memStore.Save(b)
}

// What the saver was handed is what a restarted NodeActor loads, written
// or not; once written it is the file's.
func TestAllocSaverLoadsWhatItWasHanded(t *testing.T) {
	store := &blockingStore{release: make(chan struct{})}
	s := newAllocSaver(store)
	var al allocations
	al.load(s, quiet)
	al.set(cpuPod("a", "1", 1), quiet) // the writer blocks in Save
	al.set(cpuPod("b", "2", 1), quiet) // queued behind it

	var again allocations
	again.load(s, quiet)
	if r := again.get("b"); r == nil || cpuOf(r.Containers["app"].Requests) != "2" {
		t.Fatalf("loaded %+v before the write, want b's allocation", again.pods)
	}
	close(store.release)
	s.flush()
	if got := store.storedCPU(t, "b"); got != "2" {
		t.Fatalf("written %q, want 2", got)
	}
	fresh := newAllocSaver(&store.memStore)
	var third allocations
	third.load(fresh, quiet)
	if len(third.pods) != 2 {
		t.Fatalf("loaded from the file %v", third.pods)
	}
}

// A corrupt or foreign checkpoint is ignored: the pods get what they ask.
func TestAllocationCheckpointCorrupt(t *testing.T) {
	for _, b := range []string{"{", `{"version":1,"checksum":"sha256:00","data":{"pods":[]}}`, `{"version":9,"checksum":"","data":{}}`} {
		var al allocations
		al.load(newAllocSaver(&memStore{b: []byte(b)}), quiet)
		if len(al.pods) != 0 {
			t.Fatalf("%s: loaded %v", b, al.pods)
		}
		p := cpuPod("a", "1", 1)
		if got := al.view(p); got != p {
			t.Fatalf("%s: view changed the pod", b)
		}
	}
}

// apply gives a pod its allocated resources, container by container and
// pod-level, without touching the pod it was given.
func TestAllocRecordApply(t *testing.T) {
	alloc := cpuPod("a", "1", 1)
	rec := recordOf(alloc)
	desired := cpuPod("a", "3", 2)
	desired.Spec.Containers = append(desired.Spec.Containers, v1.Container{Name: "new"})
	got := rec.apply(desired)
	if got == desired || cpuOf(got.Spec.Containers[0].Resources.Requests) != "1" {
		t.Fatalf("applied %v", got.Spec.Containers[0].Resources)
	}
	if cpuOf(desired.Spec.Containers[0].Resources.Requests) != "3" {
		t.Fatal("apply changed the desired pod")
	}
	if got.Generation != 2 || got.UID != types.UID("a") {
		t.Fatalf("apply lost the metadata: %+v", got.ObjectMeta)
	}
	if !rec.matches(alloc) || rec.matches(desired) {
		t.Fatal("matches")
	}
}
