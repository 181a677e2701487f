package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/actorlet/actorlet/errdefs"
)

// testCA signs certificates as the cluster's CA would.
type testCA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-cluster-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

var serials = struct {
	sync.Mutex
	n int64
}{n: 100}

func nextSerial() *big.Int {
	serials.Lock()
	defer serials.Unlock()
	serials.n++
	return big.NewInt(serials.n)
}

// signCSR issues a certificate for a PEM CSR, valid from notBefore for
// life, as the controller manager's signer does.
func (ca *testCA) signCSR(t *testing.T, csrPEM []byte, usages []x509.ExtKeyUsage, notBefore time.Time, life time.Duration) []byte {
	t.Helper()
	block, _ := pem.Decode(csrPEM)
	if block == nil {
		t.Fatal("CSR is not PEM")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(), Subject: req.Subject, DNSNames: req.DNSNames, IPAddresses: req.IPAddresses,
		NotBefore: notBefore, NotAfter: notBefore.Add(life), ExtKeyUsage: usages, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, req.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// keyPair is a certificate for cn signed by the CA and its key, in PEM.
func (ca *testCA) keyPair(t *testing.T, cn string, notBefore time.Time, life time.Duration) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}},
		NotBefore: notBefore, NotAfter: notBefore.Add(life),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// csrPolicy is what the fake API server does with a new CSR.
type csrPolicy int

const (
	approveCSR csrPolicy = iota // approve and issue, as the controller manager for node client CSRs
	denyCSR                     // deny it
	leaveCSR                    // leave it pending
)

// fakeCSRServer is a clientset whose CSRs are approved and signed,
// denied or left pending when they are created.
func fakeCSRServer(t *testing.T, ca *testCA, policy csrPolicy) *fake.Clientset {
	t.Helper()
	cs := fake.NewClientset()
	cs.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		req := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		// Changed in place: the tracker's reactor stores it next.
		switch policy {
		case approveCSR:
			req.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{
				Type: certificatesv1.CertificateApproved, Status: "True", Reason: "AutoApproved"}}
			req.Status.Certificate = ca.signCSR(t, req.Spec.Request, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
				time.Now().Add(-5*time.Minute), time.Hour)
		case denyCSR:
			req.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{
				Type: certificatesv1.CertificateDenied, Status: "True", Reason: "NotOnThisCluster", Message: "node n1 is not expected"}}
		}
		return false, nil, nil
	})
	return cs
}

// writeKubeconfigFile writes a kubeconfig with server, the CA and a user.
func writeKubeconfigFile(t *testing.T, path, server string, caPEM []byte, user *clientcmdapi.AuthInfo) {
	t.Helper()
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: server, CertificateAuthorityData: caPEM}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": user},
		Contexts:       map[string]*clientcmdapi.Context{"x": {Cluster: "c", AuthInfo: "u"}},
		CurrentContext: "x",
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		t.Fatal(err)
	}
}

type bootstrapEnv struct {
	dir, kubeconfig, bootstrapKubeconfig, certDir string
	ca                                            *testCA
}

