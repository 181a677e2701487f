package httpapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Names of the self-signed serving certificate in --cert-dir, as upstream.
const (
	SelfSignedCertName = "kubelet.crt"
	SelfSignedKeyName  = "kubelet.key"
	selfSignedValidity = 365 * 24 * time.Hour // upstream: one year
)

// ServingCert says where the node API's serving certificate comes from.
type ServingCert struct {
	// CertFile and KeyFile (--tls-cert-file, --tls-private-key-file): used
	// as they are when set (both or neither).
	CertFile, KeyFile string
	// Dir (--cert-dir) holds kubelet.crt and kubelet.key when CertFile and
	// KeyFile are empty: made once, self-signed, then reused.
	Dir string
	// Hosts and IPs are the self-signed certificate's subject alternative
	// names (the hostname, the node name, the node's IPs).
	Hosts []string
	IPs   []net.IP
	// Now for the certificate's validity; default time.Now.
	Now func() time.Time
}

// Load returns the serving key pair, making the self-signed one when it
// is needed and missing. generated tells whether it was made now; path is
// the certificate file.
func (s ServingCert) Load() (cert tls.Certificate, path string, generated bool, err error) {
	if (s.CertFile == "") != (s.KeyFile == "") {
		return tls.Certificate{}, "", false, errors.New("--tls-cert-file and --tls-private-key-file go together")
	}
	if s.CertFile != "" {
		cert, err = tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return tls.Certificate{}, "", false, fmt.Errorf("serving certificate %s / %s: %w", s.CertFile, s.KeyFile, err)
		}
		return cert, s.CertFile, false, nil
	}
	if s.Dir == "" {
		return tls.Certificate{}, "", false, errors.New("no serving certificate: set --tls-cert-file and --tls-private-key-file, or --cert-dir")
	}
	certPath, keyPath := filepath.Join(s.Dir, SelfSignedCertName), filepath.Join(s.Dir, SelfSignedKeyName)
	if readable(certPath) && readable(keyPath) {
		// As upstream: readable files are reused as they are.
		cert, err = tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			return tls.Certificate{}, "", false, fmt.Errorf("self-signed serving certificate %s / %s: %w (remove both files to make new ones)", certPath, keyPath, err)
		}
		return cert, certPath, false, nil
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	certPEM, keyPEM, err := SelfSignedCert(s.Hosts, s.IPs, now())
	if err != nil {
		return tls.Certificate{}, "", false, err
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return tls.Certificate{}, "", false, fmt.Errorf("cert dir: %w", err)
	}
	if err := writeAtomic(keyPath, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, "", false, err
	}
	if err := writeAtomic(certPath, certPEM, 0o644); err != nil {
		return tls.Certificate{}, "", false, err
	}
	cert, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, "", false, fmt.Errorf("self-signed serving certificate: %w", err)
	}
	return cert, certPath, true, nil
}

func readable(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	_ = f.Close()
	return true
}

func writeAtomic(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// SelfSignedCert makes a self-signed ECDSA P-256 serving certificate
// valid for a year from now, for hosts and ips (the first host is the
// subject's common name), in PEM.
func SelfSignedCert(hosts []string, ips []net.IP, now time.Time) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 && len(ips) == 0 {
		return nil, nil, errors.New("self-signed certificate: no host name or IP")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, fmt.Errorf("serial: %w", err)
	}
	cn := ""
	if len(hosts) > 0 {
		cn = hosts[0]
	} else {
		cn = ips[0].String()
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", cn, now.Unix())},
		NotBefore:             now.Add(-time.Hour).UTC(),
		NotAfter:              now.Add(selfSignedValidity).UTC(),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // its own issuer, so a client can pin it as a root
	}
	seen := map[string]bool{}
	for _, h := range hosts {
		if h == "" || seen[h] {
			continue
		}
		seen[h] = true
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			continue
		}
		tmpl.DNSNames = append(tmpl.DNSNames, h)
	}
	for _, ip := range ips {
		if ip == nil || slices.ContainsFunc(tmpl.IPAddresses, ip.Equal) {
			continue
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// LoadClientCAs reads a PEM bundle of CA certificates (--client-ca-file).
func LoadClientCAs(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("client CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("client CA file %s: no PEM certificate in it", path)
	}
	return pool, nil
}

// TLSConfig is the node API's TLS: TLS 1.2 or newer, client certificates
// requested (and verified by Auth, not by the handshake, as upstream), so
// a request without one still reaches the authenticator.
func TLSConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequestClientCert,
		NextProtos:   []string{"h2", "http/1.1"},
	}
}

// ErrNoServingCert is the handshake error of a node API whose serving
// certificate is not issued yet.
var ErrNoServingCert = errors.New("no serving certificate available for the node API yet (its kubernetes.io/kubelet-serving CSR awaits approval: kubectl get csr; kubectl certificate approve <name>)")

// TLSConfigFunc is TLSConfig with a certificate that changes (the serving
// certificate from the cluster, renewed before it expires): current is
// asked at each handshake, so a new certificate is served from the next
// connection on. While current returns nil every handshake fails with
// ErrNoServingCert, as upstream's kubelet serves nothing before its
// serving certificate is issued.
func TLSConfigFunc(current func() *tls.Certificate) *tls.Config {
	cfg := TLSConfig(tls.Certificate{})
	cfg.Certificates = nil
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if c := current(); c != nil {
			return c, nil
		}
		return nil, ErrNoServingCert
	}
	return cfg
}

// ListenAndServeTLS is ListenAndServe over TLS with cfg.
func (s *Server) ListenAndServeTLS(ctx context.Context, addr string, h http.Handler, cfg *tls.Config) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	return s.Serve(ctx, tls.NewListener(ln, cfg), h)
}
