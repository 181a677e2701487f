package messages

import (
	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EnsureVolumes asks the VolumeActor to set up a pod's volumes. Reply (to
// ReplyTo): VolumesReady. Asking again for a pod already set up answers at
// once (its projected tokens keep being refreshed in the background).
// Refresh (a pod whose labels or annotations changed) rewrites the files of
// a pod already set up now, as upstream's volume manager remounts them;
// ReplyTo may then be nil. Pod is the PodActor's desired pod, read only
// (see the package doc).
type EnsureVolumes struct {
	Pod     *v1.Pod
	ReplyTo *actor.PID
	Refresh bool
}

// VolumesReady answers EnsureVolumes: the host path of every volume by
// name, or why they cannot be set up (Reason "FailedMount").
type VolumesReady struct {
	UID     types.UID
	Paths   map[string]string
	Reason  string
	Message string
}

// TearDownVolumes tells the VolumeActor the pod is gone: stop refreshing and
// remove what was written for it.
type TearDownVolumes struct {
	UID types.UID
}

// CredentialsChanged tells the VolumeActor that what a projected volume
// shows changed on the API server: a PodCertificateRequest of the pod UID
// (set up its volumes again now: an issued certificate reaches the pod
// without waiting for the next retry), or, with TrustBundles, any
// ClusterTrustBundle (every pod with a clusterTrustBundle projection).
type CredentialsChanged struct {
	UID          types.UID
	TrustBundles bool
}
