package httpapi

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSelfSignedServingCertMadeOnceAndReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	sc := ServingCert{Dir: dir, Hosts: []string{"n1", "host-a"}, IPs: []net.IP{net.ParseIP("10.0.0.7"), net.ParseIP("127.0.0.1")},
		Now: func() time.Time { return now }}
	cert, path, generated, err := sc.Load()
	if err != nil {
		t.Fatal(err)
	}
	if !generated || path != filepath.Join(dir, SelfSignedCertName) {
		t.Fatalf("generated %v path %s", generated, path)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(leaf.DNSNames, []string{"n1", "host-a"}) {
		t.Fatalf("DNS SANs %v", leaf.DNSNames)
	}
	var ips []string
	for _, ip := range leaf.IPAddresses {
		ips = append(ips, ip.String())
	}
	if !slices.Equal(ips, []string{"10.0.0.7", "127.0.0.1"}) {
		t.Fatalf("IP SANs %v", ips)
	}
	if !leaf.NotAfter.After(now.Add(364*24*time.Hour)) || leaf.NotBefore.After(now) {
		t.Fatalf("validity %s - %s", leaf.NotBefore, leaf.NotAfter)
	}
	// A client that pins kubelet.crt verifies the node by its IP and name.
	pem, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	for _, name := range []string{"10.0.0.7", "n1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, CurrentTime: now}); err != nil {
			t.Fatalf("verify as %s: %v", name, err)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, SelfSignedKeyName)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}

	// Next start: the same files, nothing made.
	sc.Hosts = []string{"renamed"}
	cert2, _, generated2, err := sc.Load()
	if err != nil {
		t.Fatal(err)
	}
	if generated2 || !bytes.Equal(cert2.Certificate[0], cert.Certificate[0]) {
		t.Fatalf("certificate was not reused (generated=%v)", generated2)
	}
}

func TestServingCertErrors(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM, err := SelfSignedCert([]string{"a"}, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := SelfSignedCert([]string{"b"}, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	certFile, keyFile, wrongKey := write("c.crt", certPEM), write("c.key", keyPEM), write("o.key", otherKey)
	badDir := filepath.Join(dir, "bad")
	if err := os.MkdirAll(badDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(badDir, SelfSignedCertName), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(badDir, SelfSignedKeyName), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		sc      ServingCert
		wantErr string
	}{
		{name: "explicit files", sc: ServingCert{CertFile: certFile, KeyFile: keyFile}},
		{name: "only the cert", sc: ServingCert{CertFile: certFile}, wantErr: "go together"},
		{name: "key does not match", sc: ServingCert{CertFile: certFile, KeyFile: wrongKey}, wantErr: "serving certificate"},
		{name: "missing file", sc: ServingCert{CertFile: certFile, KeyFile: filepath.Join(dir, "nope")}, wantErr: "no such file"},
		{name: "corrupt self-signed", sc: ServingCert{Dir: badDir, Hosts: []string{"a"}}, wantErr: "remove both files"},
		{name: "no dir", sc: ServingCert{}, wantErr: "--cert-dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, err := tt.sc.Load()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestLoadClientCAs(t *testing.T) {
	dir := t.TempDir()
	certPEM, _, err := SelfSignedCert([]string{"ca"}, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	good, bad := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "bad.crt")
	if err := os.WriteFile(good, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("not pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadClientCAs(good); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadClientCAs(bad); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("bad bundle: %v", err)
	}
	if _, err := LoadClientCAs(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing bundle: no error")
	}
}

func TestTLSConfigRequestsButDoesNotRequireClientCerts(t *testing.T) {
	c := TLSConfig(tls.Certificate{})
	if c.ClientAuth != tls.RequestClientCert || c.MinVersion != tls.VersionTLS12 {
		t.Fatalf("client auth %v, min version %x", c.ClientAuth, c.MinVersion)
	}
}
