package manifest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/podspec"
	v1 "k8s.io/api/core/v1"
)

// Source names for the config.source annotation, as messages.Source*.
const (
	SourceFile = "file"
	SourceURL  = "http"
	SourcePush = "push"
)

// MaxManifestBytes caps a manifest file and a manifest URL's body: 3 MiB,
// the upstream API server's cap on a request body. A bigger file (or body)
// is refused with an error naming it and the cap; nothing of it is read
// past the cap. A pushed manifest has its own cap (the node API's
// MaxBodyBytes).
const MaxManifestBytes = 3 << 20

// ContentError is a manifest (a file, or a URL's body) or a pod of it left
// out, with a digest of the content it is about: the same error about
// another content of the same file has another digest, so the source can
// report it once per content.
type ContentError struct {
	Digest string
	Err    error
}

func (e *ContentError) Error() string { return e.Err.Error() }

func (e *ContentError) Unwrap() error { return e.Err }

// ContentDigest names the content the error is about.
func (e *ContentError) ContentDigest() string { return e.Digest }

// digest is a short digest of a manifest's bytes.
func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// contentErr tags err with the digest of its content; none: err as it is.
func contentErr(digest string, err error) error {
	if digest == "" {
		return err
	}
	return &ContentError{Digest: digest, Err: err}
}

// ReadDir decodes every regular file directly in dir (no recursion; symlinks
// are followed; names starting with "." are skipped), in name order.
// origins[i] is the path of the file pods[i] came from. A file larger than
// MaxManifestBytes contributes an error and no pod; a document of a file that
// fails to decode contributes an error naming the file and the document (from
// 1), and the other documents of the file and the other files are unaffected.
// A missing dir gives one error of class errdefs.ErrNotFound (the caller may
// treat it as an empty dir); a dir that cannot be listed gives one error of
// class errdefs.ErrUnavailable (the caller should keep what it had).
func ReadDir(dir string) (pods []*v1.Pod, origins []string, errs []error) {
	items, _, errs := readDir(dir)
	for _, it := range items {
		pods = append(pods, it.pod)
		origins = append(origins, it.origin)
	}
	return pods, origins, errs
}

// item is a decoded pod and where it came from: the file (or URL) and the
// document in it.
type item struct {
	pod    *v1.Pod
	origin string
	index  int
}

// readDir is ReadDir that also gives the digest of each file read
// (digests[path]); a file's errors are *ContentErrors.
func readDir(dir string) (items []item, digests map[string]string, errs []error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, []error{errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("manifest dir %s: %w", dir, err))}
		}
		return nil, nil, []error{errdefs.Wrap(errdefs.ErrUnavailable, fmt.Errorf("manifest dir %s: %w", dir, err))}
	}
	digests = map[string]string{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		info, err := os.Stat(path)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) { // removed between list and stat: not an error
				errs = append(errs, fmt.Errorf("%s: %w", path, err))
			}
			continue
		}
		if !info.Mode().IsRegular() {
			continue
		}
		data, err := readFile(path, info)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				var big *tooBigError
				if errors.As(err, &big) {
					err = contentErr(digest(fmt.Appendf(nil, "%d %d", big.size, info.ModTime().UnixNano())), err)
				}
				errs = append(errs, err)
			}
			continue
		}
		digests[path] = digest(data)
		docs, derrs := DecodeDocuments(data)
		for _, err := range derrs {
			errs = append(errs, contentErr(digests[path], fmt.Errorf("%s: %w", path, err)))
		}
		for _, d := range docs {
			items = append(items, item{pod: d.Pod, origin: path, index: d.Index})
		}
	}
	return items, digests, errs
}

// tooBigError is a manifest over MaxManifestBytes.
type tooBigError struct {
	what string
	size int64 // -1: unknown, more than the cap
}

func (e *tooBigError) Error() string {
	if e.size < 0 {
		return fmt.Sprintf("%s: larger than %d bytes (MaxManifestBytes), not read", e.what, MaxManifestBytes)
	}
	return fmt.Sprintf("%s: %d bytes, larger than %d bytes (MaxManifestBytes), not read", e.what, e.size, MaxManifestBytes)
}

