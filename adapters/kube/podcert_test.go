package kube

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/podspec"
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

// TestPodCertificatesCreateAndWatch: the request names the pod, its service
// account's UID and the node's UID, is owned by the pod, and a status
// change of it reaches the OnChange hook and Get.
func TestPodCertificatesCreateAndWatch(t *testing.T) {
	cs := fake.NewClientset(
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}},
		&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sa", UID: "sa-uid"}},
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := NewForClientset(cs, "n1").NewPodCertificates(ctx)
	changed := make(chan types.UID, 8)
	p.OnChange(func(uid types.UID) { changed <- uid })
	exp := int32(3600)
	pcr, keyPEM, err := p.Create(ctx, podspec.PodCertificateRequest{Namespace: "ns", PodName: "p", PodUID: "pod-uid", ServiceAccount: "sa",
		SignerName: "example.com/s", KeyType: "ED25519", MaxExpiration: &exp, UserAnnotations: map[string]string{"example.com/a": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	s := pcr.Spec
	if s.PodUID != "pod-uid" || s.ServiceAccountUID != "sa-uid" || s.NodeName != "n1" || s.NodeUID != "node-uid" || *s.MaxExpirationSeconds != 3600 ||
		s.UnverifiedUserAnnotations["example.com/a"] != "b" || len(pcr.OwnerReferences) != 1 || pcr.OwnerReferences[0].UID != "pod-uid" || pcr.GenerateName != "req-" {
		t.Fatalf("request %+v", pcr)
	}
	if b, _ := pem.Decode(keyPEM); b == nil || b.Type != "PRIVATE KEY" {
		t.Fatalf("key %q", keyPEM)
	}
	// The fake API server does not generate names.
	pcr.Name = "req-1"
	if _, err := cs.CertificatesV1().PodCertificateRequests("ns").Create(ctx, pcr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The request p created (nameless in the fake) is a change too, so
	// every change is read until req-1 is among them.
	timeout := time.After(10 * time.Second)
	for seen := false; !seen; {
		select {
		case uid := <-changed:
			if uid != "pod-uid" {
				t.Fatalf("change of %s", uid)
			}
			got, err := p.Get(ctx, "ns", "req-1")
			if err != nil && !errdefs.IsNotFound(err) {
				t.Fatalf("get: %v", err)
			}
			if err == nil {
				if got.Spec.PodUID != "pod-uid" {
					t.Fatalf("get: %+v", got.Spec)
				}
				seen = true
			}
		case <-timeout:
			t.Fatal("no change of req-1 seen")
		}
	}
	if _, err := p.Get(ctx, "ns", "nope"); !errdefs.IsNotFound(err) {
		t.Fatalf("get of a missing request: %v", err)
	}
	// A missing service account is a clear error, nothing created.
	if _, _, err := p.Create(ctx, podspec.PodCertificateRequest{Namespace: "ns", PodName: "p", ServiceAccount: "nope", KeyType: "ED25519"}); !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "serviceaccount ns/nope") {
		t.Fatalf("missing service account: %v", err)
	}
}

func TestTrustBundlesByNameAndSigner(t *testing.T) {
	a := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("a")}))
	b := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("b")}))
	cs := fake.NewClientset(
		&certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: a}},
		&certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "example.com:s:1", Labels: map[string]string{"env": "prod"}},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/s", TrustBundle: b}},
		&certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "example.com:s:2", Labels: map[string]string{"env": "dev"}},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/s", TrustBundle: a}},
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tb := NewForClientset(cs, "n1").NewTrustBundles(ctx)
	if got, err := tb.ByName(ctx, "plain", false); err != nil || string(got) != a {
		t.Fatalf("by name: %q %v", got, err)
	}
	if got, err := tb.ByName(ctx, "nope", true); err != nil || len(got) != 0 {
		t.Fatalf("optional missing: %q %v", got, err)
	}
	if _, err := tb.ByName(ctx, "nope", false); !errdefs.IsNotFound(err) {
		t.Fatalf("missing: %v", err)
	}
	if got, err := tb.BySigner(ctx, "example.com/s", &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}, false); err != nil || string(got) != b {
		t.Fatalf("by signer, prod: %q %v", got, err)
	}
	if got, err := tb.BySigner(ctx, "example.com/s", &metav1.LabelSelector{}, false); err != nil || string(got) != a+b {
		t.Fatalf("by signer, all: %q %v", got, err)
	}
	if _, err := tb.BySigner(ctx, "example.com/none", nil, false); !errdefs.IsNotFound(err) {
		t.Fatalf("no bundle of the signer: %v", err)
	}
	if _, err := tb.BySigner(ctx, "example.com/s", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Bad"}}}, false); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("bad selector: %v", err)
	}
}
