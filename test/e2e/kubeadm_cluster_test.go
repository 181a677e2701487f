package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/internal/testenv"
)

// The fixed paths `kubeadm join` writes (kubeadm has no private root), and
// the one the test writes for the user's KUBELET_EXTRA_ARGS.
const (
	kubeadmEtcDir       = "/etc/kubernetes"
	kubeadmKubeletDir   = "/var/lib/kubelet"
	kubeletDefaultsFile = "/etc/default/kubelet"
	// kubeadmMarker says the files under kubeadmKubeletDir are this test's
	// (from a run that crashed before its cleanup), not a real node's.
	kubeadmMarker = kubeadmKubeletDir + "/.actorlet-e2e-kubeadm"
)

// kubeadmNodeFiles are what kubeadm join and the kubelet leave in the fixed
// paths on a worker; any of them present means a node lives here.
var kubeadmNodeFiles = []string{
	kubeadmEtcDir + "/kubelet.conf",
	kubeadmEtcDir + "/bootstrap-kubelet.conf",
	kubeadmKubeletDir + "/config.yaml",
	kubeadmKubeletDir + "/kubeadm-flags.env",
}

// TestE2EKubeadmJoin joins a new node to the local control plane with
// `kubeadm join <apiserver> --token ... --discovery-token-ca-cert-hash
// sha256:...` (kubeadm v1.37.2), with actorlet as the node's kubelet on the
// simulated runtime (--cri-socket: the sim as its own process), and checks
// that the node comes up Ready with the client certificate it got through
// TLS bootstrapping, and runs a pod.
//
// No systemd here (PID 1 is not systemd): the test puts a stand-in for
// systemctl first on kubeadm's PATH (internal/testenv/systemctl). For
// `systemctl restart kubelet`, what kubeadm join calls, it reads the units
// that deploy/install.sh installed from deploy/systemd/ (kubelet.service and
// kubelet.service.d/10-kubeadm.conf, the binary path set to this test's
// actorlet) and starts ExecStart= exactly as systemd would: Environment=,
// then /var/lib/kubelet/kubeadm-flags.env and /etc/default/kubelet, $VAR
// split into words. So the unit files themselves are what is tested; the
// test also compares actorlet's command line with the one the drop-in
// spells. Restart=always is not emulated.
//
// kubeadm writes fixed paths (/etc/kubernetes, /var/lib/kubelet): the test
// runs only as root (and fails instead of skipping when CI=true), refuses a
// machine where a node's files are present, and removes what it wrote.
// /etc/default/kubelet holds the node's own settings (KUBELET_EXTRA_ARGS:
// --root-dir and --pod-logs-dir in the test's temp dir, --node-ip) and is
// put back as it was. Preflight runs with --ignore-preflight-errors=all (no
// systemd, swap, kernel checks here); --patches gives the kubelet
// configuration free ports, as a user would for a second kubelet on a host.
func TestE2EKubeadmJoin(t *testing.T) {
	if os.Geteuid() != 0 {
		msg := fmt.Sprintf("kubeadm join writes /etc/kubernetes and /var/lib/kubelet: needs root (euid %d)", os.Geteuid())
		testenv.CannotRun(t, msg)
	}
	claimKubeadmPaths(t)

	c := newCluster(t)
	ka := testenv.Kubeadm(t)
	node := fmt.Sprintf("e2e-kubeadm-%d", time.Now().UnixNano()%1_000_000)
	t.Cleanup(func() { c.cleanupNode(t, node) })

	// actorlet installed as kubeadm nodes run it: deploy/install.sh.
	prefix := filepath.Join(t.TempDir(), "usr")
	unitDir := filepath.Join(t.TempDir(), "systemd")
	install := exec.Command(filepath.Join(testenv.RepoRoot(t), "deploy", "install.sh"),
		"--binary", actorletBin(t), "--prefix", prefix, "--unit-dir", unitDir, "--no-reload")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("deploy/install.sh: %v\n%s", err, out)
	}

	simRoot, criSocket, rt := simProcess(t)
	nodeRoot := filepath.Join(simRoot, "node")
	ports := freePorts(t, 2)
	port, healthzPort := ports[0], ports[1]
	extraArgs := []string{
		"--root-dir=" + nodeRoot, "--pod-logs-dir=" + filepath.Join(nodeRoot, "pod-logs"), "--node-ip=127.0.0.1",
	}
	writeFile(t, kubeletDefaultsFile, fmt.Sprintf("KUBELET_EXTRA_ARGS=%q\n", strings.Join(extraArgs, " ")))
	patches := t.TempDir()
	writeFile(t, filepath.Join(patches, "kubeletconfiguration.yaml"),
		fmt.Sprintf("address: 127.0.0.1\nport: %d\nhealthzPort: %d\n", port, healthzPort))

	stateDir := t.TempDir()
	t.Cleanup(func() {
		if err := testenv.StopService(stateDir, "kubelet"); err != nil {
			t.Errorf("stopping the kubelet service: %v", err)
		}
		b, _ := os.ReadFile(filepath.Join(stateDir, "kubelet.service.log"))
		if t.Failed() {
			t.Logf("actorlet (kubelet.service) log tail:\n%s", lastLines(string(b), 60))
			return
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "level=WARN") { // e.g. kubeadm's config.yaml fields actorlet does not implement
				t.Logf("actorlet: %s", l)
			}
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	start := time.Now()
	join := exec.CommandContext(ctx, ka.Kubeadm, "join", ka.APIEndpoint,
		"--token", ka.Token, "--discovery-token-ca-cert-hash", ka.CACertHash,
		"--cri-socket", criSocket, "--node-name", node,
		"--ignore-preflight-errors=all", "--patches", patches, "-v=1")
	join.Env = append(os.Environ(),
		"PATH="+testenv.SystemctlStandIn(t)+string(os.PathListSeparator)+os.Getenv("PATH"),
		testenv.EnvSystemctlUnitDir+"="+unitDir,
		testenv.EnvSystemctlStateDir+"="+stateDir,
	)
	var out actortest.SyncBuffer
	join.Stdout, join.Stderr = &out, &out
	if err := runWatchingService(join, stateDir); err != nil {
		t.Fatalf("kubeadm join: %v\n%s", err, lastLines(out.String(), 80))
	}
	if !strings.Contains(out.String(), "This node has joined the cluster") {
		t.Fatalf("kubeadm join exited 0 without saying the node joined:\n%s", lastLines(out.String(), 40))
	}
	t.Logf("kubeadm join took %v", time.Since(start).Round(time.Millisecond))
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "[WARNING") { // the preflight checks ignored here
			t.Logf("kubeadm: %s", strings.TrimSpace(l))
		}
	}

	// actorlet runs as the drop-in's ExecStart= spells it, with what
	// kubeadm join wrote into kubeadm-flags.env and the user's extra args.
	pid, ok := testenv.ServicePID(stateDir, "kubelet")
	if !ok {
		t.Fatal("kubelet.service is not running after kubeadm join")
	}
	want := append([]string{filepath.Join(prefix, "bin", "actorlet"),
		"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=/etc/kubernetes/kubelet.conf",
		"--config=/var/lib/kubelet/config.yaml", "--hostname-override=" + node}, extraArgs...)
	if got := cmdline(t, pid); !reflect.DeepEqual(got, want) {
		t.Errorf("actorlet's command line\n got %q\nwant %q", got, want)
	}

	// TLS bootstrap: kubeadm removed the bootstrap kubeconfig once actorlet
	// wrote kubelet.conf, whose client certificate is the node's.
	if _, err := os.Stat(kubeadmEtcDir + "/bootstrap-kubelet.conf"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bootstrap-kubelet.conf still there after the join: %v", err)
	}
	if cn := kubeconfigClientCN(t, kubeadmEtcDir+"/kubelet.conf"); cn != "system:node:"+node {
		t.Errorf("kubelet.conf's client certificate is for %q, want system:node:%s", cn, node)
	}
	csr := bootstrapCSR(t, c, "system:bootstrap:"+ka.TokenID(), node)
	t.Logf("CSR %s by %s: approved and issued", csr.Name, csr.Spec.Username)

	c.waitNodeReady(t, node, v1.ConditionTrue, 2*time.Minute)
	t.Logf("node %s Ready %v after kubeadm join started", node, time.Since(start).Round(time.Millisecond))

	// The node works: a pod bound to it runs in the runtime kubeadm named.
	pod := apiPod("kubeadm-joined", node, simImage, "sleep", "infinity")
	created, err := c.cs.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.waitPod(t, "default", pod.Name, "Running and Ready", time.Minute, func(p *v1.Pod) bool {
		return isRunning(p) && podReady(p)
	})
	if ctrs := containersOf(t, rt, string(created.UID)); len(ctrs) != 1 {
		t.Errorf("the runtime at %s has %d containers of the pod, want 1", criSocket, len(ctrs))
	}
}

