package messages

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// PodLifecycleEventType names what changed in the runtime.
type PodLifecycleEventType string

const (
	ContainerStarted PodLifecycleEventType = "ContainerStarted"
	ContainerDied    PodLifecycleEventType = "ContainerDied"
	ContainerRemoved PodLifecycleEventType = "ContainerRemoved"
	ContainerChanged PodLifecycleEventType = "ContainerChanged"
	SandboxChanged   PodLifecycleEventType = "SandboxChanged"
)

// PodLifecycleEvent is one change seen by a relist, for one pod.
type PodLifecycleEvent struct {
	UID  types.UID
	Type PodLifecycleEventType
	// ID is the container or sandbox ID.
	ID string
}

// PodEvents is a relist's batch of events, sent by the PLEG to the NodeActor,
// which routes each event to the owning PodActor.
type PodEvents struct {
	Events []PodLifecycleEvent
}

// GetHealth asks the PLEG for the runtime's health. Reply: Health.
type GetHealth struct{}

// Health answers GetHealth.
type Health struct {
	RuntimeErr string    // last relist error, empty when fine
	LastRelist time.Time // last successful relist
	Threshold  time.Duration
}