func newBootstrapEnv(t *testing.T) *bootstrapEnv {
	t.Helper()
	dir := t.TempDir()
	e := &bootstrapEnv{dir: dir, kubeconfig: filepath.Join(dir, "etc", "kubelet.conf"),
		bootstrapKubeconfig: filepath.Join(dir, "bootstrap-kubelet.conf"), certDir: filepath.Join(dir, "pki"), ca: newTestCA(t)}
	writeKubeconfigFile(t, e.bootstrapKubeconfig, "https://10.0.0.1:6443", e.ca.certPEM, &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"})
	return e
}

func (e *bootstrapEnv) bootstrap(cs kubernetes.Interface) Bootstrap {
	return Bootstrap{Kubeconfig: e.kubeconfig, BootstrapKubeconfig: e.bootstrapKubeconfig, CertDir: e.certDir,
		NodeName: "n1", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		newClientset: func(*rest.Config) (kubernetes.Interface, error) { return cs, nil }}
}

func csrsOf(t *testing.T, cs kubernetes.Interface) []certificatesv1.CertificateSigningRequest {
	t.Helper()
	l, err := cs.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func parseCSR(t *testing.T, b []byte) *x509.CertificateRequest {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("CSR request is not PEM")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

var timestampedPEM = regexp.MustCompile(`^kubelet-client-\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}\.pem$`)

// From a bootstrap token to the node's own kubeconfig: one CSR as
// upstream's (signer, subject, usages, P-256 key), the issued pair in the
// cert dir under the file store's names, and a kubeconfig that uses it;
// the next start does not bootstrap again.
func TestLoadClientCertBootstraps(t *testing.T) {
	e := newBootstrapEnv(t)
	cs := fakeCSRServer(t, e.ca, approveCSR)
	done, err := LoadClientCert(context.Background(), e.bootstrap(cs))
	if err != nil || !done {
		t.Fatalf("LoadClientCert: bootstrapped %v, %v", done, err)
	}

	csrs := csrsOf(t, cs)
	if len(csrs) != 1 {
		t.Fatalf("%d CSRs, want 1", len(csrs))
	}
	c := csrs[0]
	if c.Spec.SignerName != "kubernetes.io/kube-apiserver-client-kubelet" || !strings.HasPrefix(c.Name, "node-csr-") {
		t.Fatalf("CSR %s signer %s", c.Name, c.Spec.SignerName)
	}
	if !slices.Equal(c.Spec.Usages, []certificatesv1.KeyUsage{"digital signature", "client auth"}) {
		t.Fatalf("usages %v", c.Spec.Usages)
	}
	req := parseCSR(t, c.Spec.Request)
	if req.Subject.CommonName != "system:node:n1" || !slices.Equal(req.Subject.Organization, []string{"system:nodes"}) {
		t.Fatalf("subject %v", req.Subject)
	}
	if pub, ok := req.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Fatalf("key %T, want ECDSA P-256", req.PublicKey)
	}

	current := filepath.Join(e.certDir, "kubelet-client-current.pem")
	target, err := os.Readlink(current)
	if err != nil {
		t.Fatalf("kubelet-client-current.pem is not a symlink: %v", err)
	}
	if !timestampedPEM.MatchString(filepath.Base(target)) {
		t.Fatalf("current -> %s, want kubelet-client-<timestamp>.pem", target)
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v, want mode 600", target, fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(e.certDir, "kubelet-client.key.tmp")); !os.IsNotExist(err) {
		t.Fatalf("the pending key is left behind: %v", err)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://10.0.0.1:6443" || string(cfg.CAData) != string(e.ca.certPEM) {
		t.Fatalf("kubeconfig server %s, CA from the bootstrap kubeconfig: %v", cfg.Host, string(cfg.CAData) == string(e.ca.certPEM))
	}
	if cfg.CertFile != current || cfg.KeyFile != current || cfg.BearerToken != "" {
		t.Fatalf("kubeconfig credentials: cert %s key %s token %q, want %s for both and no token", cfg.CertFile, cfg.KeyFile, cfg.BearerToken, current)
	}
	if ok, why, err := ClientConfigValid(e.kubeconfig, time.Now()); !ok || err != nil {
		t.Fatalf("the written kubeconfig is not valid: %s %v", why, err)
	}

	done, err = LoadClientCert(context.Background(), e.bootstrap(cs))
	if err != nil || done {
		t.Fatalf("second start: bootstrapped %v, %v; want no bootstrap", done, err)
	}
	if n := len(csrsOf(t, cs)); n != 1 {
		t.Fatalf("second start made a CSR: %d", n)
	}
}

// An expired client certificate in the kubeconfig bootstraps again.
func TestLoadClientCertReplacesExpiredCertificate(t *testing.T) {
	e := newBootstrapEnv(t)
	certPEM, keyPEM := e.ca.keyPair(t, "system:node:n1", time.Now().Add(-2*time.Hour), time.Hour)
	writeKubeconfigFile(t, e.kubeconfig, "https://10.0.0.1:6443", e.ca.certPEM,
		&clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM})
	cs := fakeCSRServer(t, e.ca, approveCSR)
	done, err := LoadClientCert(context.Background(), e.bootstrap(cs))
	if err != nil || !done {
		t.Fatalf("bootstrapped %v, %v; want a new certificate", done, err)
	}
	if ok, why, _ := ClientConfigValid(e.kubeconfig, time.Now()); !ok {
		t.Fatalf("kubeconfig still not valid: %s", why)
	}
}

// A restart while the CSR is pending asks with the same key, finds the
// same CSR and gets its certificate once it is approved.
func TestLoadClientCertFindsItsPendingCSR(t *testing.T) {
	e := newBootstrapEnv(t)
	cs := fakeCSRServer(t, e.ca, leaveCSR)
	b := e.bootstrap(cs)
	b.Timeout = 200 * time.Millisecond
	if _, err := LoadClientCert(context.Background(), b); !errors.Is(err, errdefs.ErrDeadlineExceeded) {
		t.Fatalf("pending CSR: %v, want a deadline error", err)
	}
	csrs := csrsOf(t, cs)
	if len(csrs) != 1 {
		t.Fatalf("%d CSRs", len(csrs))
	}
	// An admin approves it; the signer issues it.
	c := csrs[0]
	c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: "True"}}
	c.Status.Certificate = e.ca.signCSR(t, c.Spec.Request, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, time.Now(), time.Hour)
	if _, err := cs.CertificatesV1().CertificateSigningRequests().UpdateStatus(context.Background(), &c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.Timeout = 0
	done, err := LoadClientCert(context.Background(), b)
	if err != nil || !done {
		t.Fatalf("after approval: bootstrapped %v, %v", done, err)
	}
	if n := len(csrsOf(t, cs)); n != 1 {
		t.Fatalf("%d CSRs after the restart, want the same one", n)
	}
}