// runWatchingService runs kubeadm join and stops it early when the kubelet
// service it started has exited: the stand-in does not restart it
// (Restart=always), so kubeadm would only wait out its 4 min health check.
func runWatchingService(join *exec.Cmd, stateDir string) error {
	if err := join.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- join.Wait() }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			_, running := testenv.ServicePID(stateDir, "kubelet")
			if _, err := os.Stat(filepath.Join(stateDir, "kubelet.service.pid")); err == nil && !running {
				_ = join.Process.Kill()
				<-done
				return errors.New("the kubelet service (actorlet) exited while kubeadm waited for it; see its log below")
			}
		}
	}
}

// claimKubeadmPaths refuses a machine where a node's kubeadm files exist
// (unless a crashed run of this test left them: kubeadmMarker), marks the
// paths as the test's, and removes on cleanup what the test and kubeadm
// wrote there, leaving /etc/default/kubelet as it was.
func claimKubeadmPaths(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(kubeadmMarker); err == nil {
		t.Logf("removing what a crashed run of this test left (%s)", kubeadmMarker)
		removeKubeadmFiles(t, true, true)
	}
	for _, f := range kubeadmNodeFiles {
		if _, err := os.Stat(f); err == nil {
			msg := fmt.Sprintf("%s exists: this machine is (or was) a kubeadm node; not touching it", f)
			testenv.CannotRun(t, msg)
		}
	}
	etcExisted := pathExists(kubeadmEtcDir)
	kubeletExisted := pathExists(kubeadmKubeletDir)
	defaults, defaultsErr := os.ReadFile(kubeletDefaultsFile)
	writeFile(t, kubeadmMarker, "actorlet e2e TestE2EKubeadmJoin\n")
	t.Cleanup(func() {
		removeKubeadmFiles(t, !etcExisted, !kubeletExisted)
		switch {
		case defaultsErr == nil:
			if err := os.WriteFile(kubeletDefaultsFile, defaults, 0o644); err != nil {
				t.Errorf("restoring %s: %v", kubeletDefaultsFile, err)
			}
		case errors.Is(defaultsErr, os.ErrNotExist):
			_ = os.Remove(kubeletDefaultsFile)
		}
	})
}

