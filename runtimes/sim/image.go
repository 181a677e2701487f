package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type image struct {
	id          string // sha256:<hex>
	seq         uint64
	repoTags    []string
	repoDigests []string
	size        uint64
	pinned      bool
}

// imageRef is a parsed, normalized image reference.
type imageRef struct {
	domain string // docker.io, registry.example:5000, ...
	path   string // library/busybox
	tag    string // "" when only a digest is given
	digest string // sha256:<hex> or ""
}

func (r imageRef) name() string { return r.domain + "/" + r.path }

// String is the normalized reference: name:tag, name@digest or
// name:tag@digest.
func (r imageRef) String() string {
	s := r.name()
	if r.tag != "" {
		s += ":" + r.tag
	}
	if r.digest != "" {
		s += "@" + r.digest
	}
	return s
}

var (
	reComponent = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*$`)
	reTag       = regexp.MustCompile(`^[\w][\w.-]{0,127}$`)
	reDigest    = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
	reDomain    = regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*(?::[0-9]+)?$`)
	reHexID     = regexp.MustCompile(`^[a-f0-9]{64}$`)
)

// parseImageRef parses a docker-style reference and normalizes it the way
// containerd does (busybox -> docker.io/library/busybox:latest).
func parseImageRef(s string) (imageRef, error) {
	var ref imageRef
	if s == "" || len(s) > 512 {
		return ref, fmt.Errorf("invalid reference format %q", s)
	}
	rest := s
	if i := strings.IndexByte(rest, '@'); i >= 0 {
		ref.digest = rest[i+1:]
		rest = rest[:i]
		if !reDigest.MatchString(ref.digest) {
			return ref, fmt.Errorf("invalid reference format %q: bad digest", s)
		}
	}
	if i := strings.LastIndexByte(rest, ':'); i >= 0 && !strings.Contains(rest[i+1:], "/") {
		ref.tag = rest[i+1:]
		rest = rest[:i]
		if !reTag.MatchString(ref.tag) {
			return ref, fmt.Errorf("invalid reference format %q: bad tag", s)
		}
	}
	parts := strings.Split(rest, "/")
	if len(parts) > 1 && (strings.ContainsAny(parts[0], ".:") || parts[0] == "localhost" || parts[0] != strings.ToLower(parts[0])) {
		ref.domain = parts[0]
		parts = parts[1:]
		if !reDomain.MatchString(ref.domain) {
			return ref, fmt.Errorf("invalid reference format %q: bad registry host", s)
		}
	} else {
		ref.domain = "docker.io"
		if len(parts) == 1 {
			parts = []string{"library", parts[0]}
		}
	}
	if ref.domain == "index.docker.io" {
		ref.domain = "docker.io"
	}
	for _, p := range parts {
		if !reComponent.MatchString(p) {
			return ref, fmt.Errorf("invalid reference format %q: repository name must be lowercase", s)
		}
	}
	ref.path = strings.Join(parts, "/")
	if ref.tag == "" && ref.digest == "" {
		ref.tag = "latest"
	}
	return ref, nil
}

// host is the registry host without its port.
func (r imageRef) host() string {
	h := r.domain
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	return strings.ToLower(h)
}

func (r imageRef) invalidRegistry() bool {
	h := r.host()
	return h == "invalid" || strings.HasSuffix(h, ".invalid")
}

func (r imageRef) preloaded() bool {
	return r.domain == "docker.io" && strings.HasPrefix(r.path, "sim/preloaded")
}

