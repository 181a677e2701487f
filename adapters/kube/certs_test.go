package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/certificate"

	"github.com/actorlet/actorlet/internal/actortest"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// tlsAPIServer is an HTTPS server that requires a client certificate and
// answers /version with the serial of the one presented; it counts the
// connections it accepted.
type tlsAPIServer struct {
	*httptest.Server
	conns atomic.Int32
}

func newTLSAPIServer(t *testing.T) *tlsAPIServer {
	t.Helper()
	s := &tlsAPIServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serial := "none"
		if len(r.TLS.PeerCertificates) > 0 {
			serial = r.TLS.PeerCertificates[0].SerialNumber.String()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"gitVersion": serial})
	}))
	s.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *tlsAPIServer) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}

// memStore is a certificate store in memory.
type memStore struct {
	mu  sync.Mutex
	cur *tls.Certificate
}

var _ certificate.Store = (*memStore)(nil)

func (m *memStore) Current() (*tls.Certificate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == nil {
		e := certificate.NoCertKeyError("none")
		return nil, &e
	}
	return m.cur, nil
}

func (m *memStore) Update(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cur = &c
	return &c, nil
}

func serialOf(t *testing.T, certPEM []byte) string {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.String()
}

// After a new certificate is stored, the very next request presents it:
// the transport closed its kept-alive connection and handshook again.
func TestRotatingTransportPresentsTheNewCertificate(t *testing.T) {
	srv := newTLSAPIServer(t)
	ca := newTestCA(t)
	rt := &rotatingTransport{log: discard}
	cfg, err := rt.config(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: srv.caPEM()}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := newFromConfig(cfg, "n1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	store := &notifyingStore{Store: &memStore{}, updated: rt.rotated}

	ctx := context.Background()
	if got, err := c.Check(ctx); err == nil {
		t.Fatalf("without a certificate the server accepted the handshake (serial %s)", got)
	}
	certA, keyA := ca.keyPair(t, "system:node:n1", time.Now().Add(-time.Minute), time.Hour)
	if _, err := store.Update(certA, keyA); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // kept alive: one connection for all three
		if got, err := c.Check(ctx); err != nil || got != serialOf(t, certA) {
			t.Fatalf("request %d with certificate A: serial %q, %v; want %s", i, got, err, serialOf(t, certA))
		}
	}
	before := srv.conns.Load()

	certB, keyB := ca.keyPair(t, "system:node:n1", time.Now().Add(-time.Minute), time.Hour)
	if _, err := store.Update(certB, keyB); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Check(ctx); err != nil || got != serialOf(t, certB) {
		t.Fatalf("after rotation: serial %q, %v; want the new certificate's %s", got, err, serialOf(t, certB))
	}
	if after := srv.conns.Load(); after != before+1 {
		t.Fatalf("connections %d -> %d: want exactly one new connection after the rotation", before, after)
	}
}

func TestRotatingTransportRefusesPlainHTTP(t *testing.T) {
	rt := &rotatingTransport{log: discard}
	if _, err := rt.config(&rest.Config{Host: "http://127.0.0.1:8080"}); err == nil {
		t.Fatal("plain HTTP accepted for certificate rotation")
	}
}

