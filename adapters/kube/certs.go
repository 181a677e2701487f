package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/klog/v2"
)

// Certificates that client-go's certificate manager keeps current: it
// requests a new one through a CSR when the current one has lived 70-90 %
// of its life (or does not match what is asked for), stores it in
// --cert-dir (<prefix>-<timestamp>.pem, <prefix>-current.pem) and serves
// the newest from Current.

// Rotation is the node's client certificate rotation (rotateCertificates,
// --rotate-certificates).
type Rotation struct {
	// CertDir (--cert-dir) holds kubelet-client-current.pem.
	CertDir string
	// BootstrapKubeconfig (--bootstrap-kubeconfig), if set, requests a
	// certificate when there is no valid one left.
	BootstrapKubeconfig string
	Log                 *slog.Logger
}

// NewRotating is New with client certificate rotation, as upstream's
// kubelet with rotateCertificates: the first certificate is the store's
// (kubelet-client-current.pem) or else the kubeconfig's (which is then
// replaced through a CSR at once, as upstream); the API clients take the
// current certificate at each TLS handshake, and their connections are
// closed when a new one is stored so that every request after a rotation
// uses it (upstream's certificate.UpdateTransport). Rotation stops with
// ctx.
func NewRotating(ctx context.Context, nodeName string, o Options, r Rotation) (*Client, error) {
	if o.Kubeconfig == "" {
		return nil, errors.New("kubeconfig path is empty")
	}
	if r.CertDir == "" {
		return nil, errors.New("client certificate rotation needs the cert dir")
	}
	log := r.Log
	if log == nil {
		log = slog.Default()
	}
	cfg, err := loadKubeconfig(o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", o.Kubeconfig, err)
	}
	rt := &rotatingTransport{log: log}
	store, err := certificate.NewFileStoreWithLogger(klogFor(log, 4), ClientCertPrefix, r.CertDir, r.CertDir, cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("client certificate store in %s: %w", r.CertDir, err)
	}
	tcfg, err := rt.config(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", o.Kubeconfig, err)
	}
	applyOptions(tcfg, &o)
	mctx := klog.NewContext(ctx, klogFor(log, 0).WithName("client-certificate"))
	m, err := certificate.NewManager(&certificate.Config{
		Ctx: &mctx,
		ClientsetFn: func(current *tls.Certificate) (kubernetes.Interface, error) {
			if current != nil {
				return kubernetes.NewForConfig(tcfg)
			}
			if r.BootstrapKubeconfig == "" {
				return nil, errors.New("no valid client certificate and no bootstrap kubeconfig to request one")
			}
			bcfg, err := loadBootstrapConfig(r.BootstrapKubeconfig)
			if err != nil {
				return nil, err
			}
			return kubernetes.NewForConfig(bcfg)
		},
		Template: &x509.CertificateRequest{Subject: pkix.Name{
			CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"},
		}},
		SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
		GetUsages:  certificate.DefaultKubeletClientGetUsages,
		// A kubeconfig with embedded certificate data (kubeadm's on a
		// control-plane node) is the first certificate, replaced at once.
		BootstrapCertificatePEM: cfg.CertData,
		BootstrapKeyPEM:         cfg.KeyData,
		CertificateStore:        &notifyingStore{Store: store, updated: rt.rotated},
		Name:                    "client",
	})
	if err != nil {
		return nil, fmt.Errorf("client certificate manager: %w", err)
	}
	rt.cur.Store(m.Current())
	c, err := newFromConfig(tcfg, nodeName, o)
	if err != nil {
		return nil, err
	}
	if cur := m.Current(); cur != nil && cur.Leaf != nil {
		log.Info("client certificate rotation on", "certDir", r.CertDir, "serial", cur.Leaf.SerialNumber.String(),
			"notAfter", cur.Leaf.NotAfter.UTC().Format(time.RFC3339))
	} else {
		log.Warn("client certificate rotation on, but there is no client certificate yet: requesting one", "certDir", r.CertDir)
	}
	m.Start()
	return c, nil
}

