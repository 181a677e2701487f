package node

import (
	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// rejectedBy notes, on a rejected pod kept for republishing, its source.
const rejectedBy = "actorlet.io/rejected-from-source"

// entry is what the NodeActor knows of one pod UID that has a PodActor.
type entry struct {
	pod     *v1.Pod // desired; nil for an orphan
	source  string
	pid     *actor.PID
	killing *messages.KillPod
	// stopping: the pod is terminated and its actor is stopping; the entry
	// stays until the name pod-<uid> is free again.
	stopping bool
	// respawn: the pod was desired again (by respawnSource) while being
	// killed; it runs again once the old actor is gone.
	respawn       *v1.Pod
	respawnSource string
	// deleting: the API server asked for a graceful deletion; once nothing
	// runs, the pod is deleted from the API for good.
	deleting bool
	// w: the PodActor stopped by its supervisor and its respawn.
	w worker
}

// admitted: the entry's pod counts in admission (a desired pod not being
// killed).
func (e *entry) admitted() bool { return e != nil && e.pod != nil && e.killing == nil }

// podTable is the pod-table part of the NodeActor: every pod UID it knows
// besides the sources' sets. The entries (one per PodActor: running,
// killing or stopping), the pods refused at admission or kept after an
// eviction (with their Failed status, republished on Resync), the API pods
// whose graceful deletion ended here, and the runtime's pods as the PLEG
// last listed them.
type podTable struct {
	entries  map[types.UID]*entry
	rejected map[types.UID]*v1.Pod
	// finished: API pods whose graceful deletion ended here (nothing runs,
	// the StatusActor holds the final delete), until the API source drops
	// them. A later update of one (the echo of its last status patch) is
	// not a new deletion, and a restarted StatusActor gets the final
	// delete again on its Resync.
	finished map[types.UID]*messages.PodForget
	runtime  []types.UID // last RuntimePods
	// haveRuntime: a RuntimePods arrived (this incarnation).
	haveRuntime bool

	// The peaks of the maps by pod, for compact.
	entriesShrink, rejectedShrink, finishedShrink actorkit.Shrinker
}

func newPodTable() podTable {
	return podTable{
		entries:  map[types.UID]*entry{},
		rejected: map[types.UID]*v1.Pod{},
		finished: map[types.UID]*messages.PodForget{},
	}
}

// get is uid's entry.
func (t *podTable) get(uid types.UID) (*entry, bool) {
	e, ok := t.entries[uid]
	return e, ok
}

// add makes e uid's entry.
func (t *podTable) add(uid types.UID, e *entry) { t.entries[uid] = e }

// drop removes uid's entry if it is still e; false when it is not.
func (t *podTable) drop(uid types.UID, e *entry) bool {
	if cur, ok := t.entries[uid]; !ok || cur != e {
		return false
	}
	delete(t.entries, uid)
	return true
}

// refuse keeps out (a copy of the pod with its Failed status, the
// table's from now on) as refused by source: never run while a source
// wants it, republished on Resync.
func (t *podTable) refuse(out *v1.Pod, source string) {
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[rejectedBy] = source
	t.rejected[out.UID] = out
}

// refused reports whether uid is kept as refused.
func (t *podTable) refused(uid types.UID) bool {
	_, ok := t.rejected[uid]
	return ok
}

// unrefuse forgets uid as refused if source refused it; false otherwise.
func (t *podTable) unrefuse(uid types.UID, source string) bool {
	if rp, ok := t.rejected[uid]; !ok || rp.Annotations[rejectedBy] != source {
		return false
	}
	delete(t.rejected, uid)
	return true
}

// finish keeps an API pod whose graceful deletion ended here.
func (t *podTable) finish(f *messages.PodForget) { t.finished[f.UID] = f }

// isFinished reports whether uid's graceful deletion ended here.
func (t *podTable) isFinished(uid types.UID) bool {
	_, ok := t.finished[uid]
	return ok
}

// setRuntime records the runtime's pods (RuntimePods).
func (t *podTable) setRuntime(uids []types.UID) { t.runtime, t.haveRuntime = uids, true }

// resyncUIDs are the pods whose status a restarted StatusActor gets again:
// the admitted ones (not killing, not stopping) and the refused ones.
func (t *podTable) resyncUIDs() []types.UID {
	uids := make([]types.UID, 0, len(t.entries)+len(t.rejected))
	for uid, e := range t.entries {
		if e.pod != nil && e.killing == nil && !e.stopping {
			uids = append(uids, uid)
		}
	}
	for uid := range t.rejected {
		uids = append(uids, uid)
	}
	return uids
}

// addUIDs adds to set every UID with an entry and, with runtime, every one
// the runtime listed.
func (t *podTable) addUIDs(set map[types.UID]bool, runtime bool) {
	if runtime {
		for _, uid := range t.runtime {
			set[uid] = true
		}
	}
	for uid := range t.entries {
		set[uid] = true
	}
}

// compact rebuilds the maps by pod that shrank to a quarter of their peak
// (Go keeps a map's memory after its keys are deleted: ~440 KiB per map
// of 10,000 UIDs, see actorkit.Shrink).
func (t *podTable) compact() {
	t.entries = actorkit.Shrink(&t.entriesShrink, t.entries)
	t.rejected = actorkit.Shrink(&t.rejectedShrink, t.rejected)
	t.finished = actorkit.Shrink(&t.finishedShrink, t.finished)
}
