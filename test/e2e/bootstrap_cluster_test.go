package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/actorlet/actorlet/internal/testenv"
)

// TLS bootstrapping, certificate rotation and the serving certificate from
// the cluster (issue 11), against the local control plane as `kubeadm
// init` sets it up (deploy/local/controlplane.sh: bootstrap token auth,
// bootstrapsigner, the CSR auto-approval bindings).

// controlPlaneScript runs deploy/local/controlplane.sh with env and returns
// its KEY=VALUE lines; exit 3 (the machine cannot run it) skips the test
// (fails it with CI=true).
func controlPlaneScript(t *testing.T, env []string, timeout time.Duration, args ...string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(testenv.RepoRoot(t), "deploy", "local", "controlplane.sh"), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr) && exitErr.ExitCode() == testenv.ExitCannotRun:
		msg := "this machine cannot run the control plane: " + strings.TrimSpace(stderr.String())
		testenv.CannotRun(t, msg)
	case err != nil:
		t.Fatalf("controlplane.sh %v: %v\n%s", args, err, stderr.String())
	}
	vals := map[string]string{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			vals[k] = v
		}
	}
	return vals
}

// bootstrapKubeconfig makes a bootstrap token and its kubeconfig
// (controlplane.sh bootstrap-kubeconfig); it returns the path and the
// token's id.
func bootstrapKubeconfig(t *testing.T, env []string) (path, tokenID string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bootstrap-kubelet.conf")
	vals := controlPlaneScript(t, env, time.Minute, "bootstrap-kubeconfig", out)
	if vals["BOOTSTRAP_KUBECONFIG"] != out || vals["BOOTSTRAP_TOKEN_ID"] == "" {
		t.Fatalf("controlplane.sh bootstrap-kubeconfig: unexpected output %v", vals)
	}
	return out, vals["BOOTSTRAP_TOKEN_ID"]
}

// startBootstrappedNode runs actorlet as node with only a bootstrap
// kubeconfig: --kubeconfig names a file that does not exist yet. Its node
// API is secured as kubeadm configures a kubelet.
func (c *cluster) startBootstrappedNode(t *testing.T, node, bootstrap string, extra ...string) *agent {
	t.Helper()
	root := t.TempDir()
	args := append([]string{
		"--kubeconfig", filepath.Join(root, "kubelet.conf"), "--bootstrap-kubeconfig", bootstrap,
		"--cert-dir", filepath.Join(root, "pki"), "--hostname-override", node,
		"--node-status-update-frequency", "1s", "--node-lease-duration-seconds", "8", "--sync-frequency", "5s",
		"--anonymous-auth=false", "--client-ca-file", c.env.ClusterCA,
		"--authentication-token-webhook", "--authorization-mode=Webhook",
	}, extra...)
	t.Cleanup(func() { c.cleanupNode(t, node) })
	a := startAgent(t, agentOpts{rootDir: root, extra: args})
	a.clientCert = &c.adminCert
	return a
}

// readCert is the first certificate in a PEM file (the -current.pem
// symlink included).
func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			t.Fatalf("%s holds no certificate", path)
		}
		if block.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
}

// csrsBy lists the CSRs that user made with signer.
func (c *cluster) csrsBy(t *testing.T, user, signer string) []certificatesv1.CertificateSigningRequest {
	t.Helper()
	l, err := c.cs.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []certificatesv1.CertificateSigningRequest
	for _, r := range l.Items {
		if r.Spec.Username == user && r.Spec.SignerName == signer {
			out = append(out, r)
		}
	}
	return out
}

func csrCondition(r certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) *certificatesv1.CertificateSigningRequestCondition {
	for i := range r.Status.Conditions {
		if r.Status.Conditions[i].Type == typ {
			return &r.Status.Conditions[i]
		}
	}
	return nil
}

