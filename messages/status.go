package messages

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodStatusUpdate carries a pod (metadata and spec) with its newest status,
// from a PodActor (or the NodeActor on admission failure) to the StatusActor.
// Pod is read only: its metadata and spec may be shared with the NodeActor
// and the PodActor (see the package doc).
type PodStatusUpdate struct {
	Pod *v1.Pod // Status is the status to publish
}

// PodForget tells the StatusActor the pod is gone from the node. In cluster
// mode, DeleteFromAPI asks for the final delete of an API pod whose graceful
// deletion is now complete (nothing of it runs); a static pod's mirror pod is
// deleted.
type PodForget struct {
	UID           types.UID
	Namespace     string
	Name          string
	DeleteFromAPI bool
}

// PodsKnown tells the StatusActor every pod the NodeActor knows (desired by
// a source, in the runtime, or with a PodActor), sent by its housekeeping
// once its view is complete: the StatusActor drops the status of any other
// pod (upstream's RemoveOrphanedStatuses). It catches a forget lost with a
// NodeActor that restarted while a PodActor's PodTerminated was queued.
type PodsKnown struct {
	UIDs map[types.UID]bool // the receiver's to keep
}

// MirrorPod tells the StatusActor that the API server holds (or no longer
// holds) a mirror pod, as seen by the API pod source.
type MirrorPod struct {
	Pod     *v1.Pod
	Deleted bool
}

// NodeRegistered tells the StatusActor the Node object's UID (mirror pods
// are owned by the Node).
type NodeRegistered struct {
	Name string
	UID  types.UID
}

// GetPods asks the StatusActor for every known pod with status. Reply: PodList.
type GetPods struct{}

// GetPod asks the StatusActor for one pod, with status, by namespace and
// name. Reply: PodFound (Pod nil when it knows no such pod).
type GetPod struct {
	Namespace, Name string
}

// PodFound answers GetPod. Pod is the StatusActor's copy: read only.
type PodFound struct {
	Pod *v1.Pod
}

// PodList answers GetPods, sorted by namespace and name. The pods are the
// StatusActor's (shared by every reader of the list): read only.
type PodList struct {
	Items []*v1.Pod
}
