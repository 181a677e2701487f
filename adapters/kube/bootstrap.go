package kube

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/transport"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"

	"github.com/actorlet/actorlet/errdefs"
)

// Names in --cert-dir, as upstream's: client-go's file store writes each
// certificate with its key as <prefix>-<timestamp>.pem and points the
// symlink <prefix>-current.pem at the newest.
const (
	// ClientCertPrefix names the node's client certificates
	// (kubelet-client-current.pem).
	ClientCertPrefix = "kubelet-client"
	// ServingCertPrefix names the node API's serving certificates from the
	// cluster (kubelet-server-current.pem, --rotate-server-certificates).
	ServingCertPrefix = "kubelet-server"
	// bootstrapKeyFile keeps the private key of a pending bootstrap CSR,
	// so that a restart asks again with the same key (and finds its CSR).
	bootstrapKeyFile = "kubelet-client.key.tmp"
	// DefaultBootstrapTimeout is how long TLS bootstrapping waits for its
	// CSR to be approved and issued (upstream: one hour).
	DefaultBootstrapTimeout = time.Hour
)

// ErrCSRDenied is the class of a certificate signing request that was
// denied or failed.
var ErrCSRDenied = errors.New("certificate signing request denied")

// Bootstrap is TLS bootstrapping (--bootstrap-kubeconfig): the node gets
// its client certificate from the API server with a bootstrap token.
type Bootstrap struct {
	// Kubeconfig (--kubeconfig) is the node's kubeconfig; when it is
	// missing or its client certificate is not valid it is written anew,
	// pointing at <CertDir>/kubelet-client-current.pem.
	Kubeconfig string
	// BootstrapKubeconfig (--bootstrap-kubeconfig) has the API server and
	// the bootstrap token that may create the CSR.
	BootstrapKubeconfig string
	// CertDir (--cert-dir) receives the key and certificate.
	CertDir string
	// NodeName makes the certificate's subject: CN system:node:<NodeName>,
	// O system:nodes.
	NodeName string
	// Timeout bounds the wait for the CSR to be approved and issued;
	// default DefaultBootstrapTimeout.
	Timeout time.Duration
	// Now for the validity check of the current certificate; default
	// time.Now.
	Now func() time.Time
	Log *slog.Logger

	// newClientset builds the bootstrap client (tests give a fake).
	newClientset func(*rest.Config) (kubernetes.Interface, error)
}

// LoadClientCert makes sure b.Kubeconfig holds a valid client certificate,
// as upstream's bootstrap.LoadClientCert: if it does, nothing happens
// (bootstrapped false). Otherwise it creates a CSR with the bootstrap
// token (signer kubernetes.io/kube-apiserver-client-kubelet, CN
// system:node:<name>, O system:nodes, usages digital signature and client
// auth, an ECDSA P-256 key), waits until it is approved and issued, stores
// the pair in CertDir (kubelet-client-<timestamp>.pem and the
// kubelet-client-current.pem symlink) and writes b.Kubeconfig pointing at
// it, with the bootstrap kubeconfig's server and CA.
//
// Errors name what failed: the bootstrap kubeconfig (a missing file, no
// server, no credentials), the token (refused by the API server), a denied
// CSR (ErrCSRDenied, with its reason) or one not issued within the timeout
// (errdefs.ErrDeadlineExceeded, with the kubectl command that approves
// it).
func LoadClientCert(ctx context.Context, b Bootstrap) (bootstrapped bool, err error) {
	if b.Kubeconfig == "" || b.BootstrapKubeconfig == "" || b.CertDir == "" || b.NodeName == "" {
		return false, errors.New("TLS bootstrap needs the kubeconfig path, the bootstrap kubeconfig, the cert dir and the node name")
	}
	now, log := b.Now, b.Log
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	ok, why, err := ClientConfigValid(b.Kubeconfig, now())
	if err != nil {
		return false, err
	}
	if ok {
		log.Info("TLS bootstrap: the kubeconfig's client certificate is valid, not bootstrapping", "kubeconfig", b.Kubeconfig)
		return false, nil
	}
	log.Info("TLS bootstrap: requesting a client certificate with the bootstrap kubeconfig", "reason", why,
		"bootstrapKubeconfig", b.BootstrapKubeconfig, "certDir", b.CertDir)
	bcfg, err := loadBootstrapConfig(b.BootstrapKubeconfig)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(b.CertDir, 0o755); err != nil {
		return false, fmt.Errorf("cert dir: %w", err)
	}
	store, err := certificate.NewFileStore(ClientCertPrefix, b.CertDir, b.CertDir, "", "")
	if err != nil {
		return false, fmt.Errorf("client certificate store in %s: %w", b.CertDir, err)
	}
	keyPEM, keyPath, err := bootstrapKey(store, b.CertDir)
	if err != nil {
		return false, err
	}
	newCS := b.newClientset
	if newCS == nil {
		newCS = func(c *rest.Config) (kubernetes.Interface, error) { return kubernetes.NewForConfig(c) }
	}
	cs, err := newCS(bcfg)
	if err != nil {
		return false, fmt.Errorf("bootstrap client: %w", err)
	}
	timeout := b.Timeout
	if timeout <= 0 {
		timeout = DefaultBootstrapTimeout
	}
	ctx = klog.NewContext(ctx, klogFor(log, 0).WithName("csr")) // client-go's CSR logs to log
	certPEM, err := requestClientCert(ctx, cs, keyPEM, b.NodeName, timeout, b.BootstrapKubeconfig, log)
	if err != nil {
		return false, err
	}
	if _, err := store.Update(certPEM, keyPEM); err != nil {
		return false, fmt.Errorf("store the client certificate in %s: %w", b.CertDir, err)
	}
	if err := os.Remove(keyPath); err != nil && !os.IsNotExist(err) {
		log.Warn("TLS bootstrap: could not remove the pending key", "path", keyPath, "err", err)
	}
	if err := writeNodeKubeconfig(bcfg, b.Kubeconfig, store.CurrentPath()); err != nil {
		return false, err
	}
	log.Info("TLS bootstrap: client certificate issued", "cert", store.CurrentPath(), "kubeconfig", b.Kubeconfig)
	return true, nil
}

