package kube

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"sync"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/actorlet/actorlet/errdefs"
)

// maxSelectorLength bounds a clusterTrustBundle projection's label selector
// (upstream's limit).
const maxSelectorLength = 100 * 1024

// TrustBundles serves the clusterTrustBundle projections of the node's pods
// from a watch of every certificates.k8s.io/v1 ClusterTrustBundle (the
// node's RBAC lets it list and watch them), started at the first read, as
// upstream's lazy informer. Every change calls the hook set by OnChange.
type TrustBundles struct {
	ctx context.Context
	inf lazyInformer

	mu       sync.Mutex
	onChange func()
}

// NewTrustBundles returns the node's ClusterTrustBundle reader; the watch,
// once started, ends with ctx.
func (c *Client) NewTrustBundles(ctx context.Context) *TrustBundles {
	t := &TrustBundles{ctx: ctx}
	api := c.cs.CertificatesV1()
	t.inf = lazyInformer{what: "ClusterTrustBundle", example: &certificatesv1.ClusterTrustBundle{}, cs: c,
		lw: &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return api.ClusterTrustBundles().List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return api.ClusterTrustBundles().Watch(ctx, o)
			},
		},
		changed: func(any) { t.changed() },
	}
	return t
}

// OnChange sets the hook called (on the watch's goroutine) when a bundle is
// added, changed or deleted.
func (t *TrustBundles) OnChange(f func()) {
	t.mu.Lock()
	t.onChange = f
	t.mu.Unlock()
}

func (t *TrustBundles) changed() {
	t.mu.Lock()
	f := t.onChange
	t.mu.Unlock()
	if f != nil {
		f()
	}
}

// ByName returns the trust anchors of the bundle name, normalized
// (NormalizeAnchors); a missing bundle is an empty file when allowMissing,
// else NotFound.
func (t *TrustBundles) ByName(ctx context.Context, name string, allowMissing bool) ([]byte, error) {
	obj, err := t.inf.get(ctx, t.ctx, name)
	if errdefs.IsNotFound(err) && allowMissing {
		return []byte{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ClusterTrustBundle %s: %w", name, err)
	}
	return NormalizeAnchors(obj.(*certificatesv1.ClusterTrustBundle).Spec.TrustBundle), nil
}

// BySigner returns the trust anchors of every bundle of signerName that
// selector selects (nil: none, as upstream's LabelSelectorAsSelector),
// merged and normalized; none matching is an empty file when allowMissing,
// else NotFound.
func (t *TrustBundles) BySigner(ctx context.Context, signerName string, selector *metav1.LabelSelector, allowMissing bool) ([]byte, error) {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("clusterTrustBundle label selector: %w", err))
	}
	if n := len(sel.String()); n > maxSelectorLength {
		return nil, errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("clusterTrustBundle label selector is %d bytes long, more than %d", n, maxSelectorLength))
	}
	objs, err := t.inf.list(ctx, t.ctx)
	if err != nil {
		return nil, fmt.Errorf("ClusterTrustBundles of signer %s: %w", signerName, err)
	}
	var bundle string
	matched := 0
	for _, o := range objs {
		ctb := o.(*certificatesv1.ClusterTrustBundle)
		if ctb.Spec.SignerName != signerName || !sel.Matches(labels.Set(ctb.Labels)) {
			continue
		}
		matched++
		bundle += ctb.Spec.TrustBundle + "\n"
	}
	if matched == 0 {
		if allowMissing {
			return []byte{}, nil
		}
		return nil, errdefs.Wrap(errdefs.ErrNotFound, errors.New("signerName "+signerName+" and the label selector "+sel.String()+" matched no ClusterTrustBundle"))
	}
	return NormalizeAnchors(bundle), nil
}

// NormalizeAnchors is the PEM file of a trust bundle's certificates, each
// once, without headers or what lies between blocks. Upstream shuffles the
// order; here they are sorted (by DER), so an unchanged bundle writes an
// unchanged file.
func NormalizeAnchors(bundle string) []byte {
	var ders []string
	rest := []byte(bundle)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		ders = append(ders, string(b.Bytes))
	}
	slices.Sort(ders)
	ders = slices.Compact(ders)
	out := []byte{}
	for _, d := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(d)})...)
	}
	return out
}
