package kube

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/podspec"
)

// KeyTypes are the key types of a podCertificate projection, as upstream's
// kubelet generates them.
var KeyTypes = []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"}

// GenerateKey makes a private key of keyType (one of KeyTypes) and the stub
// PKCS#10 request a PodCertificateRequest carries (an empty subject, signed
// with the key: the API server checks the signature as the proof of
// possession). The key is returned PEM-encoded as a PKCS#8 "PRIVATE KEY".
func GenerateKey(keyType string) (keyPEM, stubCSR []byte, err error) {
	var key crypto.Signer
	switch keyType {
	case "RSA3072":
		key, err = rsa.GenerateKey(rand.Reader, 3072)
	case "RSA4096":
		key, err = rsa.GenerateKey(rand.Reader, 4096)
	case "ECDSAP256":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ECDSAP384":
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ECDSAP521":
		key, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ED25519":
		_, key, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, nil, errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("unknown key type %q (known: %v)", keyType, KeyTypes))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("generate a %s key: %w", keyType, err)
	}
	stubCSR, err = x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("stub PKCS#10 request: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("PKCS#8 key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), stubCSR, nil
}

// PodCertificates creates PodCertificateRequests for the node's pods and
// reads them back from a watch of the node's requests (field selector
// spec.nodeName, the only list the Node authorizer allows a node), started
// at the first use: a control plane without the API never sees a watch.
// Every change of a request calls the hook set by OnChange with its pod's
// UID.
type PodCertificates struct {
	c   *Client
	ctx context.Context
	inf lazyInformer

	mu       sync.Mutex
	onChange func(types.UID)
	nodeUID  types.UID
}

// NewPodCertificates returns the node's PodCertificateRequest client; the
// watch, once started, ends with ctx.
func (c *Client) NewPodCertificates(ctx context.Context) *PodCertificates {
	p := &PodCertificates{c: c, ctx: ctx}
	sel := fields.OneTermEqualSelector("spec.nodeName", c.nodeName).String()
	api := c.cs.CertificatesV1()
	p.inf = lazyInformer{what: "PodCertificateRequest", example: &certificatesv1.PodCertificateRequest{}, cs: c,
		lw: &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.FieldSelector = sel
				return api.PodCertificateRequests("").List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.FieldSelector = sel
				return api.PodCertificateRequests("").Watch(ctx, o)
			},
		},
		changed: func(obj any) {
			if pcr, ok := obj.(*certificatesv1.PodCertificateRequest); ok {
				p.changed(pcr.Spec.PodUID)
			}
		},
	}
	return p
}

// OnChange sets the hook called (on the watch's goroutine) with the pod UID
// of every request added, changed or deleted.
func (p *PodCertificates) OnChange(f func(types.UID)) {
	p.mu.Lock()
	p.onChange = f
	p.mu.Unlock()
}

func (p *PodCertificates) changed(uid types.UID) {
	p.mu.Lock()
	f := p.onChange
	p.mu.Unlock()
	if f != nil {
		f(uid)
	}
}

// Create generates the key of r.KeyType and creates the request for it
// (named req-<random>, owned by the pod so that it goes with the pod, as
// upstream), with the node's name and UID and the service account's UID.
// It returns the request as created and the PEM private key.
func (p *PodCertificates) Create(ctx context.Context, r podspec.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, []byte, error) {
	if err := p.inf.start(p.ctx); err != nil {
		return nil, nil, err
	}
	nodeUID, err := p.nodeUIDFor(ctx)
	if err != nil {
		return nil, nil, err
	}
	sa, err := get(ctx, p.c.cs.CoreV1().ServiceAccounts(r.Namespace).Get, "serviceaccount", r.Namespace, r.ServiceAccount)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, csr, err := GenerateKey(r.KeyType)
	if err != nil {
		return nil, nil, err
	}
	req := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       r.Namespace,
			GenerateName:    "req-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: r.PodName, UID: r.PodUID}},
		},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName:                r.SignerName,
			PodName:                   r.PodName,
			PodUID:                    r.PodUID,
			ServiceAccountName:        r.ServiceAccount,
			ServiceAccountUID:         sa.UID,
			NodeName:                  types.NodeName(p.c.nodeName),
			NodeUID:                   nodeUID,
			MaxExpirationSeconds:      r.MaxExpiration,
			StubPKCS10Request:         csr,
			UnverifiedUserAnnotations: r.UserAnnotations,
		},
	}
	out, err := p.c.cs.CertificatesV1().PodCertificateRequests(r.Namespace).Create(ctx, req, metav1.CreateOptions{})
	if err != nil {
		if errors.Is(classify(err), errdefs.ErrInvalidArgument) {
			// The node UID may be stale (the Node was recreated).
			p.mu.Lock()
			p.nodeUID = ""
			p.mu.Unlock()
		}
		return nil, nil, fmt.Errorf("create PodCertificateRequest for pod %s/%s: %w", r.Namespace, r.PodName, classify(err))
	}
	return out, keyPEM, nil
}