// ClientConfigValid tells whether the kubeconfig at path has a client
// certificate that has not expired at now; why says what is wrong when it
// has not. Only an unreadable file (not a missing one) is an error, as
// upstream.
func ClientConfigValid(path string, now time.Time) (ok bool, why string, err error) {
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return false, fmt.Sprintf("kubeconfig %s does not exist", path), nil
	} else if err != nil {
		return false, "", fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	cfg, err := loadKubeconfig(path)
	if err != nil {
		return false, fmt.Sprintf("kubeconfig %s cannot be loaded: %v", path, err), nil
	}
	tc, err := cfg.TransportConfig()
	if err != nil {
		return false, fmt.Sprintf("kubeconfig %s: %v", path, err), nil
	}
	// Reads the certificate and key files into tc.TLS.CertData and KeyData.
	if _, err := transport.TLSConfigFor(tc); err != nil {
		return false, fmt.Sprintf("kubeconfig %s: client certificate: %v", path, err), nil
	}
	if len(tc.TLS.CertData) == 0 {
		return false, fmt.Sprintf("kubeconfig %s has no client certificate", path), nil
	}
	certs, err := certutil.ParseCertsPEM(tc.TLS.CertData)
	if err != nil {
		return false, fmt.Sprintf("kubeconfig %s: client certificate: %v", path, err), nil
	}
	for _, c := range certs {
		if now.After(c.NotAfter) {
			return false, fmt.Sprintf("kubeconfig %s: client certificate expired at %s", path, c.NotAfter.UTC().Format(time.RFC3339)), nil
		}
	}
	return true, "", nil
}

// loadKubeconfig is the rest.Config of the kubeconfig's current context.
func loadKubeconfig(path string) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	raw, err := rules.Load()
	if err != nil {
		return nil, err
	}
	return clientcmd.NewNonInteractiveClientConfig(*raw, raw.CurrentContext, &clientcmd.ConfigOverrides{}, rules).ClientConfig()
}

// loadBootstrapConfig loads the bootstrap kubeconfig and checks it names
// a server and carries credentials.
func loadBootstrapConfig(path string) (*rest.Config, error) {
	cfg, err := loadKubeconfig(path)
	if err != nil {
		return nil, fmt.Errorf("bootstrap kubeconfig %s: %w", path, err)
	}
	if cfg.Host == "" {
		return nil, fmt.Errorf("bootstrap kubeconfig %s: no server in its current context's cluster", path)
	}
	if cfg.BearerToken == "" && cfg.BearerTokenFile == "" && len(cfg.CertData) == 0 && cfg.CertFile == "" &&
		cfg.ExecProvider == nil && cfg.AuthProvider == nil && cfg.Username == "" {
		return nil, fmt.Errorf("bootstrap kubeconfig %s: its user has no credentials (want a bootstrap token: users[].user.token)", path)
	}
	return cfg, nil
}

// bootstrapKey is the private key to request with, as upstream: the key
// of the stored pair if there is one, else the pending key file (made
// now if missing), so that a restart finds the CSR it already made.
func bootstrapKey(store certificate.FileStore, dir string) (keyPEM []byte, pendingPath string, err error) {
	pendingPath = filepath.Join(dir, bootstrapKeyFile)
	if cur, err := store.Current(); err == nil && cur.PrivateKey != nil {
		if b, err := keyutil.MarshalPrivateKeyToPEM(cur.PrivateKey); err == nil {
			if _, err := keyutil.ParsePrivateKeyPEM(b); err == nil {
				return b, pendingPath, nil
			}
		}
	}
	keyPEM, _, err = keyutil.LoadOrGenerateKeyFile(pendingPath)
	if err != nil {
		return nil, "", fmt.Errorf("bootstrap private key %s: %w", pendingPath, err)
	}
	return keyPEM, pendingPath, nil
}

