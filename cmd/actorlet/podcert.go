package main

import (
	"context"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/actors/volume"
	"github.com/actorlet/actorlet/adapters/kube"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// volumeCerts gives the VolumeActor its pod certificates and
// ClusterTrustBundles (cluster mode; nil in standalone mode, where such
// projections are refused), and tells it of every change of them: a
// PodCertificateRequest of one of the node's pods, any ClusterTrustBundle.
func (c *clusterParts) volumeCerts(w *wiring) volume.Certs {
	if c == nil {
		return nil
	}
	sys, vols := w.sys, w.pid("volumes")
	c.certs.OnChange(func(uid types.UID) { sys.Root.Send(vols, &messages.CredentialsChanged{UID: uid}) })
	c.bundles.OnChange(func() { sys.Root.Send(vols, &messages.CredentialsChanged{TrustBundles: true}) })
	return volumeCerts{c.certs, c.bundles}
}

// volumeCerts is volume.Certs over the kube adapters.
type volumeCerts struct {
	certs   *kube.PodCertificates
	bundles *kube.TrustBundles
}

func (v volumeCerts) CreatePodCertificateRequest(ctx context.Context, r podspec.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, []byte, error) {
	return v.certs.Create(ctx, r)
}

func (v volumeCerts) PodCertificateRequest(ctx context.Context, namespace, name string) (*certificatesv1.PodCertificateRequest, error) {
	return v.certs.Get(ctx, namespace, name)
}

func (v volumeCerts) TrustAnchorsByName(ctx context.Context, name string, allowMissing bool) ([]byte, error) {
	return v.bundles.ByName(ctx, name, allowMissing)
}

func (v volumeCerts) TrustAnchorsBySigner(ctx context.Context, signerName string, sel *metav1.LabelSelector, allowMissing bool) ([]byte, error) {
	return v.bundles.BySigner(ctx, signerName, sel, allowMissing)
}
