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
	v1 "k8s.io/api/core/v1"
)

// Source names for the config.source annotation, as messages.Source*.
const (
	SourceFile = "file"
	SourceURL  = "http"
	SourcePush = "push"
)

// MaxBodyBytes bounds what Fetch reads from a manifest URL.
const MaxBodyBytes = 10 << 20

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
// origins[i] is the path of the file pods[i] came from. A file that fails to
// decode contributes an error naming the file and no pod; the others are
// unaffected. A missing dir gives one error of class errdefs.ErrNotFound (the
// caller may treat it as an empty dir); a dir that cannot be listed gives one
// error of class errdefs.ErrUnavailable (the caller should keep what it had).
func ReadDir(dir string) (pods []*v1.Pod, origins []string, errs []error) {
	pods, origins, _, errs = readDir(dir)
	return pods, origins, errs
}

// readDir is ReadDir that also gives the digest of each file read
// (digests[path]); a file's decode error is a *ContentError.
func readDir(dir string) (pods []*v1.Pod, origins []string, digests map[string]string, errs []error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, nil, []error{errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("manifest dir %s: %w", dir, err))}
		}
		return nil, nil, nil, []error{errdefs.Wrap(errdefs.ErrUnavailable, fmt.Errorf("manifest dir %s: %w", dir, err))}
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
		data, err := os.ReadFile(path)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("%s: %w", path, err))
			}
			continue
		}
		digests[path] = digest(data)
		got, err := Decode(data)
		if err != nil {
			errs = append(errs, contentErr(digests[path], fmt.Errorf("%s: %w", path, err)))
			continue
		}
		for _, p := range got {
			pods = append(pods, p)
			origins = append(origins, path)
		}
	}
	return pods, origins, digests, errs
}

// Fetch GETs url and decodes the body. Any failure of the fetch as a whole
// (transport, a status other than 200, a body over MaxBodyBytes or one that
// does not decode) is of class errdefs.ErrUnavailable. An empty body gives
// no pods and no error.
func Fetch(ctx context.Context, client *http.Client, url string) ([]*v1.Pod, error) {
	pods, _, err := fetch(ctx, client, url)
	return pods, err
}

// fetch is Fetch that also gives the digest of the body.
func fetch(ctx context.Context, client *http.Client, url string) ([]*v1.Pod, string, error) {
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
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, "", errdefs.Wrap(errdefs.ErrUnavailable, fmt.Errorf("manifest url %s: read body: %w", url, err))
	}
	if len(data) > MaxBodyBytes {
		return nil, "", errdefs.Wrap(errdefs.ErrUnavailable, fmt.Errorf("manifest url %s: body larger than %d bytes", url, MaxBodyBytes))
	}
	d := digest(data)
	pods, err := Decode(data)
	if err != nil {
		return nil, "", contentErr(d, errdefs.Wrap(errdefs.ErrUnavailable, fmt.Errorf("manifest url %s: %w", url, err)))
	}
	return pods, d, nil
}

// DirLister lists the static pods of a manifest directory: ReadDir, then
// ApplyDefaults and Validate for each pod. It has the method of
// actors/source.Lister. Pods that fail are left out with an error naming the
// file and the field; a missing dir lists as empty (with an error).
type DirLister struct {
	Dir      string
	NodeName string
}

// List implements the source actors' Lister.
func (l DirLister) List(ctx context.Context) ([]*v1.Pod, []error) {
	pods, origins, digests, errs := readDir(l.Dir)
	out, verrs := prepare(pods, origins, digests, SourceFile, l.NodeName)
	return out, append(errs, verrs...)
}

// URLLister lists the pods served at a manifest URL: Fetch, then
// ApplyDefaults and Validate for each pod. It has the method of
// actors/source.Lister. A failed fetch returns an errdefs.ErrUnavailable
// error and no pods: the source keeps what it had, as upstream does.
type URLLister struct {
	URL      string
	NodeName string
	Client   *http.Client
}

// List implements the source actors' Lister.
func (l URLLister) List(ctx context.Context) ([]*v1.Pod, []error) {
	pods, d, err := fetch(ctx, l.Client, l.URL)
	if err != nil {
		return nil, []error{err}
	}
	origins := make([]string, len(pods))
	for i := range origins {
		origins[i] = l.URL
	}
	out, errs := prepare(pods, origins, map[string]string{l.URL: d}, SourceURL, l.NodeName)
	if out == nil {
		out = []*v1.Pod{}
	}
	return out, errs
}

// prepare defaults and validates pods, dropping invalid ones and duplicates
// (same namespace/name or UID: the first in name order wins). Each error is
// a *ContentError with the digest of its origin (digests[origin]).
func prepare(pods []*v1.Pod, origins []string, digests map[string]string, source, nodeName string) ([]*v1.Pod, []error) {
	out := make([]*v1.Pod, 0, len(pods))
	var errs []error
	byName := map[string]string{}
	byUID := map[string]string{}
	for i, pod := range pods {
		origin := origins[i]
		if pod.Name == "" {
			errs = append(errs, contentErr(digests[origin], fmt.Errorf("%s: metadata.name: Required value", origin)))
			continue
		}
		ApplyDefaults(pod, source, nodeName, origin)
		if err := Validate(pod); err != nil {
			errs = append(errs, contentErr(digests[origin], fmt.Errorf("%s: pod %s/%s: %w", origin, pod.Namespace, pod.Name, err)))
			continue
		}
		key := pod.Namespace + "/" + pod.Name
		if first, ok := byName[key]; ok {
			errs = append(errs, contentErr(digests[origin], fmt.Errorf("%s: pod %s: duplicate of the pod in %s, ignored", origin, key, first)))
			continue
		}
		if first, ok := byUID[string(pod.UID)]; ok {
			errs = append(errs, contentErr(digests[origin], fmt.Errorf("%s: pod %s: metadata.uid %s: duplicate of the pod in %s, ignored", origin, key, pod.UID, first)))
			continue
		}
		byName[key], byUID[string(pod.UID)] = origin, origin
		out = append(out, pod)
	}
	return out, errs
}
