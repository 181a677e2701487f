package messages

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodAPIStatus tells the StatusActor the status a pod (not a mirror pod)
// has in the API server, as the API pod source saw it change. Someone else
// may have written it (the node lifecycle controller marks pods not ready
// when the node stops reporting); the StatusActor writes its own again
// where they differ.
type PodAPIStatus struct {
	UID             types.UID
	ResourceVersion string
	Status          *v1.PodStatus
}
