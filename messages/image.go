package messages

import (
	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
)

// Image pull reasons, as upstream.
const (
	ReasonErrImagePull      = "ErrImagePull"
	ReasonImagePullBackOff  = "ImagePullBackOff"
	ReasonErrImageNeverPull = "ErrImageNeverPull"
	ReasonInvalidImageName  = "InvalidImageName"
)

// EnsureImage asks the ImageActor to make an image present according to the
// pull policy. Reply (to ReplyTo): ImageResult with the same RequestID.
type EnsureImage struct {
	RequestID uint64
	Image     string
	Policy    v1.PullPolicy
	ReplyTo   *actor.PID
}

// ImageResult answers EnsureImage. On success ImageRef is the runtime's
// image reference; on failure Reason is one of the reasons above.
type ImageResult struct {
	RequestID uint64
	Image     string
	ImageRef  string
	Pulled    bool // a pull happened (vs already present)
	Reason    string
	Message   string
}
