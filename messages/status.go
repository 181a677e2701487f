package messages

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodStatusUpdate carries a pod (metadata and spec) with its newest status,
// from a PodActor (or the NodeActor on admission failure) to the StatusActor.
type PodStatusUpdate struct {
	Pod *v1.Pod // Status is the status to publish
}

// PodForget tells the StatusActor the pod is gone.
type PodForget struct {
	UID types.UID
}

// GetPods asks the StatusActor for every known pod with status. Reply: PodList.
type GetPods struct{}

// PodList answers GetPods.
type PodList struct {
	Items []v1.Pod
}
