package messages

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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
	// Pod is the pod's slice of the relist that saw the change (shared by
	// the pod's events of one relist; read only). Nil when unknown.
	Pod *RuntimePod
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

// RuntimePod is one pod's slice of a relist: its sandboxes and containers
// as the runtime listed them, each by ID and state only (what a PodActor
// compares with its view and asks statuses for). The PLEG keeps the newest
// relist as the runtime cache; PodActors read their slice from it instead
// of listing the runtime themselves. Read only: the lists are shared.
type RuntimePod struct {
	UID        types.UID
	Sandboxes  []RuntimeSandbox
	Containers []RuntimeContainer
	// Relisted is when the relist that saw them started (the injected
	// clock): it shows everything that changed before then.
	Relisted time.Time
}

// RuntimeSandbox is a sandbox as a relist listed it.
type RuntimeSandbox struct {
	ID    string
	State runtimeapi.PodSandboxState
}

// RuntimeContainer is a container as a relist listed it.
type RuntimeContainer struct {
	ID        string
	SandboxID string
	State     runtimeapi.ContainerState
}

// GetRuntimePod asks the PLEG for a pod's slice of the runtime cache, from
// a relist that started after NotBefore: at once when the newest relist
// qualifies, else once one does (as the upstream kubelet's pod cache
// GetNewerThan). Reply (to ReplyTo): RuntimePod.
type GetRuntimePod struct {
	UID       types.UID
	NotBefore time.Time
	ReplyTo   *actor.PID
}