// removeKubeadmFiles removes what kubeadm join and the kubelet write: the
// whole directory where the test made it, else the files one by one.
func removeKubeadmFiles(t *testing.T, wholeEtc, wholeKubelet bool) {
	t.Helper()
	rm := func(p string) {
		if err := os.RemoveAll(p); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
	if wholeEtc {
		rm(kubeadmEtcDir)
	} else {
		for _, f := range []string{"kubelet.conf", "bootstrap-kubelet.conf", "pki/ca.crt", "tmp"} {
			rm(filepath.Join(kubeadmEtcDir, f))
		}
	}
	if wholeKubelet {
		rm(kubeadmKubeletDir)
	} else {
		for _, f := range []string{"config.yaml", "kubeadm-flags.env", "instance-config.yaml", filepath.Base(kubeadmMarker)} {
			rm(filepath.Join(kubeadmKubeletDir, f))
		}
	}
}

func pathExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// cmdline is the process's argv, from /proc.
func cmdline(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// kubeconfigClientCN is the subject CN of the current context's client
// certificate in the kubeconfig at path (embedded or a file).
func kubeconfigClientCN(t *testing.T, path string) string {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	data := cfg.CertData
	if len(data) == 0 && cfg.CertFile != "" {
		if data, err = os.ReadFile(cfg.CertFile); err != nil {
			t.Fatalf("%s: client certificate: %v", path, err)
		}
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM client certificate", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cert.Subject.CommonName
}

// bootstrapCSR finds the node's client CSR made with the bootstrap token
// (user), checks that it was approved and issued, and returns it.
func bootstrapCSR(t *testing.T, c *cluster, user, node string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	list, err := c.cs.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		csr := &list.Items[i]
		if csr.Spec.Username != user || csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
			continue
		}
		block, _ := pem.Decode(csr.Spec.Request)
		if block == nil {
			continue
		}
		req, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil || req.Subject.CommonName != "system:node:"+node {
			continue
		}
		approved := false
		for _, cond := range csr.Status.Conditions {
			approved = approved || cond.Type == certificatesv1.CertificateApproved && cond.Status == v1.ConditionTrue
		}
		if !approved || len(csr.Status.Certificate) == 0 {
			t.Errorf("CSR %s: approved %v, certificate issued %v", csr.Name, approved, len(csr.Status.Certificate) > 0)
		}
		t.Cleanup(func() {
			_ = c.cs.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), csr.Name, metav1.DeleteOptions{})
		})
		return csr
	}
	t.Fatalf("no CSR by %s for system:node:%s with signer %s", user, node, certificatesv1.KubeAPIServerClientKubeletSignerName)
	return nil
}