// applyOptions sets the client options (and their defaults, as New) on
// cfg.
func applyOptions(cfg *rest.Config, o *Options) {
	if o.QPS <= 0 {
		o.QPS = 50
	}
	if o.Burst <= 0 {
		o.Burst = 100
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.EventQPS == 0 {
		o.EventQPS = 50
	}
	// A negative EventQPS is kept: client-go builds no rate limiter for
	// it, which is what --event-qps 0 means since v1.37 (unlimited).
	if o.EventBurst <= 0 {
		o.EventBurst = 100
	}
	cfg.QPS, cfg.Burst, cfg.Timeout = o.QPS, o.Burst, o.Timeout
	cfg.UserAgent = o.UserAgent
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
}

// newFromConfig is New's client on a ready config (applyOptions done).
func newFromConfig(cfg *rest.Config, nodeName string, o Options) (*Client, error) {
	cfg.WrapTransport = transport.Wrappers(cfg.WrapTransport, limitInFlight(DefaultMaxInFlight))
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	ecfg := rest.CopyConfig(cfg)
	ecfg.QPS, ecfg.Burst = o.EventQPS, o.EventBurst
	events, err := kubernetes.NewForConfig(ecfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes events client: %w", err)
	}
	return &Client{cs: cs, events: events, cfg: cfg, nodeName: nodeName}, nil
}

// rotatingTransport presents the current client certificate at each TLS
// handshake and closes every connection when a new one is stored.
type rotatingTransport struct {
	cur    atomic.Pointer[tls.Certificate]
	dialer *connrotation.Dialer
	log    *slog.Logger
}

// config is cfg without its credentials, on a transport that presents
// the current certificate: the server, its CA and the rest of the TLS
// settings stay.
func (rt *rotatingTransport) config(cfg *rest.Config) (*rest.Config, error) {
	if cfg.Transport != nil || cfg.WrapTransport != nil || cfg.Dial != nil {
		return nil, errors.New("client certificate rotation: the kubeconfig already configures a transport")
	}
	tcfg := rest.AnonymousClientConfig(cfg)
	tlsCfg, err := rest.TLSConfigFor(tcfg)
	if err != nil {
		return nil, fmt.Errorf("TLS: %w", err)
	}
	if tlsCfg == nil {
		return nil, fmt.Errorf("client certificate rotation needs an https server, got %q", cfg.Host)
	}
	tlsCfg.Certificates = nil
	tlsCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := rt.cur.Load(); c != nil {
			return c, nil
		}
		return &tls.Certificate{}, nil // none yet: the handshake goes on without one
	}
	rt.dialer = connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	tcfg.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsCfg,
		MaxIdleConnsPerHost: 25,
		DialContext:         rt.dialer.DialContext,
	})
	// The transport enforces TLS: a config with both is refused.
	tcfg.TLSClientConfig = rest.TLSClientConfig{}
	return tcfg, nil
}

