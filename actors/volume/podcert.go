package volume

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/podspec"
)

// Certs gives podCertificate and clusterTrustBundle projections what they
// need from the API server (cluster mode; nil: they are refused).
type Certs interface {
	// CreatePodCertificateRequest generates a private key of r.KeyType and
	// creates a PodCertificateRequest for it; it returns the request as
	// created and the PEM (PKCS#8) key.
	CreatePodCertificateRequest(ctx context.Context, r podspec.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, []byte, error)
	// PodCertificateRequest reads one of the node's requests from its
	// watch (errdefs NotFound: gone, or not seen yet).
	PodCertificateRequest(ctx context.Context, namespace, name string) (*certificatesv1.PodCertificateRequest, error)
	// TrustAnchorsByName and TrustAnchorsBySigner return the PEM trust
	// anchors of ClusterTrustBundles (empty when allowMissing and none).
	TrustAnchorsByName(ctx context.Context, name string, allowMissing bool) ([]byte, error)
	TrustAnchorsBySigner(ctx context.Context, signerName string, selector *metav1.LabelSelector, allowMissing bool) ([]byte, error)
}

// Recorder records events on a pod (client-go's record.EventRecorder
// satisfies it).
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Upstream's bounds and timings of pod certificates.
const (
	// minCertExpiration and maxCertExpiration bound maxExpirationSeconds
	// (the API server's validation).
	minCertExpiration = 3600
	maxCertExpiration = 7862400
	// kubernetesMaxExpiration bounds it for the kubernetes.io signers.
	kubernetesMaxExpiration = 86400
	// abandonAfter: a request created this long ago and still not seen is
	// taken as deleted, and made again.
	abandonAfter = 10 * time.Minute
	// overdueAfter: a certificate not renewed this long after its
	// beginRefreshAt is reported overdue (an event).
	overdueAfter = 10 * time.Minute
	// pendingRecheck: how often a pending request is looked at again when
	// no change of it arrives (upstream's refresh pass).
	pendingRecheck = time.Minute
)

// keyTypes are the key types upstream's kubelet generates.
var keyTypes = []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"}

// refreshJitter spreads the renewals of certificates issued together, as
// upstream (up to 5 minutes after beginRefreshAt); a test sets it to 0.
var refreshJitter = func() time.Duration { return time.Duration(rand.Int64N(int64(5 * time.Minute))) }

// certState is one podCertificate projection's credentials: those issued
// (cur), the request waiting for its signer (pending), or why the signer
// will never issue them (final: denied or failed). It is a value: a setup
// works on its copy and hands it back.
type certState struct {
	key, chain               []byte
	beginRefreshAt, notAfter time.Time

	pendingKey     []byte
	pendingName    string
	pendingAbandon time.Time

	final string // the request was denied or failed: permanent for the pod

	overdueSent, expiredSent bool
}

// isKubernetesSigner: a signer name of the Kubernetes project.
func isKubernetesSigner(name string) bool {
	host, _, _ := strings.Cut(name, "/")
	return host == "kubernetes.io" || strings.HasSuffix(host, ".kubernetes.io")
}

// certKey names a projection: the volume and the source's index in it, as
// upstream keys them.
func certKey(volume string, index int) string { return volume + "/" + strconv.Itoa(index) }

// checkPodCertificate refuses a projection upstream's API validation would
// refuse (a pod from a file, a URL or a push was never validated).
func checkPodCertificate(pc *v1.PodCertificateProjection) error {
	bad := func(format string, args ...any) error {
		return errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("podCertificate: "+format, args...))
	}
	switch {
	case pc.SignerName == "":
		return bad("signerName is required")
	case !slices.Contains(keyTypes, pc.KeyType):
		return bad("unknown keyType %q (supported: %v)", pc.KeyType, keyTypes)
	case pc.MaxExpirationSeconds != nil && *pc.MaxExpirationSeconds < minCertExpiration:
		return bad("maxExpirationSeconds %d is less than %d (1 hour)", *pc.MaxExpirationSeconds, minCertExpiration)
	case pc.MaxExpirationSeconds != nil && *pc.MaxExpirationSeconds > maxCertExpiration:
		return bad("maxExpirationSeconds %d is more than %d (91 days)", *pc.MaxExpirationSeconds, maxCertExpiration)
	case pc.CredentialBundlePath == "" && pc.KeyPath == "" && pc.CertificateChainPath == "":
		return bad("none of credentialBundlePath, keyPath and certificateChainPath is set")
	case pc.MaxExpirationSeconds != nil && *pc.MaxExpirationSeconds > kubernetesMaxExpiration && isKubernetesSigner(pc.SignerName):
		return bad("maxExpirationSeconds %d is more than %d (24 hours), the most a kubernetes.io signer issues", *pc.MaxExpirationSeconds, kubernetesMaxExpiration)
	}
	return nil
}