// From a bootstrap token to a Ready node with no hand-made node
// kubeconfig: actorlet's CSR (by system:bootstrap:<token id>) is
// auto-approved by the controller manager and signed by the cluster CA,
// the pair lands in --cert-dir as kubelet-client-current.pem, --kubeconfig
// is written to use it and the node registers with it. A restart uses the
// written kubeconfig and makes no new CSR.
func TestE2EClusterTLSBootstrap(t *testing.T) {
	const node = "e2e-bootstrap"
	start := time.Now()
	c := newCluster(t)
	bootstrap, tokenID := bootstrapKubeconfig(t, nil)
	a := c.startBootstrappedNode(t, node, bootstrap)
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	t.Logf("bootstrap token to Ready node in %v", time.Since(start).Round(time.Millisecond))

	certDir := filepath.Join(a.rootDir, "pki")
	current := filepath.Join(certDir, "kubelet-client-current.pem")
	target, err := os.Readlink(current)
	if err != nil || !strings.HasPrefix(filepath.Base(target), "kubelet-client-2") {
		t.Fatalf("%s -> %q (%v), want a symlink to kubelet-client-<timestamp>.pem", current, target, err)
	}
	cert := readCert(t, current)
	ca := readCert(t, c.env.ClusterCA)
	if cert.Subject.CommonName != "system:node:"+node || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Fatalf("client certificate subject %v", cert.Subject)
	}
	if err := cert.CheckSignatureFrom(ca); err != nil {
		t.Fatalf("client certificate not signed by the cluster CA: %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(a.rootDir, "kubelet.conf"))
	if err != nil {
		t.Fatalf("the written --kubeconfig: %v", err)
	}
	if cfg.CertFile != current || cfg.KeyFile != current || cfg.BearerToken != "" || cfg.Host != c.env.APIServer {
		t.Fatalf("the written --kubeconfig: server %s cert %s key %s token %q", cfg.Host, cfg.CertFile, cfg.KeyFile, cfg.BearerToken)
	}

	user := "system:bootstrap:" + tokenID
	csrs := c.csrsBy(t, user, certificatesv1.KubeAPIServerClientKubeletSignerName)
	if len(csrs) != 1 {
		t.Fatalf("%d CSRs by %s, want 1", len(csrs), user)
	}
	if cond := csrCondition(csrs[0], certificatesv1.CertificateApproved); cond == nil || cond.Reason != "AutoApproved" || len(csrs[0].Status.Certificate) == 0 {
		t.Fatalf("CSR %s: conditions %+v, %d bytes of certificate; want auto-approved and issued", csrs[0].Name, csrs[0].Status.Conditions, len(csrs[0].Status.Certificate))
	}

	a.stop()
	restarted := time.Now()
	a.start()
	testenv.WaitFor(t, time.Minute, "a Lease renewal after the restart", func() (bool, error) {
		l, err := c.cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return renewTime(l).After(restarted), fmt.Errorf("renewed at %s", renewTime(l).Format(time.TimeOnly))
	})
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	if n := len(c.csrsBy(t, user, certificatesv1.KubeAPIServerClientKubeletSignerName)); n != 1 {
		t.Fatalf("the restart bootstrapped again: %d CSRs by %s", n, user)
	}
	if !a.logContains("not bootstrapping") {
		t.Fatalf("the restart did not say it kept the kubeconfig:\n%s", a.logTail(30))
	}
	t.Logf("TestE2EClusterTLSBootstrap took %v", time.Since(start).Round(time.Second))
}

// peerCert dials addr over TLS, verifying against roots for serverName, and
// returns the certificate the server presented.
func peerCert(addr, serverName string, roots *x509.CertPool) (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// --rotate-server-certificates: the node API serves nothing until its
// kubernetes.io/kubelet-serving CSR (by system:node:<node>, for the node's
// names and IPs) is approved; the controller manager leaves it pending (as
// upstream); an admin approves it with kubectl certificate approve; then
// the node API serves the certificate the cluster CA signed, verifiable
// against the cluster CA, and answers the admin as before.
func TestE2EClusterServingCertificateFromTheCluster(t *testing.T) {
	const node = "e2e-serving"
	start := time.Now()
	c := newCluster(t)
	bootstrap, _ := bootstrapKubeconfig(t, nil)
	a := c.startBootstrappedNode(t, node, bootstrap, "--rotate-server-certificates")
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	ca := readCert(t, c.env.ClusterCA)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(a.port))

	var pending certificatesv1.CertificateSigningRequest
	testenv.WaitFor(t, time.Minute, "a kubelet-serving CSR by system:node:"+node, func() (bool, error) {
		// On a control plane kept from earlier runs, the same node name has
		// older CSRs: only this run's counts.
		for _, csr := range c.csrsBy(t, "system:node:"+node, certificatesv1.KubeletServingSignerName) {
			if !csr.CreationTimestamp.Time.Before(start.Truncate(time.Second)) {
				pending = csr
				return true, nil
			}
		}
		return false, errors.New("none yet")
	})
	if len(pending.Status.Conditions) != 0 {
		t.Fatalf("the kubelet-serving CSR %s was decided without an admin: %+v", pending.Name, pending.Status.Conditions)
	}
	if conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}); err == nil { //nolint:gosec // any certificate would do: there must be none
		_ = conn.Close()
		t.Fatal("the node API completed a TLS handshake before its serving certificate was approved")
	}

	kubectl := exec.Command(c.env.Kubectl, "--kubeconfig", c.env.AdminKubeconfig, "certificate", "approve", pending.Name)
	if out, err := kubectl.CombinedOutput(); err != nil {
		t.Fatalf("kubectl certificate approve %s: %v: %s", pending.Name, err, out)
	}
	var served *x509.Certificate
	testenv.WaitFor(t, time.Minute, "the node API serving the approved certificate", func() (bool, error) {
		cert, err := peerCert(addr, "127.0.0.1", roots)
		served = cert
		return err == nil, err
	})
	if served.Issuer.CommonName != ca.Subject.CommonName || served.Subject.CommonName != "system:node:"+node {
		t.Fatalf("served certificate: subject %q issuer %q; want system:node:%s issued by %q", served.Subject.CommonName, served.Issuer.CommonName, node, ca.Subject.CommonName)
	}
	if !slices.Contains(served.DNSNames, node) || !slices.ContainsFunc(served.IPAddresses, net.ParseIP("127.0.0.1").Equal) {
		t.Fatalf("served certificate SANs: DNS %v IPs %v; want %s and 127.0.0.1", served.DNSNames, served.IPAddresses, node)
	}
	if cur := readCert(t, filepath.Join(a.rootDir, "pki", "kubelet-server-current.pem")); cur.SerialNumber.Cmp(served.SerialNumber) != 0 {
		t.Fatalf("kubelet-server-current.pem serial %s, served %s", cur.SerialNumber, served.SerialNumber)
	}

	// The node API answers the admin over the cluster-signed certificate.
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", Certificates: []tls.Certificate{c.adminCert}, MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get("https://" + addr + "/pods")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"PodList"`) {
		t.Fatalf("GET /pods as admin: %d %.200s", resp.StatusCode, body)
	}
	t.Logf("TestE2EClusterServingCertificateFromTheCluster took %v", time.Since(start).Round(time.Second))
}