// rotated makes cert the one presented and closes every connection, so
// that the next request handshakes with it.
func (rt *rotatingTransport) rotated(cert *tls.Certificate) {
	rt.cur.Store(cert)
	if rt.dialer != nil {
		rt.dialer.CloseAll()
	}
	if cert != nil && cert.Leaf != nil {
		rt.log.Info("client certificate rotated: API connections closed to use the new one",
			"serial", cert.Leaf.SerialNumber.String(), "notAfter", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
}

// notifyingStore is a certificate store that tells updated about each
// certificate it stores, before the manager serves it.
type notifyingStore struct {
	certificate.Store
	updated func(*tls.Certificate)
}

func (s *notifyingStore) Update(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	c, err := s.Store.Update(certPEM, keyPEM)
	if err == nil {
		s.updated(c)
	}
	return c, err
}

// ServingOptions is the node API's serving certificate from the cluster
// (serverTLSBootstrap, --rotate-server-certificates).
type ServingOptions struct {
	NodeName string
	// CertDir (--cert-dir) holds kubelet-server-current.pem.
	CertDir string
	// CertFile and KeyFile (--tls-cert-file, --tls-private-key-file), if
	// set, are served until the cluster issues one, as upstream.
	CertFile, KeyFile string
	// Hostnames and IPs are the subject alternative names asked for (the
	// node's names and addresses); as upstream, nothing is requested
	// without an IP.
	Hostnames []string
	IPs       []net.IP
	Log       *slog.Logger
}

// ServingCerts is the node API's serving certificate, requested with a
// kubernetes.io/kubelet-serving CSR (CN system:node:<name>, O
// system:nodes, usages digital signature and server auth, the node's
// names and IPs) and renewed before it expires. The controller manager
// does not approve such CSRs (upstream's behaviour): an admin does,
// kubectl certificate approve <csr>.
type ServingCerts struct {
	m   certificate.Manager
	log *slog.Logger
}

// ServingCertificates makes the node API's serving certificate manager;
// Start begins requesting, ctx stops it.
func (c *Client) ServingCertificates(ctx context.Context, o ServingOptions) (*ServingCerts, error) {
	if o.NodeName == "" || o.CertDir == "" {
		return nil, errors.New("serving certificate: the node name and the cert dir are needed")
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	store, err := certificate.NewFileStoreWithLogger(klogFor(log, 4), ServingCertPrefix, o.CertDir, o.CertDir, o.CertFile, o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate store in %s: %w", o.CertDir, err)
	}
	s := &ServingCerts{log: log}
	tmpl := servingTemplate(o.NodeName, o.Hostnames, o.IPs)
	mctx := klog.NewContext(ctx, klogFor(log, 0).WithName("serving-certificate"))
	cs := c.cs
	s.m, err = certificate.NewManager(&certificate.Config{
		Ctx:              &mctx,
		ClientsetFn:      func(*tls.Certificate) (kubernetes.Interface, error) { return cs, nil },
		GetTemplate:      func() *x509.CertificateRequest { return tmpl },
		SignerName:       certificatesv1.KubeletServingSignerName,
		GetUsages:        certificate.DefaultKubeletServingGetUsages,
		CertificateStore: &notifyingStore{Store: store, updated: s.issued},
		Name:             "serving",
	})
	if err != nil {
		return nil, fmt.Errorf("serving certificate manager: %w", err)
	}
	if tmpl == nil {
		log.Warn("serving certificate: the node has no IP address, no kubelet-serving CSR will be made", "hostnames", o.Hostnames)
	}
	return s, nil
}

// servingTemplate is the kubelet-serving request, or nil without an IP
// (upstream requires one).
func servingTemplate(nodeName string, hostnames []string, ips []net.IP) *x509.CertificateRequest {
	var dns []string
	for _, h := range hostnames {
		if h != "" && net.ParseIP(h) == nil && !slices.Contains(dns, h) {
			dns = append(dns, h)
		}
	}
	var addrs []net.IP
	for _, ip := range ips {
		if ip != nil && !slices.ContainsFunc(addrs, ip.Equal) {
			addrs = append(addrs, ip)
		}
	}
	if len(addrs) == 0 {
		return nil
	}
	slices.Sort(dns)
	return &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
		DNSNames:    dns,
		IPAddresses: addrs,
	}
}

// Start requests a certificate when there is none (or it does not match)
// and renews it before it expires, until ctx is done.
func (s *ServingCerts) Start() {
	if cur := s.m.Current(); cur != nil && cur.Leaf != nil {
		s.log.Info("node API serving certificate from the store, renewed before expiry", "serial", cur.Leaf.SerialNumber.String(),
			"issuer", cur.Leaf.Issuer.CommonName, "notAfter", cur.Leaf.NotAfter.UTC().Format(time.RFC3339))
	} else {
		s.log.Info("node API serving certificate: requesting one with a kubernetes.io/kubelet-serving CSR; " +
			"the node API refuses TLS handshakes until an admin approves it (kubectl get csr; kubectl certificate approve <name>)")
	}
	s.m.Start()
}

// Current is the serving certificate, nil until one is issued (or
// loaded).
func (s *ServingCerts) Current() *tls.Certificate { return s.m.Current() }

func (s *ServingCerts) issued(c *tls.Certificate) {
	if c == nil || c.Leaf == nil {
		return
	}
	s.log.Info("node API serving certificate issued", "serial", c.Leaf.SerialNumber.String(), "issuer", c.Leaf.Issuer.CommonName,
		"dnsNames", c.Leaf.DNSNames, "ips", c.Leaf.IPAddresses, "notAfter", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
}

// klogFor routes client-go's certificate logs (klog) to log, raised by v
// klog levels: klog's V(0) is Info, V(1) and above below Info (Debug
// shows them).
func klogFor(log *slog.Logger, v int) logr.Logger {
	return logr.FromSlogHandler(log.Handler()).V(v)
}