// errNotIssued: the request waits for its signer (the pod's containers wait
// in ContainerCreating, as upstream's mount fails until then).
var errNotIssued = errdefs.ErrUnavailable

// podCertificate advances one projection's state (st) and returns its key
// and chain once issued, and when to look at it again (0: never).
func podCertificate(ctx context.Context, certs Certs, rec Recorder, pod *v1.Pod, pc *v1.PodCertificateProjection, st *certState, now time.Time) (key, chain []byte, again time.Duration, err error) {
	if err := checkPodCertificate(pc); err != nil {
		return nil, nil, 0, err
	}
	if podspec.IsStaticPod(pod) {
		return nil, nil, 0, errdefs.Wrap(errdefs.ErrFailedPrecondition, fmt.Errorf("podCertificate: a static pod gets no pod certificate (the API server refuses requests for mirror pods)"))
	}
	if certs == nil {
		return nil, nil, 0, errNoAPI
	}
	if st.final != "" {
		return nil, nil, 0, errdefs.Wrap(errdefs.ErrFailedPrecondition, fmt.Errorf("podCertificate: %s", st.final))
	}
	if st.pendingName != "" {
		if err := checkPending(ctx, certs, rec, pod, st, now); err != nil {
			return nil, nil, 0, err
		}
		if st.final != "" {
			return nil, nil, 0, errdefs.Wrap(errdefs.ErrFailedPrecondition, fmt.Errorf("podCertificate: %s", st.final))
		}
	}
	if st.chain != nil {
		warnLate(rec, pod, st, now)
	}
	if st.pendingName == "" && (st.chain == nil || !now.Before(st.beginRefreshAt)) {
		sa := pod.Spec.ServiceAccountName
		if sa == "" {
			sa = "default"
		}
		pcr, k, err := certs.CreatePodCertificateRequest(ctx, podspec.PodCertificateRequest{
			Namespace: pod.Namespace, PodName: pod.Name, PodUID: pod.UID, ServiceAccount: sa,
			SignerName: pc.SignerName, KeyType: pc.KeyType, MaxExpiration: pc.MaxExpirationSeconds, UserAnnotations: pc.UserAnnotations,
		})
		if err != nil {
			if st.chain != nil {
				return st.key, st.chain, pendingRecheck, nil // renewal failed: keep what is issued, try again
			}
			return nil, nil, 0, err
		}
		created := pcr.CreationTimestamp.Time
		if created.IsZero() {
			created = now
		}
		st.pendingKey, st.pendingName, st.pendingAbandon = k, pcr.Name, created.Add(abandonAfter)
	}
	if st.chain == nil {
		return nil, nil, 0, fmt.Errorf("podCertificate: %w: waiting for signer %q to issue PodCertificateRequest %s/%s", errNotIssued, pc.SignerName, pod.Namespace, st.pendingName)
	}
	again = st.beginRefreshAt.Sub(now)
	if st.pendingName != "" || again <= 0 {
		again = pendingRecheck
	}
	return st.key, st.chain, again, nil
}

