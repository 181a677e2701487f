package messages

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// SyncPod gives a PodActor the newest desired pod. Latest wins. Pod is read
// only (shared with the NodeActor: see the package doc); the same pointer
// again is the same pod.
type SyncPod struct {
	Pod *v1.Pod
	// NewSince is set on the first SyncPod of a PodActor the NodeActor
	// spawned for a pod UID it held nothing of: since then no other actor
	// of this process made anything of the pod in the runtime (a PodActor
	// of an earlier incarnation of the NodeActor started before it). A
	// relist that started after NewSince therefore shows everything the
	// runtime holds of the pod, and the PodActor's first read may be its
	// slice of the runtime cache instead of listing the runtime. Zero:
	// the PodActor lists (a restarted or respawned PodActor may follow
	// operations an earlier incarnation started after the last relist).
	NewSince time.Time
}

// KillPod asks a PodActor to terminate its pod (stop containers within the
// grace period, remove sandbox and containers) and then report PodTerminated.
// Pod is nil for orphans found in the runtime with no desired pod.
type KillPod struct {
	UID         types.UID
	GracePeriod *int64
	Reason      string
	// Evicted: the EvictionActor evicted the pod. The PodActor publishes
	// it with a DisruptionTarget condition (reason TerminationByKubelet)
	// while it stops, then Failed with Reason "Evicted" and Message once
	// nothing of it runs, as upstream; the pod is not run again.
	Evicted bool
	Message string
}

// PodTerminated is sent by a PodActor to its parent once nothing of the pod
// is left in the runtime.
type PodTerminated struct {
	UID types.UID
	// Status is the final status the PodActor published for an evicted
	// pod (Failed, Evicted); nil otherwise. Read only.
	Status *v1.PodStatus
}

// NeedPod is sent by a (re)started PodActor to its parent, which answers with
// SyncPod (or KillPod when the pod is no longer desired).
type NeedPod struct {
	UID types.UID
}

// RuntimePods is sent by the PLEG after each relist: the pod UIDs that own
// at least one sandbox or container in the runtime. The NodeActor uses it to
// find orphans once all sources are synced.
type RuntimePods struct {
	UIDs []types.UID
}

// StartSlot is asked by a PodActor before it starts a new pod (its first
// sandbox); the NodeActor answers StartGranted when fewer than its limit of
// pods are starting, in the order asked. Starting many pods at once only
// makes all of them slow; a bounded number at a time makes most fast.
type StartSlot struct {
	UID types.UID
}

// StartGranted lets a PodActor start its pod.
type StartGranted struct{}

// StartDone gives the slot back: the pod's containers started, or it is
// waiting on something (a back-off, an image, an error), or it is killed.
type StartDone struct {
	UID types.UID
}

// NodeObject is the node's own Node object as the API server has it
// (cluster mode: an informer on it, as upstream's node lister), for the
// NodeActor's admission: its labels, taints and allocatable. Sent on every
// change; Deleted when the Node was deleted (admission falls back to the
// configured labels and allocatable until it is registered again). Read
// only.
type NodeObject struct {
	Labels      map[string]string
	Taints      []v1.Taint
	Allocatable v1.ResourceList
	Deleted     bool
}