// nodeUIDFor reads the Node's UID once (a request names it; NodeRestriction
// checks it).
func (p *PodCertificates) nodeUIDFor(ctx context.Context) (types.UID, error) {
	p.mu.Lock()
	uid := p.nodeUID
	p.mu.Unlock()
	if uid != "" {
		return uid, nil
	}
	n, err := p.c.GetNode(ctx, p.c.nodeName)
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	p.nodeUID = n.UID
	p.mu.Unlock()
	return n.UID, nil
}

// Get reads a request of the node from the watch (NotFound: not there, or
// not seen yet).
func (p *PodCertificates) Get(ctx context.Context, namespace, name string) (*certificatesv1.PodCertificateRequest, error) {
	obj, err := p.inf.get(ctx, p.ctx, namespace+"/"+name)
	if err != nil {
		return nil, fmt.Errorf("PodCertificateRequest %s/%s: %w", namespace, name, err)
	}
	return obj.(*certificatesv1.PodCertificateRequest), nil
}

// lazyInformer is an informer started at its first use.
type lazyInformer struct {
	what    string
	example runtime.Object
	lw      *cache.ListWatch
	cs      *Client
	changed func(obj any)

	once sync.Once
	inf  cache.SharedIndexInformer
}

func (l *lazyInformer) start(ctx context.Context) error {
	l.once.Do(func() {
		l.inf = cache.NewSharedIndexInformer(quickReconnect(cache.ToListWatcherWithWatchListSemantics(l.lw, l.cs.cs)), l.example, 0, cache.Indexers{})
		_ = l.inf.SetTransform(stripManagedFields)
		if l.changed != nil {
			_, _ = l.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    l.changed,
				UpdateFunc: func(_, n any) { l.changed(n) },
				DeleteFunc: func(obj any) {
					if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
						obj = t.Obj
					}
					l.changed(obj)
				},
			})
		}
		go l.inf.RunWithContext(ctx)
	})
	return nil
}

// syncWait bounds how long a read waits for the first list.
const syncWait = 10 * time.Second

// synced starts the informer and waits (at most syncWait) for its first
// list.
func (l *lazyInformer) synced(ctx, life context.Context) error {
	_ = l.start(life)
	if l.inf.HasSynced() {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, syncWait)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), l.inf.HasSynced) {
		return errdefs.Wrap(errdefs.ErrUnavailable, fmt.Errorf("the %s watch has not synced yet", l.what))
	}
	return nil
}

func (l *lazyInformer) get(ctx, life context.Context, key string) (any, error) {
	if err := l.synced(ctx, life); err != nil {
		return nil, err
	}
	obj, ok, err := l.inf.GetStore().GetByKey(key)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.ErrUnknown, err)
	}
	if !ok {
		return nil, errdefs.Wrap(errdefs.ErrNotFound, errors.New("not found"))
	}
	return obj, nil
}

func (l *lazyInformer) list(ctx, life context.Context) ([]any, error) {
	if err := l.synced(ctx, life); err != nil {
		return nil, err
	}
	return l.inf.GetStore().List(), nil
}
