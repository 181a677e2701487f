package pod

import (
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// HostFiles makes the files a container mounts from the host. A path of ""
// means no such file is kept on this node (nothing is mounted).
type HostFiles interface {
	// Hosts writes the pod's managed /etc/hosts and returns its path.
	Hosts(uid types.UID, content []byte) (string, error)
	// TerminationLog creates the empty file mounted at the container's
	// terminationMessagePath and returns its path.
	TerminationLog(uid types.UID, container string, attempt uint32) (string, error)
	// SubPath returns the host path of sub inside the volume directory
	// volumeDir, made (as a directory with the volume's mode) when missing;
	// an error when it would leave the volume.
	SubPath(volumeDir, sub string) (string, error)
}

// TerminationReader reads an exited container's termination message.
type TerminationReader interface {
	TerminationMessage(c *runtimeapi.ContainerStatus) string
}

// Checkpoints keeps the pod's probe results across restarts of the
// PodActor and of actorlet. Save and Remove return at once (the writing
// happens off the caller); Load does I/O and is called off the mailbox.
type Checkpoints interface {
	LoadCheckpoint(uid types.UID) ([]byte, error)
	SaveCheckpoint(uid types.UID, b []byte)
	RemoveCheckpoint(uid types.UID)
}

// Files is everything the PodActor keeps on the host (adapters/podfiles).
type Files interface {
	HostFiles
	TerminationReader
	Checkpoints
}
