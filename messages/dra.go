package messages

import (
	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The ClaimsActor's protocol (Dynamic Resource Allocation on the node,
// upstream's DRA manager): DRA drivers registering, a pod's ResourceClaims
// prepared before its sandbox and containers are created and unprepared
// once it is gone, and the health of their devices.

// ReasonFailedPrepareDynamicResources is ClaimsPrepared's Reason when a
// pod's claims cannot be prepared (upstream's event reason).
const ReasonFailedPrepareDynamicResources = "FailedPrepareDynamicResources"

// PrepareClaims asks the ClaimsActor to prepare every ResourceClaim of a
// pod (spec.resourceClaims, and the claim of its DRA-backed extended
// resources) through their drivers. Reply (to ReplyTo): ClaimsPrepared.
// Asking again for a pod already prepared (a restarted PodActor, a
// restarted actorlet: claims are checkpointed) answers from the record; it
// never prepares twice. The ClaimsActor also sends ClaimsHealth to ReplyTo
// when the health of the pod's devices changes. Pod is read only.
type PrepareClaims struct {
	Pod     *v1.Pod
	ReplyTo *actor.PID
}

// ClaimsPrepared answers PrepareClaims: the CDI device IDs of every
// container (init containers included, by name; none for a container that
// uses no claim), or why the claims could not be prepared (Reason
// ReasonFailedPrepareDynamicResources, Message as upstream's error: the
// pod waits and asks again after back-off).
type ClaimsPrepared struct {
	UID        types.UID
	Containers map[string][]string
	Reason     string
	Message    string
}

// UnprepareClaims tells the ClaimsActor a pod is gone (terminated, its
// containers stopped): its claims are unprepared, each once the last pod
// on the node using it is gone. The ClaimsActor retries a failing driver
// on its own. With ReplyTo (the PodActor, which holds the pod's final
// status until then, as upstream unprepares before the pod's status is
// final) it answers ClaimsUnprepared once done.
type UnprepareClaims struct {
	UID     types.UID
	ReplyTo *actor.PID
}

// ClaimsUnprepared answers UnprepareClaims: the pod's claims are
// unprepared (or left to the other pods using them).
type ClaimsUnprepared struct {
	UID types.UID
}

// DRADriverRegistered tells the ClaimsActor a DRA driver registered on the
// plugin registration directory: its name, its gRPC endpoint (an absolute
// socket path) and the gRPC services it announced (upstream's "supported
// versions", e.g. "v1.DRAPlugin", "v1.DRAResourceHealth"). A registration
// on another endpoint replaces the driver's earlier one.
type DRADriverRegistered struct {
	Driver   string
	Endpoint string
	Services []string
}

// DRADriverDeregistered tells the ClaimsActor a driver's registration
// socket went away.
type DRADriverDeregistered struct {
	Driver   string
	Endpoint string
}

// ClaimsHealth tells a PodActor the health of the devices its containers
// got through claims (upstream's allocatedResourcesStatus, resource names
// "claim:<claim>" or "claim:<claim>/<request>"), by container name. Sent
// when it changes; the PodActor puts it into its container statuses.
type ClaimsHealth struct {
	UID        types.UID
	Containers map[string][]v1.ResourceStatus
}
