package nodestatus

import (
	"context"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/internal/actorkit"
)

// ImageLister lists the runtime's images (the CRI client satisfies it).
type ImageLister interface {
	ListImages(ctx context.Context) ([]*runtimeapi.Image, error)
}

// maxNamesPerImage caps the names of one image in status.images, as
// upstream (MaxNamesPerImageInNodeStatus).
const maxNamesPerImage = 5

// imagesRead is the runtime's image list, read off the mailbox.
type imagesRead struct {
	actorkit.Tag
	images []v1.ContainerImage
	err    error
}

// readImages lists the runtime's images off the mailbox, with the
// machine's facts (every status update period); the next report carries
// them.
func (a *Actor) readImages() {
	l, limit := a.cfg.Images, a.cfg.MaxImages
	if l == nil {
		return
	}
	actorkit.Go(a.self, a.cfg.Timeout, func(ctx context.Context) *imagesRead {
		imgs, err := l.ListImages(ctx)
		if err != nil {
			return &imagesRead{err: err}
		}
		return &imagesRead{images: NodeImages(imgs, limit)}
	})
}

func (a *Actor) handleImagesRead(m *imagesRead) {
	if !a.self.Mine(m) {
		return
	}
	if m.err != nil {
		// As upstream: no images reported while the list cannot be read.
		a.log.Warn("node status: error getting image list", "err", m.err)
	}
	if slices.EqualFunc(a.images, m.images, sameImage) {
		return
	}
	a.images = m.images
	if a.health != nil {
		a.report(false)
	}
}

func sameImage(x, y v1.ContainerImage) bool {
	return x.SizeBytes == y.SizeBytes && slices.Equal(x.Names, y.Names)
}

// NodeImages is the Node's status.images as upstream reports them: the
// largest images first (ties by ID, descending), at most limit of them
// (-1: all), each named by its digests then its tags, at most 5 names.
func NodeImages(imgs []*runtimeapi.Image, limit int32) []v1.ContainerImage {
	sorted := slices.Clone(imgs)
	slices.SortStableFunc(sorted, func(x, y *runtimeapi.Image) int {
		if x.GetSize() != y.GetSize() {
			if x.GetSize() > y.GetSize() {
				return -1
			}
			return 1
		}
		return -strings.Compare(x.GetId(), y.GetId())
	})
	if limit > -1 && int(limit) < len(sorted) {
		sorted = sorted[:limit]
	}
	var out []v1.ContainerImage
	for _, img := range sorted {
		names := append(slices.Clone(img.GetRepoDigests()), img.GetRepoTags()...)
		if len(names) > maxNamesPerImage {
			names = names[:maxNamesPerImage]
		}
		out = append(out, v1.ContainerImage{Names: names, SizeBytes: int64(img.GetSize())})
	}
	return out
}