// requestClientCert creates (or finds again) the node's client CSR and
// waits for its certificate.
func requestClientCert(ctx context.Context, cs kubernetes.Interface, keyPEM []byte, nodeName string, timeout time.Duration, bootstrapPath string, log *slog.Logger) ([]byte, error) {
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("bootstrap private key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("bootstrap private key: %T cannot sign", key)
	}
	subject := &pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}}
	csrPEM, err := certutil.MakeCSR(key, subject, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("make the certificate request: %w", err)
	}
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	if _, ok := key.(*rsa.PrivateKey); ok {
		usages = append(usages, certificatesv1.UsageKeyEncipherment)
	}
	name, err := csrName(signer.Public(), subject, usages)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	reqName, reqUID, err := csr.RequestCertificateWithContext(ctx, cs, csrPEM, name, certificatesv1.KubeAPIServerClientKubeletSignerName, nil, usages, key)
	if err != nil {
		err = classify(err)
		if errors.Is(err, errdefs.ErrForbidden) {
			return nil, fmt.Errorf("create CSR %s with the token of bootstrap kubeconfig %s (unknown or expired token, or no RBAC binding to system:node-bootstrapper): %w", name, bootstrapPath, err)
		}
		return nil, fmt.Errorf("create CSR %s with bootstrap kubeconfig %s: %w", name, bootstrapPath, err)
	}
	log.Info("TLS bootstrap: waiting for the CSR to be approved and issued", "csr", reqName,
		"signer", certificatesv1.KubeAPIServerClientKubeletSignerName, "timeout", timeout)
	certPEM, err := csr.WaitForCertificate(ctx, cs, reqName, reqUID)
	if err == nil {
		return certPEM, nil
	}
	return nil, csrFailed(ctx, cs, reqName, timeout, err)
}

// csrFailed explains why CSR name yielded no certificate: denied or
// failed (from its conditions), not issued in time, or the wait itself.
func csrFailed(ctx context.Context, cs kubernetes.Interface, name string, timeout time.Duration, waitErr error) error {
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if req, err := cs.CertificatesV1().CertificateSigningRequests().Get(gctx, name, metav1.GetOptions{}); err == nil {
		for _, c := range req.Status.Conditions {
			if c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
				return errdefs.Wrap(ErrCSRDenied, fmt.Errorf("CSR %s was %s: reason %q, message %q",
					name, strings.ToLower(string(c.Type)), c.Reason, c.Message))
			}
		}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errdefs.Wrap(errdefs.ErrDeadlineExceeded, fmt.Errorf(
			"CSR %s was not issued within %v (approve it: kubectl certificate approve %s; or check kube-controller-manager's csrapproving and csrsigning controllers)",
			name, timeout, name))
	}
	if ctx.Err() != nil {
		return fmt.Errorf("waiting for CSR %s: %w", name, ctx.Err())
	}
	return fmt.Errorf("waiting for CSR %s: %w", name, waitErr)
}

// csrName is the CSR's name, a digest of what it asks for (upstream's
// node-csr-<digest>), so that a restart with the same key finds it again.
func csrName(pub crypto.PublicKey, subject *pkix.Name, usages []certificatesv1.KeyUsage) (string, error) {
	h := sha512.New512_256()
	enc := base64.RawURLEncoding.EncodeToString
	write := func(b []byte) {
		h.Write([]byte(enc(b)))
		h.Write([]byte{'|'}) // not in the base64url alphabet: no two inputs write the same stream
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("public key: %w", err)
	}
	write(der)
	write([]byte(subject.CommonName))
	for _, o := range subject.Organization {
		write([]byte(o))
	}
	for _, u := range usages {
		write([]byte(u))
	}
	return "node-csr-" + enc(h.Sum(nil)), nil
}

// writeNodeKubeconfig writes the node's kubeconfig as upstream's
// bootstrap does: the bootstrap kubeconfig's server and CA, and the client
// certificate and key from pemPath (the -current symlink, so a rotated
// certificate needs no new kubeconfig).
func writeNodeKubeconfig(bcfg *rest.Config, path, pemPath string) error {
	caFile, caData := bcfg.CAFile, []byte(nil)
	if caFile == "" {
		caData = bcfg.CAData
	}
	kc := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"default-cluster": {
			Server:                   bcfg.Host,
			InsecureSkipTLSVerify:    bcfg.Insecure,
			CertificateAuthority:     caFile,
			CertificateAuthorityData: caData,
			TLSServerName:            bcfg.ServerName,
		}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"default-auth": {
			ClientCertificate: pemPath,
			ClientKey:         pemPath,
		}},
		Contexts: map[string]*clientcmdapi.Context{"default-context": {
			Cluster:   "default-cluster",
			AuthInfo:  "default-auth",
			Namespace: "default",
		}},
		CurrentContext: "default-context",
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	if err := clientcmd.WriteToFile(kc, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