// Errors name what is wrong and leave no kubeconfig behind.
func TestLoadClientCertErrors(t *testing.T) {
	unauthorized := func(t *testing.T, _ *testCA) kubernetes.Interface {
		cs := fake.NewClientset()
		cs.PrependReactor("create", "certificatesigningrequests", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewUnauthorized("Unauthorized")
		})
		return cs
	}
	withPolicy := func(p csrPolicy) func(*testing.T, *testCA) kubernetes.Interface {
		return func(t *testing.T, ca *testCA) kubernetes.Interface { return fakeCSRServer(t, ca, p) }
	}
	tests := []struct {
		name      string
		bootstrap func(t *testing.T, path string, ca *testCA) // rewrites the bootstrap kubeconfig; nil keeps the good one
		server    func(*testing.T, *testCA) kubernetes.Interface
		timeout   time.Duration
		class     error
		want      []string
	}{
		{name: "missing bootstrap kubeconfig",
			bootstrap: func(t *testing.T, path string, _ *testCA) { _ = os.Remove(path) },
			server:    withPolicy(approveCSR), want: []string{"bootstrap kubeconfig", "bootstrap-kubelet.conf", "no such file"}},
		{name: "not a kubeconfig",
			bootstrap: func(t *testing.T, path string, _ *testCA) { _ = os.WriteFile(path, []byte("{{{ not yaml"), 0o600) },
			server:    withPolicy(approveCSR), want: []string{"bootstrap kubeconfig", "bootstrap-kubelet.conf"}},
		{name: "no server",
			bootstrap: func(t *testing.T, path string, ca *testCA) {
				writeKubeconfigFile(t, path, "", ca.certPEM, &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"})
			},
			server: withPolicy(approveCSR), want: []string{"bootstrap-kubelet.conf"}},
		{name: "no credentials",
			bootstrap: func(t *testing.T, path string, ca *testCA) {
				writeKubeconfigFile(t, path, "https://10.0.0.1:6443", ca.certPEM, &clientcmdapi.AuthInfo{})
			},
			server: withPolicy(approveCSR), want: []string{"bootstrap-kubelet.conf", "no credentials", "users[].user.token"}},
		{name: "token refused", server: unauthorized, class: errdefs.ErrForbidden,
			want: []string{"create CSR node-csr-", "unknown or expired token", "Unauthorized"}},
		{name: "denied", server: withPolicy(denyCSR), class: ErrCSRDenied,
			want: []string{"was denied", "NotOnThisCluster", "node n1 is not expected"}},
		{name: "never approved", server: withPolicy(leaveCSR), timeout: 100 * time.Millisecond, class: errdefs.ErrDeadlineExceeded,
			want: []string{"not issued within 100ms", "kubectl certificate approve node-csr-"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newBootstrapEnv(t)
			if tt.bootstrap != nil {
				tt.bootstrap(t, e.bootstrapKubeconfig, e.ca)
			}
			b := e.bootstrap(tt.server(t, e.ca))
			b.Timeout = tt.timeout
			done, err := LoadClientCert(context.Background(), b)
			if err == nil || done {
				t.Fatalf("bootstrapped %v, err nil; want an error", done)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if tt.class != nil && !errors.Is(err, tt.class) {
				t.Errorf("error %q is not of class %v", err, tt.class)
			}
			if _, err := os.Stat(e.kubeconfig); !os.IsNotExist(err) {
				t.Errorf("a kubeconfig was written: %v", err)
			}
		})
	}
}

func TestLoadClientCertNeedsItsPaths(t *testing.T) {
	if _, err := LoadClientCert(context.Background(), Bootstrap{Kubeconfig: "/k"}); err == nil {
		t.Fatal("no error without the bootstrap kubeconfig, cert dir and node name")
	}
}

func TestClientConfigValid(t *testing.T) {
	ca := newTestCA(t)
	now := time.Now()
	tests := []struct {
		name  string
		write func(t *testing.T, path string)
		ok    bool
		why   string
	}{
		{name: "missing", write: func(*testing.T, string) {}, why: "does not exist"},
		{name: "not a kubeconfig", write: func(t *testing.T, p string) { _ = os.WriteFile(p, []byte("{{{"), 0o600) }, why: "cannot be loaded"},
		{name: "token only", write: func(t *testing.T, p string) {
			writeKubeconfigFile(t, p, "https://h:6443", ca.certPEM, &clientcmdapi.AuthInfo{Token: "t"})
		}, why: "no client certificate"},
		{name: "missing certificate file", write: func(t *testing.T, p string) {
			writeKubeconfigFile(t, p, "https://h:6443", ca.certPEM, &clientcmdapi.AuthInfo{ClientCertificate: "/nonexistent/c.pem", ClientKey: "/nonexistent/c.pem"})
		}, why: "/nonexistent/c.pem"},
		{name: "expired", write: func(t *testing.T, p string) {
			c, k := ca.keyPair(t, "system:node:n1", now.Add(-2*time.Hour), time.Hour)
			writeKubeconfigFile(t, p, "https://h:6443", ca.certPEM, &clientcmdapi.AuthInfo{ClientCertificateData: c, ClientKeyData: k})
		}, why: "expired at"},
		{name: "valid", write: func(t *testing.T, p string) {
			c, k := ca.keyPair(t, "system:node:n1", now.Add(-time.Minute), time.Hour)
			writeKubeconfigFile(t, p, "https://h:6443", ca.certPEM, &clientcmdapi.AuthInfo{ClientCertificateData: c, ClientKeyData: k})
		}, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "kubelet.conf")
			tt.write(t, p)
			ok, why, err := ClientConfigValid(p, now)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.ok || !strings.Contains(why, tt.why) {
				t.Fatalf("ok %v why %q; want %v and %q", ok, why, tt.ok, tt.why)
			}
		})
	}
}
