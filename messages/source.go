package messages

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Pod source names, as in the upstream kubelet's config.source annotation.
const (
	SourceFile = "file"
	SourceURL  = "http" // upstream names the manifest-URL source "http"
	SourcePush = "push" // the node API's POST /pods endpoint
	SourceAPI  = "api"
)

// PodOp says how a PodUpdate changes a source's set of pods.
type PodOp int

const (
	// OpSet replaces the source's whole set (file and URL sources).
	OpSet PodOp = iota
	// OpAdd adds or replaces the given pods (keyed by UID).
	OpAdd
	// OpRemove removes the given pods (by UID).
	OpRemove
)

func (o PodOp) String() string {
	switch o {
	case OpSet:
		return "SET"
	case OpAdd:
		return "ADD"
	case OpRemove:
		return "REMOVE"
	}
	return "UNKNOWN"
}

// PodUpdate is what a source sends to the NodeActor. The first OpSet (or, for
// incremental sources, a SourceSynced) from a source marks it as synced.
// The pods are read only once sent: the NodeActor keeps them and shares
// them with the PodActors (see the package doc).
type PodUpdate struct {
	Source string
	Op     PodOp
	Pods   []*v1.Pod
}

// SourceSynced tells the NodeActor that an incremental source has delivered
// its initial state.
type SourceSynced struct {
	Source string
}

// PushPod is sent by the node API to the push source: add a pod (POST), or
// add or replace it (PUT, Replace). Reply: PushResult.
type PushPod struct {
	Pod *v1.Pod
	// Replace lets the pod take the place of another pushed pod of the
	// same namespace/name whose spec differs. Without it, that is a
	// Conflict and nothing changes (the API server's 409 to a create).
	Replace bool
}

// RemovePushedPod is sent by the node API to the push source. Reply: PushResult.
type RemovePushedPod struct {
	Namespace string
	Name      string
}

// PushResult answers PushPod and RemovePushedPod.
type PushResult struct {
	UID      types.UID
	Name     string
	NotFound bool
	Err      string
	// Existed: a pushed pod of this namespace/name was there before.
	Existed bool
	// Unchanged: it was the same pod (same UID, spec, labels and
	// annotations); nothing was sent to the node, nothing restarts.
	Unchanged bool
	// Conflict: it was another pod (UID is the one kept) and Replace was
	// not asked; nothing changed.
	Conflict bool
}

// Resync asks the receiver to send its current state again: a source
// re-sends its pods (OpSet) to the NodeActor; the NodeActor, asked by a
// restarted StatusActor, has every PodActor republish its status; a
// PodActor republishes its status. Used when a restarted actor has lost
// what it was told. The NodeActor answers a StatusActor's Resync with
// ResyncPods, echoing Ask.
type Resync struct {
	Ask uint64
}
