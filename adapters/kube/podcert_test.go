package kube

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/actorlet/actorlet/errdefs"
)

// TestGenerateKeyTypes: each key type gives a PKCS#8 key of that type and a
// stub CSR signed by it, with the same public key.
func TestGenerateKeyTypes(t *testing.T) {
	for _, kt := range KeyTypes {
		t.Run(kt, func(t *testing.T) {
			keyPEM, csrDER, err := GenerateKey(kt)
			if err != nil {
				t.Fatal(err)
			}
			b, rest := pem.Decode(keyPEM)
			if b == nil || b.Type != "PRIVATE KEY" || len(rest) != 0 {
				t.Fatalf("key PEM %q", keyPEM)
			}
			key, err := x509.ParsePKCS8PrivateKey(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			switch k := key.(type) {
			case *rsa.PrivateKey:
				if want := map[string]int{"RSA3072": 3072, "RSA4096": 4096}[kt]; k.N.BitLen() != want {
					t.Fatalf("%s: %d bits", kt, k.N.BitLen())
				}
			case *ecdsa.PrivateKey:
				if want := map[string]string{"ECDSAP256": "P-256", "ECDSAP384": "P-384", "ECDSAP521": "P-521"}[kt]; k.Curve.Params().Name != want {
					t.Fatalf("%s: curve %s", kt, k.Curve.Params().Name)
				}
			case ed25519.PrivateKey:
				if kt != "ED25519" {
					t.Fatalf("%s: an ed25519 key", kt)
				}
			default:
				t.Fatalf("%s: key %T", kt, key)
			}
			csr, err := x509.ParseCertificateRequest(csrDER)
			if err != nil {
				t.Fatal(err)
			}
			if err := csr.CheckSignature(); err != nil {
				t.Fatalf("stub CSR signature: %v", err)
			}
			pub := key.(crypto.Signer).Public()
			if !pub.(interface{ Equal(crypto.PublicKey) bool }).Equal(csr.PublicKey) {
				t.Fatal("the CSR's public key is not the key's")
			}
			if csr.Subject.String() != "" || len(csr.DNSNames) != 0 {
				t.Fatalf("stub CSR not empty: %v %v", csr.Subject, csr.DNSNames)
			}
		})
	}
	if _, _, err := GenerateKey("DSA"); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), `unknown key type "DSA"`) {
		t.Fatalf("unknown key type: %v", err)
	}
}

func TestNormalizeAnchors(t *testing.T) {
	a := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("a")})
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"k": "v"}, Bytes: []byte("b")})
	plainB := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("b")})
	got := NormalizeAnchors("x\n" + string(b) + "between\n" + string(a) + string(b))
	if want := string(a) + string(plainB); string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := NormalizeAnchors(""); got == nil || len(got) != 0 {
		t.Fatalf("empty bundle: %q", got)
	}
}