func digestOf(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// newImage builds the stable record for a reference, of size size.
func newImage(ref imageRef, size uint64) *image {
	norm := ref.String()
	img := &image{id: digestOf("image", norm)}
	if ref.tag != "" {
		img.repoTags = []string{ref.name() + ":" + ref.tag}
	}
	d := ref.digest
	if d == "" {
		d = digestOf("manifest", norm)
	}
	img.repoDigests = []string{ref.name() + "@" + d}
	img.size = size
	img.pinned = ref.preloaded()
	return img
}

// lookupKeys are the store keys of a reference.
func refKeys(ref imageRef) []string {
	keys := []string{ref.String()}
	if ref.digest != "" {
		keys = append(keys, ref.name()+"@"+ref.digest)
	}
	return keys
}

// imageQuery is a reference parsed for resolveLocked, outside the lock.
type imageQuery struct {
	s     string
	hexID bool
	ref   imageRef
	err   error // of parseImageRef
	keys  []string
}

func queryImage(s string) imageQuery {
	q := imageQuery{s: s}
	if strings.HasPrefix(s, "sha256:") {
		return q
	}
	q.hexID = reHexID.MatchString(s)
	q.ref, q.err = parseImageRef(s)
	if q.err == nil {
		q.keys = refKeys(q.ref)
	}
	return q
}

// resolveImageLocked finds a present image by ID, reference or digest,
// materializing preloaded images; nil when absent. The caller holds r.mu.
func (r *Runtime) resolveImageLocked(s string) *image {
	return r.resolveLocked(queryImage(s))
}

// resolveLocked is resolveImageLocked of a reference parsed beforehand.
func (r *Runtime) resolveLocked(q imageQuery) *image {
	if strings.HasPrefix(q.s, "sha256:") {
		return r.images[q.s]
	}
	if q.hexID {
		if img, ok := r.images["sha256:"+q.s]; ok {
			return img
		}
	}
	if q.err != nil {
		return nil
	}
	for _, k := range q.keys {
		if id, ok := r.imageRefs[k]; ok {
			return r.images[id]
		}
	}
	if q.ref.preloaded() {
		return r.addImageLocked(q.ref)
	}
	return nil
}

func (r *Runtime) addImageLocked(ref imageRef) *image {
	img := newImage(ref, r.node.imageSize(ref))
	if old, ok := r.images[img.id]; ok {
		return old
	}
	r.seq++
	img.seq = r.seq
	r.images[img.id] = img
	// A container list names a container's image by the image's first
	// tag while the image is present.
	r.containerList.invalidate()
	for _, k := range refKeys(ref) {
		r.imageRefs[k] = img.id
	}
	for _, t := range img.repoTags {
		r.imageRefs[t] = img.id
	}
	for _, d := range img.repoDigests {
		r.imageRefs[d] = img.id
	}
	return img
}

func toAPIImage(img *image) *runtimeapi.Image {
	return &runtimeapi.Image{
		Id:          img.id,
		RepoTags:    img.repoTags,
		RepoDigests: img.repoDigests,
		Size:        img.size,
		Spec:        &runtimeapi.ImageSpec{Image: img.id},
		Pinned:      img.pinned,
	}
}

// ListImages lists present images, optionally only the one in the filter.
func (r *Runtime) ListImages(_ context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f := req.GetFilter().GetImage().GetImage(); f != "" {
		resp := &runtimeapi.ListImagesResponse{}
		if img := r.resolveImageLocked(f); img != nil {
			resp.Images = []*runtimeapi.Image{toAPIImage(img)}
		}
		return resp, nil
	}
	imgs := make([]*image, 0, len(r.images))
	for _, img := range r.images {
		imgs = append(imgs, img)
	}
	sort.Slice(imgs, func(i, j int) bool { return imgs[i].seq < imgs[j].seq })
	out := make([]*runtimeapi.Image, 0, len(imgs))
	for _, img := range imgs {
		out = append(out, toAPIImage(img))
	}
	return &runtimeapi.ListImagesResponse{Images: out}, nil
}

// ImageStatus returns the image, or a nil image when it is not present.
func (r *Runtime) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	s := req.GetImage().GetImage()
	if s == "" {
		return nil, status.Error(codes.InvalidArgument, "image status: empty image")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	img := r.resolveImageLocked(s)
	if img == nil {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	resp := &runtimeapi.ImageStatusResponse{Image: toAPIImage(img)}
	if req.GetVerbose() {
		resp.Info = map[string]string{"info": fmt.Sprintf(`{"runtime":%q,"id":%q}`, RuntimeName, img.id)}
	}
	return resp, nil
}

// PullImage records any well-formed reference, except those whose registry
// host ends in .invalid, which fail with NotFound.
func (r *Runtime) PullImage(_ context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	s := req.GetImage().GetImage()
	if reHexID.MatchString(s) || strings.HasPrefix(s, "sha256:") {
		r.mu.Lock()
		img := r.resolveImageLocked(s)
		r.mu.Unlock()
		if img == nil {
			return nil, status.Errorf(codes.NotFound, "failed to pull image %q: not found", s)
		}
		return &runtimeapi.PullImageResponse{ImageRef: img.id}, nil
	}
	ref, err := parseImageRef(s)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "failed to pull image %q: %v", s, err)
	}
	if ref.invalidRegistry() {
		return nil, status.Errorf(codes.NotFound,
			"failed to pull and unpack image %q: failed to resolve reference %q: pull access denied, repository does not exist or may require authorization: %s: not found",
			s, ref.String(), ref.String())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	img := r.resolveImageLocked(s)
	if img == nil {
		img = r.addImageLocked(ref)
	}
	return &runtimeapi.PullImageResponse{ImageRef: img.id}, nil
}

// RemoveImage forgets an image and all its references; removing an absent
// image is not an error.
func (r *Runtime) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	s := req.GetImage().GetImage()
	r.mu.Lock()
	defer r.mu.Unlock()
	img := r.resolveImageLocked(s)
	if img == nil {
		return &runtimeapi.RemoveImageResponse{}, nil
	}
	delete(r.images, img.id)
	r.containerList.invalidate() // see addImageLocked
	for k, id := range r.imageRefs {
		if id == img.id {
			delete(r.imageRefs, k)
		}
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

// ImageFsInfo reports the image filesystem (ImageFsMountpoint: the images'
// sizes) and the container filesystem (ContainerFsMountpoint: the
// containers' writable layers, on the node filesystem). Their capacities
// are FsInfo's (imagefs-capacity, node-disk): CRI has no field for them.
func (r *Runtime) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	ts := now()
	r.mu.Lock()
	u := r.nodeUsageLocked(ts)
	r.mu.Unlock()
	return &runtimeapi.ImageFsInfoResponse{
		ImageFilesystems: []*runtimeapi.FilesystemUsage{{
			Timestamp:  ts,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: ImageFsMountpoint},
			UsedBytes:  u64(u.images),
			InodesUsed: u64(u.imageCount * 100),
		}},
		ContainerFilesystems: []*runtimeapi.FilesystemUsage{{
			Timestamp:  ts,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: ContainerFsMountpoint},
			UsedBytes:  u64(u.layerBytes),
			InodesUsed: u64(u.layerIns),
		}},
	}, nil
}