// NewRotating starts from the newest certificate in the cert dir, not the
// kubeconfig's (as upstream: the store wins), and talks to the server
// named by the kubeconfig with it.
func TestNewRotatingUsesTheStoredCertificate(t *testing.T) {
	srv := newTLSAPIServer(t)
	ca := newTestCA(t)
	dir := t.TempDir()
	certDir := filepath.Join(dir, "pki")
	// The kubeconfig's own certificate, as a hand-made node kubeconfig.
	oldCert, oldKey := ca.keyPair(t, "system:node:n1", time.Now().Add(-time.Minute), 24*time.Hour)
	kubeconfig := filepath.Join(dir, "kubelet.conf")
	writeKubeconfigFile(t, kubeconfig, srv.URL, srv.caPEM(), &clientcmdapi.AuthInfo{ClientCertificateData: oldCert, ClientKeyData: oldKey})
	// A certificate rotated earlier: long-lived, so no rotation is due
	// during the test.
	store, err := certificate.NewFileStore(ClientCertPrefix, certDir, certDir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	newCert, newKey := ca.keyPair(t, "system:node:n1", time.Now().Add(-time.Minute), 24*time.Hour)
	if _, err := store.Update(newCert, newKey); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := NewRotating(ctx, "n1", Options{Kubeconfig: kubeconfig}, Rotation{CertDir: certDir, Log: discard})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Check(ctx); err != nil || got != serialOf(t, newCert) {
		t.Fatalf("serial %q, %v; want the stored certificate's %s (the kubeconfig's is %s)", got, err, serialOf(t, newCert), serialOf(t, oldCert))
	}
}

func TestNewRotatingErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		o    Options
		r    Rotation
	}{
		{name: "no kubeconfig", r: Rotation{CertDir: dir}},
		{name: "no cert dir", o: Options{Kubeconfig: filepath.Join(dir, "k")}},
		{name: "missing kubeconfig", o: Options{Kubeconfig: filepath.Join(dir, "missing")}, r: Rotation{CertDir: dir}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewRotating(context.Background(), "n1", tt.o, tt.r); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// The serving certificate: a kubernetes.io/kubelet-serving CSR for the
// node's names and IPs is made; nothing is served until it is approved
// and issued; then the issued certificate is current and stored as
// kubelet-server-current.pem.
func TestServingCertificatesFromACSR(t *testing.T) {
	ca := newTestCA(t)
	cs := fake.NewClientset()
	c := NewForClientset(cs, "n1")
	certDir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := c.ServingCertificates(ctx, ServingOptions{NodeName: "n1", CertDir: certDir,
		Hostnames: []string{"n1", "host-a", "n1"}, IPs: []net.IP{net.ParseIP("10.0.0.7"), net.ParseIP("127.0.0.1")}, Log: discard})
	if err != nil {
		t.Fatal(err)
	}
	if s.Current() != nil {
		t.Fatal("a serving certificate before any was issued")
	}
	s.Start()

	var req certificatesv1.CertificateSigningRequest
	actortest.EventuallyWithin(t, 30*time.Second, "a kubelet-serving CSR", func() bool {
		l, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) == 0 {
			return false
		}
		req = l.Items[0]
		return true
	})
	if req.Spec.SignerName != "kubernetes.io/kubelet-serving" {
		t.Fatalf("signer %s", req.Spec.SignerName)
	}
	if !slices.Equal(req.Spec.Usages, []certificatesv1.KeyUsage{"digital signature", "server auth"}) {
		t.Fatalf("usages %v", req.Spec.Usages)
	}
	x := parseCSR(t, req.Spec.Request)
	var ips []string
	for _, ip := range x.IPAddresses {
		ips = append(ips, ip.String())
	}
	if x.Subject.CommonName != "system:node:n1" || !slices.Equal(x.Subject.Organization, []string{"system:nodes"}) ||
		!slices.Equal(x.DNSNames, []string{"host-a", "n1"}) || !slices.Equal(ips, []string{"10.0.0.7", "127.0.0.1"}) {
		t.Fatalf("request subject %v DNS %v IPs %v", x.Subject, x.DNSNames, ips)
	}
	if s.Current() != nil {
		t.Fatal("served before approval")
	}

	// An admin approves (kubectl certificate approve); the signer issues.
	req.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: "True"}}
	issued := ca.signCSR(t, req.Spec.Request, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, time.Now().Add(-time.Minute), 24*time.Hour)
	req.Status.Certificate = issued
	if _, err := cs.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, &req, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	actortest.EventuallyWithin(t, 30*time.Second, "the issued serving certificate", func() bool { return s.Current() != nil })
	if got := s.Current().Leaf.SerialNumber.String(); got != serialOf(t, issued) {
		t.Fatalf("current serial %s, want the issued %s", got, serialOf(t, issued))
	}
	if _, err := os.Stat(filepath.Join(certDir, "kubelet-server-current.pem")); err != nil {
		t.Fatalf("not stored: %v", err)
	}
}

func TestServingTemplate(t *testing.T) {
	tests := []struct {
		name      string
		hostnames []string
		ips       []net.IP
		wantNil   bool
		wantDNS   []string
		wantIPs   int
	}{
		{name: "no IP: nothing requested, as upstream", hostnames: []string{"n1"}, wantNil: true},
		{name: "names sorted and deduplicated, IPs in hostnames dropped", hostnames: []string{"n1", "b", "n1", "10.0.0.9", ""},
			ips: []net.IP{net.ParseIP("10.0.0.7"), net.ParseIP("10.0.0.7"), nil}, wantDNS: []string{"b", "n1"}, wantIPs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := servingTemplate("n1", tt.hostnames, tt.ips)
			if tt.wantNil {
				if got != nil {
					t.Fatalf("template %+v, want none", got)
				}
				return
			}
			if got == nil || !slices.Equal(got.DNSNames, tt.wantDNS) || len(got.IPAddresses) != tt.wantIPs {
				t.Fatalf("template %+v", got)
			}
		})
	}
}
