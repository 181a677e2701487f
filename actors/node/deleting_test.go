package node

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/messages"
)

// An API pod whose graceful deletion has finished on the node stays in the
// API source until the API server deletes it. A relist that still lists it
// (it started before the PodActor removed everything) must not make it an
// orphan: its second "kill" would forget it and lose the final delete
// (issue: pods stuck Terminating at 500-2,000 deletions).
func TestDeletedAPIPodIsNoOrphanUntilItLeavesTheSource(t *testing.T) {
	h := newHarness(t, Config{NodeName: "n1", Sources: []string{messages.SourceAPI}})
	h.send(set(messages.SourceAPI, mkPod("a", "img:1")))
	h.send(&messages.RuntimePods{UIDs: []types.UID{"a"}})
	deleting := mkPod("a", "img:1")
	now := metav1.Now()
	grace := int64(30)
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, &grace
	h.send(add(messages.SourceAPI, deleting))
	h.quiesce()
	if got := h.msgs("a"); got != "SyncPod img:1,KillPod" {
		t.Fatalf("a received %q, want SyncPod then KillPod", got)
	}
	h.terminated("a")
	h.quiesce()

	// A stale relist still lists the pod.
	h.send(&messages.RuntimePods{UIDs: []types.UID{"a"}})
	h.quiesce()
	if got := h.msgs("a"); got != "SyncPod img:1,KillPod" {
		t.Fatalf("a received %q after a stale relist, want no orphan killer", got)
	}
	if log := h.statusLog(); len(log) == 0 || log[len(log)-1] != "forget a" {
		t.Fatalf("status log %v, want one final forget of a", log)
	}
	forgets := 0
	for _, l := range h.statusLog() {
		if l == "forget a" {
			forgets++
		}
	}
	if forgets != 1 {
		t.Fatalf("a forgotten %d times, want 1: %v", forgets, h.statusLog())
	}

	// Once the API server has deleted it, a relist still listing it (the
	// runtime really holds something) does make it an orphan.
	h.send(remove(messages.SourceAPI, deleting))
	h.send(&messages.RuntimePods{UIDs: []types.UID{"a"}})
	h.quiesce()
	if got := h.msgs("a"); got != "SyncPod img:1,KillPod|KillPod" {
		t.Fatalf("a received %q once deleted from the API, want an orphan killer", got)
	}
}
