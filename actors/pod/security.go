package pod

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/podspec"
)

// ImageInspector tells the user an image runs as (the CRI ImageStatus).
// A Runtime that also satisfies it has runAsNonRoot checked against the
// image's user; without it only an explicit runAsUser is checked.
type ImageInspector interface {
	ImageStatus(ctx context.Context, ref string) (*runtimeapi.Image, error)
}

// verifyNonRoot refuses a container with runAsNonRoot that would run as
// root (podspec.VerifyRunAsNonRoot), asking the runtime for the image's
// user only when the security context names none, as upstream.
func verifyNonRoot(ctx context.Context, imgs ImageInspector, pod *v1.Pod, c *v1.Container, image string) error {
	sc := podspec.EffectiveSecurityContext(pod, c)
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		return nil
	}
	var uid *int64
	var username string
	if sc.RunAsUser == nil {
		if imgs == nil {
			return nil // the image's user cannot be known
		}
		img, err := imgs.ImageStatus(ctx, image)
		if err != nil {
			return fmt.Errorf("image status of %s: %w", image, err)
		}
		uid, username = podspec.ImageUser(img)
	}
	return podspec.VerifyRunAsNonRoot(pod, c, uid, username)
}

// clusterDomain is the cluster domain the pod's hostname is under ("":
// no cluster DNS configured), as sandboxConfig gives it.
func (a *Actor) clusterDomain() string {
	if d := a.d.Config.DNS; d != nil {
		return d.ClusterDomain
	}
	return ""
}
