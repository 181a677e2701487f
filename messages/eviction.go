package messages

import (
	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/apimachinery/pkg/types"
)

// The EvictionActor's protocol (issue 12): pods it evicts, the node's
// pressure conditions, and what it asks of the ImageActor and the
// container garbage collector to reclaim disk before it evicts.

// Eviction reasons, as upstream.
const (
	ReasonEvicted = "Evicted"
)

// EvictPod asks the NodeActor to evict a pod: kill it with GracePeriod
// (nil: the pod's own; the EvictionActor caps it with
// --eviction-max-pod-grace-period for soft thresholds, 0 for hard ones, as
// upstream) and publish it Failed with Reason "Evicted" and Message
// (upstream's "The node was low on resource: memory. Threshold quantity:
// ..., available: .... Container x was using ..., request is ..., has
// larger consumption of memory."), with a Warning event "Evicted" of the
// same message. Signal is the eviction signal ("memory.available").
type EvictPod struct {
	UID         types.UID
	GracePeriod *int64
	Message     string
	Signal      string
}

// NodePressure is the EvictionActor's view of the node's pressure
// conditions (MemoryPressure, DiskPressure, PIDPressure), already held
// for --eviction-pressure-transition-period: sent to its subscribers (the
// NodeActor for admission, the NodeStatusActor for the Node's conditions)
// when it changes, and as the reply to GetNodePressure.
type NodePressure struct {
	Memory, Disk, PID bool
	// Signals are the signals past a threshold now (for messages).
	Signals []string
}

// GetNodePressure asks the EvictionActor for its NodePressure (a
// subscriber that restarted). Reply to ReplyTo, or to the sender.
type GetNodePressure struct {
	ReplyTo *actor.PID
}

// ReclaimImages asks the ImageActor to delete unused images (least
// recently used first, never one in use or pinned) until Bytes are freed
// or none is left to delete. Reply: ImagesReclaimed.
type ReclaimImages struct {
	Bytes   int64
	ReplyTo *actor.PID
}

// ImagesReclaimed answers ReclaimImages.
type ImagesReclaimed struct {
	Freed   int64
	Removed int
	Err     string
}

// ReclaimContainers asks the container garbage collector for a collection
// now (dead containers and sandboxes of pods gone, and dead containers
// beyond the per-container limit). Reply: ContainersReclaimed.
type ReclaimContainers struct {
	ReplyTo *actor.PID
}

// ContainersReclaimed answers ReclaimContainers.
type ContainersReclaimed struct {
	Containers, Sandboxes int
	Err                   string
}

// EvaluateEviction asks the EvictionActor for a housekeeping pass now
// (tests, the simulated runtime's commands, a benchmark) instead of at the
// next period. ReplyTo (or else the sender, when there is one) is sent
// EvictionEvaluated once that pass (or, when one is in flight, the next)
// has ended.
type EvaluateEviction struct {
	ReplyTo *actor.PID
}

// EvictionEvaluated answers EvaluateEviction: the node's pressure after the
// pass, the pod it evicted (empty when none) and the signal it evicted
// for; Err says why the pass could not observe the node.
type EvictionEvaluated struct {
	Pressure NodePressure
	Evicted  types.UID
	Signal   string
	Err      string
}
