package e2e

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// testSigner is a PodCertificateRequest signer: it watches the requests of
// its signer name (with admin credentials) and issues each with its CA
// through the status subresource, or denies one whose user annotations ask
// for it.
type testSigner struct {
	name   string
	caCert *x509.Certificate
	caKey  crypto.Signer
	caPEM  []byte
}

const denyAnnotation = "e2e.actorlet.dev/deny"

func newTestSigner(t *testing.T, name string) *testSigner {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "actorlet e2e pod CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testSigner{name: name, caCert: ca, caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// run signs until ctx ends, reporting errors to errs.
func (s *testSigner) run(ctx context.Context, cs kubernetes.Interface, errs chan<- error) {
	api := cs.CertificatesV1().PodCertificateRequests("")
	sel := fields.OneTermEqualSelector("spec.signerName", s.name).String()
	for ctx.Err() == nil {
		w, err := api.Watch(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			errs <- fmt.Errorf("watch PodCertificateRequests: %w", err)
			return
		}
		for ev := range w.ResultChan() {
			pcr, ok := ev.Object.(*certificatesv1.PodCertificateRequest)
			if !ok || len(pcr.Status.Conditions) != 0 {
				continue
			}
			if err := s.sign(ctx, cs, pcr); err != nil && ctx.Err() == nil {
				errs <- err
			}
		}
		w.Stop()
	}
}

func (s *testSigner) sign(ctx context.Context, cs kubernetes.Interface, pcr *certificatesv1.PodCertificateRequest) error {
	now := time.Now().Truncate(time.Second)
	cond := metav1.Condition{Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now)}
	if _, deny := pcr.Spec.UnverifiedUserAnnotations[denyAnnotation]; deny {
		cond.Type, cond.Reason, cond.Message = certificatesv1.PodCertificateRequestConditionTypeDenied, "InvalidUnverifiedUserAnnotations", "the e2e signer denies on request"
	} else {
		csr, err := x509.ParseCertificateRequest(pcr.Spec.StubPKCS10Request)
		if err != nil {
			return fmt.Errorf("request %s: stub CSR: %w", pcr.Name, err)
		}
		notAfter := now.Add(2 * time.Hour)
		leaf := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: pcr.Spec.PodName},
			NotBefore: now, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		der, err := x509.CreateCertificate(rand.Reader, leaf, s.caCert, csr.PublicKey, s.caKey)
		if err != nil {
			return fmt.Errorf("request %s: sign: %w", pcr.Name, err)
		}
		pcr.Status.CertificateChain = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
		pcr.Status.NotBefore, pcr.Status.NotAfter = &metav1.Time{Time: now}, &metav1.Time{Time: notAfter}
		pcr.Status.BeginRefreshAt = &metav1.Time{Time: now.Add(time.Hour)}
		cond.Type, cond.Reason, cond.Message = certificatesv1.PodCertificateRequestConditionTypeIssued, "Issued", "issued by the e2e signer"
	}
	pcr.Status.Conditions = []metav1.Condition{cond}
	if _, err := cs.CertificatesV1().PodCertificateRequests(pcr.Namespace).UpdateStatus(ctx, pcr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("request %s: update status: %w", pcr.Name, err)
	}
	return nil
}