// checkPending looks at the pending request: issued, its credentials become
// current; denied or failed, the projection fails for good (an event, as
// upstream); gone for abandonAfter, it is forgotten (made again).
func checkPending(ctx context.Context, certs Certs, rec Recorder, pod *v1.Pod, st *certState, now time.Time) error {
	pcr, err := certs.PodCertificateRequest(ctx, pod.Namespace, st.pendingName)
	if errdefs.IsNotFound(err) {
		if now.After(st.pendingAbandon) {
			st.pendingKey, st.pendingName = nil, ""
		}
		return nil
	}
	if err != nil {
		if st.chain != nil {
			return nil // keep what is issued
		}
		return err
	}
	name := pcr.Namespace + "/" + pcr.Name
	for _, c := range pcr.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
			verb := "was denied"
			if c.Type == certificatesv1.PodCertificateRequestConditionTypeFailed {
				verb = "failed"
			}
			st.final = fmt.Sprintf("PodCertificateRequest %s %s, reason=%q, message=%q", name, verb, c.Reason, c.Message)
			st.pendingKey, st.pendingName = nil, ""
			if rec != nil {
				rec.Eventf(pod, v1.EventTypeWarning, c.Type, "%s", st.final)
			}
			return nil
		case certificatesv1.PodCertificateRequestConditionTypeIssued:
			chain := cleanChain([]byte(pcr.Status.CertificateChain))
			if len(chain) == 0 || pcr.Status.BeginRefreshAt == nil || pcr.Status.NotAfter == nil {
				return fmt.Errorf("PodCertificateRequest %s is issued without a certificate chain, beginRefreshAt or notAfter", name)
			}
			notAfter := pcr.Status.NotAfter.Time
			begin := pcr.Status.BeginRefreshAt.Add(refreshJitter())
			if begin.After(notAfter) {
				begin = notAfter
			}
			*st = certState{key: st.pendingKey, chain: chain, beginRefreshAt: begin, notAfter: notAfter}
			return nil
		}
	}
	return nil // still pending: its next change wakes the pod up
}

// warnLate records, once each, a certificate overdue for renewal and one
// expired (upstream's events).
func warnLate(rec Recorder, pod *v1.Pod, st *certState, now time.Time) {
	if rec == nil {
		return
	}
	if !st.overdueSent && now.After(st.beginRefreshAt.Add(overdueAfter)) {
		st.overdueSent = true
		rec.Eventf(pod, v1.EventTypeWarning, "CertificateOverdueForRefresh", "PodCertificate refresh overdue")
	}
	if !st.expiredSent && now.After(st.notAfter) {
		st.expiredSent = true
		rec.Eventf(pod, v1.EventTypeWarning, "CertificateExpired", "PodCertificate expired")
	}
}

// cleanChain keeps the PEM blocks of a chain, each a plain CERTIFICATE
// without headers, dropping what lies between them (as upstream).
func cleanChain(in []byte) []byte {
	var out bytes.Buffer
	for {
		var b *pem.Block
		b, in = pem.Decode(in)
		if b == nil {
			return out.Bytes()
		}
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})
	}
}

// podCertificateFiles are the files of an issued projection: the
// credential bundle (key, then chain), the key and the chain, where asked.
func podCertificateFiles(pc *v1.PodCertificateProjection, key, chain []byte, f podspec.VolumeFile, out map[string]podspec.VolumeFile) {
	put := func(path string, data []byte) {
		if path != "" {
			g := f
			g.Data = data
			out[path] = g
		}
	}
	put(pc.CredentialBundlePath, append(append([]byte{}, key...), chain...))
	put(pc.KeyPath, key)
	put(pc.CertificateChainPath, chain)
}

// trustBundle reads a clusterTrustBundle projection's anchors.
func trustBundle(ctx context.Context, certs Certs, ctb *v1.ClusterTrustBundleProjection) ([]byte, error) {
	if certs == nil {
		return nil, errNoAPI
	}
	optional := ctb.Optional != nil && *ctb.Optional
	switch {
	case ctb.Name != nil && ctb.SignerName != nil:
		return nil, errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("clusterTrustBundle: name and signerName exclude each other"))
	case ctb.Name != nil:
		return certs.TrustAnchorsByName(ctx, *ctb.Name, optional)
	case ctb.SignerName != nil:
		return certs.TrustAnchorsBySigner(ctx, *ctb.SignerName, ctb.LabelSelector, optional)
	}
	return nil, errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("clusterTrustBundle: either name or signerName must be set"))
}
