// Package e2e runs the real actorlet binary as a process against a real CRI
// runtime (the simulated runtime over its socket, or containerd) and checks
// what a user sees: the node API and the runtime itself (through the CRI,
// never through actorlet's own view).
package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/adapters/cri"
	"github.com/actorlet/actorlet/internal/testenv"
)

// actorletBin is the actorlet binary under test (built once per process).
func actorletBin(t *testing.T) string {
	t.Helper()
	return testenv.ActorletBinary(t)
}

func freePort(t *testing.T) int {
	t.Helper()
	return freePorts(t, 1)[0]
}

// freePorts returns n distinct free ports: all are held open until every
// one is chosen, so the kernel cannot hand the same port out twice.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close() }()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// agent is a running actorlet process.
type agent struct {
	t        *testing.T
	args     []string
	cmd      *exec.Cmd
	done     chan struct{}
	logPath  string
	rootDir  string
	logsDir  string
	port     int
	roPort   int
	hzPort   int
	endpoint string // the CRI endpoint the agent uses
	// cgroupRoot is --cgroup-root on a real runtime ("" with sim://).
	cgroupRoot string

	// clientCert is presented to --port (cluster mode: the admin's,
	// system:masters); nil in standalone, where anonymous requests pass.
	clientCert *tls.Certificate
	// host is the address --port listens on (--address); 127.0.0.1
	// unless a test gives the agent another one.
	host string
}

type agentOpts struct {
	endpoint    string // default sim:// (embedded)
	manifestDir string
	rootDir     string
	extra       []string
}

func startAgent(t *testing.T, o agentOpts) *agent {
	t.Helper()
	a := &agent{t: t, rootDir: o.rootDir}
	if a.rootDir == "" {
		a.rootDir = t.TempDir()
	}
	testenv.UnmountAtCleanup(t, a.rootDir) // the pods' tmpfs volumes outlive the agent, as upstream's
	a.logsDir = filepath.Join(a.rootDir, "pod-logs")
	ports := freePorts(t, 3)
	a.port, a.roPort, a.hzPort = ports[0], ports[1], ports[2]
	ep := o.endpoint
	if ep == "" {
		ep = "sim://"
	}
	a.endpoint = ep
	if strings.HasPrefix(ep, "sim://") {
		a.endpoint = "unix://" + filepath.Join(a.rootDir, "actorlet-sim.sock")
	}
	a.args = []string{
		"--container-runtime-endpoint", ep,
		"--root-dir", a.rootDir, "--pod-logs-dir", a.logsDir,
		"--hostname-override", "e2e-node", "--node-ip", "127.0.0.1",
		"--address", "127.0.0.1",
		"--port", fmt.Sprint(a.port), "--read-only-port", fmt.Sprint(a.roPort), "--healthz-port", fmt.Sprint(a.hzPort),
		"--file-check-frequency", "200ms",
		"--pleg-relist-period", "200ms",
	}
	if o.manifestDir != "" {
		a.args = append(a.args, "--pod-manifest-path", o.manifestDir)
	}
	if !strings.HasPrefix(ep, "sim://") {
		// A real runtime: the agent manages the pod cgroups, under a cgroup
		// root of its own (cgroups are the whole machine's), and runs on
		// these cgroup v1 machines only with failCgroupV1 off.
		a.cgroupRoot = testenv.CgroupRoot(t)
		a.args = append(a.args, "--fail-cgroupv1=false", "--cgroup-root", a.cgroupRoot)
	}
	a.args = append(a.args, o.extra...)
	a.logPath = filepath.Join(t.TempDir(), "actorlet.log")
	a.start()
	t.Cleanup(func() {
		a.stop()
		if t.Failed() {
			t.Logf("actorlet log tail:\n%s", a.logTail(60))
		}
	})
	return a
}

func (a *agent) start() {
	a.t.Helper()
	f, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		a.t.Fatal(err)
	}
	a.cmd = exec.Command(actorletBin(a.t), a.args...)
	a.cmd.Stdout, a.cmd.Stderr = f, f
	if err := a.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	a.done = make(chan struct{})
	go func() {
		_ = a.cmd.Wait()
		_ = f.Close()
		close(a.done)
	}()
	testenv.WaitFor(a.t, 60*time.Second, "actorlet healthz", func() (bool, error) {
		select {
		case <-a.done:
			return false, fmt.Errorf("actorlet exited: %s", a.logTail(20))
		default:
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", a.hzPort))
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("healthz %d", resp.StatusCode)
	})
}