// TestE2EClusterPodCertificate: on the v1.37 control plane, a pod with a
// podCertificate volume waits for the signer (the test), then runs; its
// container reads a credential bundle whose chain verifies against the
// test CA and whose key is the leaf's. A pod whose request is denied stays
// waiting with a Denied event. The node created the requests with its own
// credentials (NodeRestriction: its own pods only). The Pods API on the
// node's socket lists the running pod.
func TestE2EClusterPodCertificate(t *testing.T) {
	c := newCluster(t)
	const node = "podcert-node"
	a := c.startNode(t, node, agentOpts{})
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signer := newTestSigner(t, "e2e.actorlet.dev/signer")
	signErrs := make(chan error, 16)
	go signer.run(ctx, c.cs, signErrs)

	certPod := func(name string, annotations map[string]string) *v1.Pod {
		p := apiPod(name, node, simImage, "sh", "-c", "cat /certs/bundle.pem; sleep infinity")
		p.Spec.Volumes = []v1.Volume{{Name: "certs", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
			Sources: []v1.VolumeProjection{{PodCertificate: &v1.PodCertificateProjection{
				SignerName: signer.name, KeyType: "ECDSAP384", CredentialBundlePath: "credentialbundle.pem",
				KeyPath: "tls.key", CertificateChainPath: "tls.crt", UserAnnotations: annotations,
			}}}}}}}
		// The sim runtime's cat reads file mounts: the bundle by subPath.
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "certs", MountPath: "/certs/bundle.pem", SubPath: "credentialbundle.pem"}}
		return p
	}
	created := time.Now()
	for _, p := range []*v1.Pod{certPod("with-cert", nil), certPod("denied-cert", map[string]string{denyAnnotation: "yes"})} {
		if _, err := c.cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p := c.waitPod(t, "default", "with-cert", "Running with its certificate", time.Minute, isRunning)
	t.Logf("with-cert Running %v after its creation", time.Since(created).Round(time.Millisecond))

	// What the container read: the key, then the chain.
	var logText string
	a.waitLog(t, "with-cert", "main", "the credential bundle in the container's log", func(log string) bool {
		logText = log
		return strings.Contains(log, "-----END CERTIFICATE-----")
	})
	keyBlock, rest := pem.Decode([]byte(logText))
	if keyBlock == nil || keyBlock.Type != "PRIVATE KEY" {
		t.Fatalf("the bundle does not start with a PRIVATE KEY block:\n%s", logText)
	}
	key, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, ok := key.(*ecdsa.PrivateKey)
	if !ok || ecKey.Curve != elliptic.P384() {
		t.Fatalf("key %T, want an ECDSA P-384 key (keyType ECDSAP384)", key)
	}
	leafBlock, _ := pem.Decode(rest)
	if leafBlock == nil || leafBlock.Type != "CERTIFICATE" {
		t.Fatalf("no certificate after the key:\n%s", logText)
	}
	leaf, err := x509.ParseCertificate(leafBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(signer.caCert)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("the chain does not verify against the test CA: %v", err)
	}
	if !ecKey.PublicKey.Equal(leaf.PublicKey) {
		t.Fatal("the key does not match the leaf certificate")
	}
	// The separate files, on the node.
	dir := filepath.Join(a.rootDir, "pods", string(p.UID), "volumes", "kubernetes.io~projected", "certs")
	keyFile, err1 := os.ReadFile(filepath.Join(dir, "tls.key"))
	chainFile, err2 := os.ReadFile(filepath.Join(dir, "tls.crt"))
	if err1 != nil || err2 != nil || !bytes.Equal(keyFile, pem.EncodeToMemory(keyBlock)) || !bytes.Equal(chainFile, pem.EncodeToMemory(leafBlock)) {
		t.Fatalf("tls.key/tls.crt (%v %v) are not the bundle's key and chain", err1, err2)
	}

	// The request: made by the node for its pod, owned by the pod.
	pcrs, err := c.cs.CertificatesV1().PodCertificateRequests("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mine *certificatesv1.PodCertificateRequest
	for i := range pcrs.Items {
		if pcrs.Items[i].Spec.PodUID == p.UID {
			mine = &pcrs.Items[i]
		}
	}
	if mine == nil || string(mine.Spec.NodeName) != node || mine.Spec.ServiceAccountName != "default" || mine.Spec.ServiceAccountUID == "" ||
		len(mine.OwnerReferences) != 1 || mine.OwnerReferences[0].UID != p.UID {
		t.Fatalf("the pod's PodCertificateRequest: %+v", mine)
	}

	// Denied: the pod waits in ContainerCreating with the signer's reason.
	denied := c.waitPod(t, "default", "denied-cert", "waiting with the denial", time.Minute, func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "ContainerCreating" &&
			strings.Contains(cs[0].State.Waiting.Message, "was denied")
	})
	t.Logf("denied-cert waiting with the denial %v after its creation", time.Since(created).Round(time.Millisecond))
	testenv.WaitFor(t, 30*time.Second, "a Denied event on denied-cert", func() (bool, error) {
		evs, err := c.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(denied.UID)})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "Denied" && strings.Contains(e.Message, "InvalidUnverifiedUserAnnotations") {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d events", len(evs.Items))
	})

	// The Pods API lists the running pod from the node's own view.
	conn, err := grpc.NewClient("unix://"+filepath.Join(a.rootDir, "pods-api", "pods-api.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	list, err := podsv1alpha1.NewPodsClient(conn).ListPods(ctx, &podsv1alpha1.ListPodsRequest{})
	if err != nil {
		t.Fatalf("Pods API ListPods: %v", err)
	}
	found := false
	for _, b := range list.Pods {
		var lp v1.Pod
		if err := lp.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		if lp.UID == p.UID {
			found = lp.Status.Phase == v1.PodRunning
		}
	}
	if !found {
		t.Fatalf("the Pods API does not list with-cert Running (%d pods)", len(list.Pods))
	}

	select {
	case err := <-signErrs:
		t.Fatalf("signer: %v", err)
	default:
	}
}

// TestE2EClusterTrustBundleProjection: a ClusterTrustBundle the test
// creates appears in a pod's projected file (by name and by signer), and an
// update of it reaches the file.
func TestE2EClusterTrustBundleProjection(t *testing.T) {
	c := newCluster(t)
	const node = "ctb-node"
	a := c.startNode(t, node, agentOpts{})
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	ca1, ca2 := newTestSigner(t, "x"), newTestSigner(t, "y")

	const signerName = "e2e.actorlet.dev/trust"
	bundles := c.cs.CertificatesV1().ClusterTrustBundles()
	plain := &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "e2e-plain"},
		Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: string(ca1.caPEM)}}
	signed := &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "e2e.actorlet.dev:trust:v1", Labels: map[string]string{"env": "e2e"}},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signerName, TrustBundle: string(ca2.caPEM)}}
	for _, b := range []*certificatesv1.ClusterTrustBundle{plain, signed} {
		_ = bundles.Delete(ctx, b.Name, metav1.DeleteOptions{})
		if _, err := bundles.Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ClusterTrustBundle %s: %v", b.Name, err)
		}
		t.Cleanup(func() { _ = bundles.Delete(context.Background(), b.Name, metav1.DeleteOptions{}) })
	}

	p := apiPod("with-trust", node, simImage, "sh", "-c", "cat /trust/plain.pem; sleep infinity")
	sname, pname := signerName, plain.Name
	p.Spec.Volumes = []v1.Volume{{Name: "trust", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: &pname, Path: "plain.pem"}},
		{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{SignerName: &sname, Path: "signer.pem",
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "e2e"}}}},
	}}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "trust", MountPath: "/trust/plain.pem", SubPath: "plain.pem"}}
	if _, err := c.cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = c.waitPod(t, "default", "with-trust", "Running", time.Minute, isRunning)
	a.waitLog(t, "with-trust", "main", "the bundle in the container's log", func(log string) bool { return strings.Contains(log, string(ca1.caPEM)) })
	dir := filepath.Join(a.rootDir, "pods", string(p.UID), "volumes", "kubernetes.io~projected", "trust")
	if b, err := os.ReadFile(filepath.Join(dir, "signer.pem")); err != nil || !bytes.Equal(b, ca2.caPEM) {
		t.Fatalf("signer.pem = %q (%v), want the signer's bundle", b, err)
	}

	// An update (a second CA added) reaches the file.
	cur, err := bundles.Get(ctx, plain.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.TrustBundle = string(ca1.caPEM) + string(ca2.caPEM)
	if _, err := bundles.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "the updated bundle in plain.pem", func() (bool, error) {
		b, err := os.ReadFile(filepath.Join(dir, "plain.pem"))
		if err != nil {
			return false, err
		}
		return bytes.Contains(b, ca1.caPEM) && bytes.Contains(b, ca2.caPEM), fmt.Errorf("%d bytes", len(b))
	})
}
