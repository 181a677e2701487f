package messages

import (
	"k8s.io/apimachinery/pkg/types"
)

// In-place pod resize (actors/node allocates, actors/pod applies).
//
// The NodeActor owns each pod's allocated resources (what it admitted,
// checkpointed): the SyncPod it sends carries the pod with its containers'
// resources as allocated, not as the API asks. When the API asks for other
// resources (a resize) the NodeActor checks them against the node; when
// they fit they become the allocation and the next SyncPod carries them,
// else it tells the PodActor why the resize waits.

// Resize reasons of the PodResizePending condition, as upstream.
const (
	ResizeDeferred   = "Deferred"   // does not fit now beside the other pods; retried
	ResizeInfeasible = "Infeasible" // can never be done on this node
)

// PodResizePending tells a PodActor whether its pod's resize waits: Reason
// (ResizeDeferred, ResizeInfeasible) and Message as upstream's
// PodResizePending condition, for the pod's Generation; Reason empty: no
// resize waits (the condition goes). Sent on every change and with the
// answer to NeedPod.
type PodResizePending struct {
	UID        types.UID
	Generation int64
	Reason     string
	Message    string
}