// kill9 kills the process without letting it clean up.
func (a *agent) kill9() {
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.done
}

func (a *agent) stop() {
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	select {
	case <-a.done:
		return
	default:
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(20 * time.Second):
		a.kill9()
	}
}

func (a *agent) logTail(n int) string {
	b, _ := os.ReadFile(a.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (a *agent) logContains(s string) bool {
	b, _ := os.ReadFile(a.logPath)
	return bytes.Contains(b, []byte(s))
}

// mainURL is https://<host>:<--port><path>: the secure node API.
func (a *agent) mainURL(path string) string {
	host := a.host
	if host == "" {
		host = "127.0.0.1"
	}
	return "https://" + net.JoinHostPort(host, fmt.Sprint(a.port)) + path
}

// mainClient talks to --port over TLS: it verifies the node's serving
// certificate against the self-signed kubelet.crt the agent made in
// <root-dir>/pki (so its SANs are checked too), and presents clientCert.
func (a *agent) mainClient() *http.Client {
	a.t.Helper()
	return a.mainClientAs(a.clientCert)
}

// mainClientAs is mainClient with another client certificate (nil: none).
func (a *agent) mainClientAs(cert *tls.Certificate) *http.Client {
	a.t.Helper()
	pem, err := os.ReadFile(filepath.Join(a.rootDir, "pki", "kubelet.crt"))
	if err != nil {
		a.t.Fatalf("the agent's self-signed serving certificate: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		a.t.Fatal("kubelet.crt holds no PEM certificate")
	}
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
	a.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// pods reads the read-only /pods endpoint.
func (a *agent) pods() ([]v1.Pod, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/pods", a.roPort))
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("/pods: %d %s", resp.StatusCode, b)
	}
	var list v1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (a *agent) pod(name string) (*v1.Pod, error) {
	pods, err := a.pods()
	if err != nil {
		return nil, err
	}
	for i := range pods {
		if pods[i].Name == name {
			return &pods[i], nil
		}
	}
	return nil, fmt.Errorf("pod %s not listed", name)
}

// waitPod waits until the named pod's status satisfies cond.
func (a *agent) waitPod(timeout time.Duration, name, what string, cond func(*v1.Pod) bool) *v1.Pod {
	a.t.Helper()
	var got *v1.Pod
	testenv.WaitFor(a.t, timeout, name+": "+what, func() (bool, error) {
		p, err := a.pod(name)
		if err != nil {
			return false, err
		}
		got = p
		return cond(p), fmt.Errorf("phase %s, containers %s", p.Status.Phase, describe(p))
	})
	return got
}

func describe(p *v1.Pod) string {
	var parts []string
	for _, cs := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		s := "?"
		switch {
		case cs.State.Running != nil:
			s = "running"
		case cs.State.Waiting != nil:
			s = "waiting:" + cs.State.Waiting.Reason
		case cs.State.Terminated != nil:
			s = fmt.Sprintf("terminated:%d", cs.State.Terminated.ExitCode)
		}
		parts = append(parts, fmt.Sprintf("%s=%s/restarts=%d", cs.Name, s, cs.RestartCount))
	}
	return strings.Join(parts, " ")
}

func isRunning(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return true
}

// runtime dials the CRI endpoint the agent uses, for checks that must not
// trust actorlet's own view.
func (a *agent) runtime() *cri.Client {
	a.t.Helper()
	return dialRuntime(a.t, a.endpoint)
}

func dialRuntime(t *testing.T, endpoint string) *cri.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var c *cri.Client
	testenv.WaitFor(t, 30*time.Second, "dial "+endpoint, func() (bool, error) {
		var err error
		c, err = cri.Dial(ctx, endpoint, 30*time.Second)
		return err == nil, err
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// containersOf lists the runtime's containers of a pod UID ("": of every
// pod), all states.
func containersOf(t *testing.T, rt *cri.Client, uid string) []*runtimeapi.Container {
	t.Helper()
	var filter *runtimeapi.ContainerFilter
	if uid != "" {
		filter = &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}}
	}
	cs, err := rt.ListContainers(context.Background(), filter)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// postPod pushes a manifest to the agent's POST /pods and returns the
// status code and the body of the answer.
func (a *agent) postPod(t *testing.T, body string) (int, string) {
	t.Helper()
	resp, err := a.mainClient().Post(a.mainURL("/pods"), "application/yaml", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// pushPod posts a manifest (POST /pods), fails the test unless the node
// took it, and returns the pod's UID and full name from the answer.
func (a *agent) pushPod(t *testing.T, body string) (uid, name string) {
	t.Helper()
	code, resp := a.postPod(t, body)
	if code != http.StatusCreated {
		t.Fatalf("POST /pods: %d %s", code, resp)
	}
	var ref struct {
		UID  string `json:"uid"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal([]byte(resp), &ref); err != nil {
		t.Fatalf("POST /pods answer %q: %v", resp, err)
	}
	return ref.UID, ref.Name
}

// deletePushed asks the node to remove pushed pods (DELETE
// /pods/default/{name}), ignoring errors: for cleanups.
func (a *agent) deletePushed(names ...string) {
	for _, name := range names {
		req, err := http.NewRequest(http.MethodDelete, a.mainURL("/pods/default/"+name), nil)
		if err != nil {
			continue
		}
		if resp, err := a.mainClient().Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}
}

// simProcess runs the sim runtime as its own process, so it outlives an
// actorlet (kill -9, exits), and dials it: the test's root dir, the
// runtime's endpoint and a client. Its log goes to a file of the test.
func simProcess(t *testing.T) (root, endpoint string, rt *cri.Client) {
	t.Helper()
	root = t.TempDir()
	testenv.UnmountAtCleanup(t, root) // an agent's root below it keeps its pods' tmpfs volumes
	endpoint = "unix://" + filepath.Join(root, "sim.sock")
	sim := exec.Command(actorletBin(t), "simruntime", "--listen", endpoint)
	simLog, err := os.Create(filepath.Join(t.TempDir(), "sim.log"))
	if err != nil {
		t.Fatal(err)
	}
	sim.Stdout, sim.Stderr = simLog, simLog
	if err := sim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Process.Kill(); _ = sim.Wait(); _ = simLog.Close() })
	return root, endpoint, dialRuntime(t, endpoint)
}

// containerStates lists every container of the runtime as "id/state",
// sorted: what must be the same before and after an adoption.
func containerStates(t *testing.T, rt *cri.Client) []string {
	t.Helper()
	var out []string
	for _, c := range allContainers(t, rt) {
		out = append(out, c.Id+"/"+c.State.String())
	}
	sort.Strings(out)
	return out
}

func allContainers(t *testing.T, rt *cri.Client) []*runtimeapi.Container {
	t.Helper()
	return containersOf(t, rt, "")
}

func allSandboxes(t *testing.T, rt *cri.Client) []*runtimeapi.PodSandbox {
	t.Helper()
	s, err := rt.ListPodSandbox(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// statusOf returns a func that takes a request's answer and returns its
// status code (the body closed), failing t on an error:
// statusOf(t)(http.Get(url)).
func statusOf(t *testing.T) func(*http.Response, error) int {
	return func(resp *http.Response, err error) int {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
}

// writeManifest writes a manifest file into dir.
func writeManifest(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// busyboxPod is the manifest of pod name with one container, app, of the
// e2e busybox image (simImage). Each field is one line of YAML (flow style
// for what nests): of the pod's metadata where it starts with "metadata.",
// of its spec where it starts with "spec.", else of app.
func busyboxPod(name string, fields ...string) string {
	var meta, spec, app strings.Builder
	for _, f := range fields {
		if m, ok := strings.CutPrefix(f, "metadata."); ok {
			meta.WriteString("  " + m + "\n")
		} else if s, ok := strings.CutPrefix(f, "spec."); ok {
			spec.WriteString("  " + s + "\n")
		} else {
			app.WriteString("    " + f + "\n")
		}
	}
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n" + meta.String() + "spec:\n" + spec.String() +
		"  containers:\n  - name: app\n    image: " + simImage + "\n" + app.String()
}

// manifests joins manifests into one file.
func manifests(docs ...string) string { return strings.Join(docs, "---\n") }

// Fields of busyboxPod that many pods share.
const (
	grace2       = "spec.terminationGracePeriodSeconds: 2"
	neverRestart = "spec.restartPolicy: Never"
	sleepForever = `command: ["sleep", "infinity"]`
	touchReady   = `command: ["sh", "-c", "touch /tmp/ready; sleep infinity"]`
	// readyFile is ready once touchReady ran.
	readyFile = `readinessProbe: {exec: {command: ["test", "-f", "/tmp/ready"]}, periodSeconds: 1}`
)

func podYAML(name, image, restartPolicy, command string) string {
	if restartPolicy == "" {
		restartPolicy = "Always"
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: %s
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %s
    command: %s
`, name, restartPolicy, image, command)
}
