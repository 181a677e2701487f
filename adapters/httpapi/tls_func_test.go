package httpapi

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A node API whose serving certificate changes: no handshake succeeds
// before there is one (the error says how to get it), then each new
// connection gets the current one.
func TestTLSConfigFuncServesTheCurrentCertificate(t *testing.T) {
	var current atomic.Pointer[tls.Certificate]
	ln, err := tls.Listen("tcp", "127.0.0.1:0", TLSConfigFunc(current.Load))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	serverErrs := make(chan error, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			serverErrs <- c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	dial := func() (*x509.Certificate, error) {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // the test reads the peer certificate
		if err != nil {
			return nil, err
		}
		defer func() { _ = c.Close() }()
		return c.ConnectionState().PeerCertificates[0], nil
	}

	if _, err := dial(); err == nil {
		t.Fatal("handshake succeeded without a serving certificate")
	}
	if err := <-serverErrs; !errors.Is(err, ErrNoServingCert) || !strings.Contains(err.Error(), "kubectl certificate approve") {
		t.Fatalf("server handshake error %v, want ErrNoServingCert", err)
	}

	for i, host := range []string{"first", "second"} {
		certPEM, keyPEM, err := SelfSignedCert([]string{host}, nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		current.Store(&c)
		peer, err := dial()
		if err != nil {
			t.Fatalf("certificate %d: %v", i, err)
		}
		if err := <-serverErrs; err != nil {
			t.Fatalf("certificate %d: server handshake %v", i, err)
		}
		if len(peer.DNSNames) != 1 || peer.DNSNames[0] != host {
			t.Fatalf("certificate %d: served %v, want %s", i, peer.DNSNames, host)
		}
	}
}