// readFile reads a manifest file of at most MaxManifestBytes; info is its
// stat (a file that grows past the cap while read is refused too).
func readFile(path string, info os.FileInfo) ([]byte, error) {
	if info.Size() > MaxManifestBytes {
		return nil, &tooBigError{what: path, size: info.Size()}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, MaxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxManifestBytes {
		return nil, &tooBigError{what: path, size: -1}
	}
	return data, nil
}

// Fetch GETs url and decodes the body. Any failure of the fetch as a whole
// (transport, a status other than 200, a body over MaxManifestBytes or a
// document that does not decode) is of class errdefs.ErrUnavailable: a
// URL's body is one answer, and upstream's HTTP source too keeps its pods
// when the answer does not decode. An empty body gives no pods and no
// error.
func Fetch(ctx context.Context, client *http.Client, url string) ([]*v1.Pod, error) {
	items, _, err := fetch(ctx, client, url)
	var pods []*v1.Pod
	for _, it := range items {
		pods = append(pods, it.pod)
	}
	return pods, err
}

// fetch is Fetch that also gives the digest of the body.
func fetch(ctx context.Context, client *http.Client, url string) ([]item, string, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("manifest url %s: %w", url, err))
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", errdefs.Wrap(errdefs.ErrUnavailable, fmt.Errorf("manifest url %s: %w", url, err))
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, "", errdefs.Wrap(errdefs.ErrUnavailable, fmt.Errorf("manifest url %s: status %s", url, resp.Status))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxManifestBytes+1))
	if err != nil {
		return nil, "", errdefs.Wrap(errdefs.ErrUnavailable, fmt.Errorf("manifest url %s: read body: %w", url, err))
	}
	if len(data) > MaxManifestBytes {
		return nil, "", errdefs.Wrap(errdefs.ErrUnavailable, &tooBigError{what: "manifest url " + url + ": body", size: -1})
	}
	d := digest(data)
	docs, errs := DecodeDocuments(data)
	if len(errs) > 0 {
		return nil, "", contentErr(d, errdefs.Wrap(errdefs.ErrUnavailable, fmt.Errorf("manifest url %s: %w", url, errors.Join(errs...))))
	}
	items := make([]item, len(docs))
	for i, doc := range docs {
		items[i] = item{pod: doc.Pod, origin: url, index: doc.Index}
	}
	return items, d, nil
}

// DirLister lists the static pods of a manifest directory: ReadDir, then
// ApplyDefaults and Validate for each pod. It has the method of
// actors/source.Lister. Pods that fail are left out with an error naming the
// file, the document and the field; a missing dir lists as empty (with an
// error).
type DirLister struct {
	Dir      string
	NodeName string
}

// List implements the source actors' Lister.
func (l DirLister) List(ctx context.Context) ([]*v1.Pod, []error) {
	items, digests, errs := readDir(l.Dir)
	out, verrs := prepare(items, digests, SourceFile, l.NodeName)
	return out, append(errs, verrs...)
}

// URLLister lists the pods served at a manifest URL: Fetch, then
// ApplyDefaults and Validate for each pod. It has the method of
// actors/source.Lister. A failed fetch returns an errdefs.ErrUnavailable
// error and no pods: the source keeps what it had, as upstream does. A pod
// that decodes but is invalid is left out with an error naming the URL, the
// document and the field; the others run.
type URLLister struct {
	URL      string
	NodeName string
	Client   *http.Client
}

// List implements the source actors' Lister.
func (l URLLister) List(ctx context.Context) ([]*v1.Pod, []error) {
	items, d, err := fetch(ctx, l.Client, l.URL)
	if err != nil {
		return nil, []error{err}
	}
	out, errs := prepare(items, map[string]string{l.URL: d}, SourceURL, l.NodeName)
	if out == nil {
		out = []*v1.Pod{}
	}
	return out, errs
}

// prepare defaults and validates pods, dropping invalid ones and duplicates
// (same namespace/name or UID: the first in name order wins). Each error is
// a *ContentError with the digest of its origin (digests[origin]) and names
// the origin and the document.
func prepare(items []item, digests map[string]string, source, nodeName string) ([]*v1.Pod, []error) {
	out := make([]*v1.Pod, 0, len(items))
	var errs []error
	byName := map[string]string{}
	byUID := map[string]string{}
	for _, it := range items {
		pod, origin := it.pod, it.origin
		fail := func(format string, args ...any) {
			err := &DocumentError{Index: it.index, Err: fmt.Errorf(format, args...)}
			errs = append(errs, contentErr(digests[origin], fmt.Errorf("%s: %w", origin, err)))
		}
		if pod.Name == "" {
			fail("metadata.name: Required value")
			continue
		}
		ApplyDefaults(pod, source, nodeName, origin)
		if err := Validate(pod); err != nil {
			fail("pod %s/%s: %w", pod.Namespace, pod.Name, err)
			continue
		}
		if err := podspec.CheckStaticPod(pod); err != nil { // v1.37: no API references
			fail("pod %s/%s: %w", pod.Namespace, pod.Name, err)
			continue
		}
		key := pod.Namespace + "/" + pod.Name
		if first, ok := byName[key]; ok {
			fail("pod %s: duplicate of the pod in %s, ignored", key, first)
			continue
		}
		if first, ok := byUID[string(pod.UID)]; ok {
			fail("pod %s: metadata.uid %s: duplicate of the pod in %s, ignored", key, pod.UID, first)
			continue
		}
		byName[key], byUID[string(pod.UID)] = origin, origin
		out = append(out, pod)
	}
	return out, errs
}