// signingDuration is the private control plane's certificate lifetime for
// the rotation test. The signer backdates by 5 min, so a certificate
// lives 8 min on paper and the manager renews it at 70-90 % of that: 36 to
// 132 s after it is issued, before it expires 3 min after.
const signingDuration = "3m"

// --rotate-certificates with short-lived certificates (a private control
// plane that signs for 3 min): the client certificate is renewed before it
// expires (a new kubelet-client-<timestamp>.pem, the -current symlink moved,
// a renewal CSR by system:node:<node> auto-approved), and the node keeps
// renewing its Lease with the new one after the first has expired.
func TestE2EClusterClientCertificateRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the rotation takes about 4 minutes")
	}
	const node = "e2e-rotation"
	start := time.Now()
	dir, err := os.MkdirTemp("", "actorlet-rotation-controlplane")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"ACTORLET_CONTROLPLANE_DIR=" + dir, "ACTORLET_APISERVER_PORT=63843", "ACTORLET_ETCD_PORT=63779",
		"ACTORLET_SIGNING_DURATION=" + signingDuration}
	t.Cleanup(func() {
		controlPlaneScript(t, env, 2*time.Minute, "down")
		_ = os.Remove(dir + ".lock")
	})
	vals := controlPlaneScript(t, env, 30*time.Minute, "up")
	c := clusterOf(t, testenv.ControlPlaneEnv{AdminKubeconfig: vals["ADMIN_KUBECONFIG"], Kubectl: vals["KUBECTL"],
		APIServer: vals["APISERVER"], ClusterCA: vals["CLUSTER_CA"]})
	bootstrap, _ := bootstrapKubeconfig(t, env)
	a := c.startBootstrappedNode(t, node, bootstrap, "--rotate-certificates")
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)

	current := filepath.Join(a.rootDir, "pki", "kubelet-client-current.pem")
	first := readCert(t, current)
	firstFile, _ := os.Readlink(current)
	if life := time.Until(first.NotAfter); life > 4*time.Minute {
		t.Fatalf("the first certificate expires in %v: the control plane does not sign for %s", life, signingDuration)
	}
	t.Logf("first client certificate serial %s, expires %s", first.SerialNumber, first.NotAfter.Format(time.TimeOnly))

	var second *x509.Certificate
	testenv.WaitFor(t, time.Until(first.NotAfter), "a new client certificate before the first expires", func() (bool, error) {
		second = readCert(t, current)
		return second.SerialNumber.Cmp(first.SerialNumber) != 0, fmt.Errorf("serial still %s", second.SerialNumber)
	})
	secondFile, _ := os.Readlink(current)
	if secondFile == firstFile {
		t.Fatalf("kubelet-client-current.pem still points at %s", firstFile)
	}
	if _, err := os.Stat(firstFile); err != nil {
		t.Fatalf("the first certificate's file is gone: %v", err)
	}
	t.Logf("rotated after %v: serial %s in %s", time.Since(first.NotBefore.Add(5*time.Minute)).Round(time.Second), second.SerialNumber, filepath.Base(secondFile))
	renewals := c.csrsBy(t, "system:node:"+node, certificatesv1.KubeAPIServerClientKubeletSignerName)
	if len(renewals) == 0 {
		t.Fatal("no renewal CSR by the node itself")
	}
	if cond := csrCondition(renewals[0], certificatesv1.CertificateApproved); cond == nil || cond.Reason != "AutoApproved" {
		t.Fatalf("renewal CSR %s: %+v, want auto-approved", renewals[0].Name, renewals[0].Status.Conditions)
	}

	// After the first certificate has expired the node still writes its
	// Lease and stays Ready: its API clients use the new certificate.
	testenv.WaitFor(t, time.Until(first.NotAfter)+time.Minute, "a Lease renewal after the first certificate expired", func() (bool, error) {
		l, err := c.cs.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		renewed := renewTime(l)
		return renewed.After(first.NotAfter.Add(2 * time.Second)), fmt.Errorf("renewed at %s, first certificate expired at %s", renewed.Format(time.TimeOnly), first.NotAfter.Format(time.TimeOnly))
	})
	c.waitNodeReady(t, node, v1.ConditionTrue, 10*time.Second)
	if !a.logContains("client certificate rotated") {
		t.Fatalf("no rotation in the log:\n%s", a.logTail(30))
	}
	t.Logf("TestE2EClusterClientCertificateRotation took %v", time.Since(start).Round(time.Second))
}
