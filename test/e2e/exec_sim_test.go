package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	clientspdy "k8s.io/client-go/transport/spdy"
	clientexec "k8s.io/client-go/util/exec"

	"github.com/actorlet/actorlet/internal/actortest"
)

// The streaming endpoints of the node API (/exec, /attach, /portForward),
// reached directly on --port as the API server reaches them, with client-go's
// SPDY clients (what kubectl exec / attach / port-forward use).

// restConfig reaches --port as mainClient does: the agent's self-signed
// serving certificate as root, the test's client certificate if any.
func (a *agent) restConfig() *rest.Config {
	a.t.Helper()
	ca, err := os.ReadFile(filepath.Join(a.rootDir, "pki", "kubelet.crt"))
	if err != nil {
		a.t.Fatalf("the agent's self-signed serving certificate: %v", err)
	}
	cfg := &rest.Config{Host: a.mainURL(""), TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	if c := a.clientCert; c != nil && len(c.Certificate) > 0 {
		key, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
		if err != nil {
			a.t.Fatal(err)
		}
		for _, der := range c.Certificate {
			cfg.CertData = append(cfg.CertData, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
		}
		cfg.KeyData = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})
	}
	return cfg
}

// spdyTransport is an upgrading round tripper to --port.
func (a *agent) spdyTransport() (http.RoundTripper, clientspdy.Upgrader) {
	a.t.Helper()
	rt, up, err := clientspdy.RoundTripperFor(a.restConfig())
	if err != nil {
		a.t.Fatal(err)
	}
	return rt, up
}

type execResult struct {
	stdout, stderr string
	err            error
}

// exitCode is the exit code carried by a stream error, if it is one.
func exitCode(err error) (int, bool) {
	var ee clientexec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitStatus(), true
	}
	return 0, false
}

// execIn runs cmd in ns/pod/ctr through /exec with stdout and stderr (and
// stdin when given), as `kubectl exec` does: over SPDY, or over a v5
// WebSocket with websocket set.
func (a *agent) execIn(ctx context.Context, websocket bool, pod, ctr string, stdin io.Reader, cmd ...string) execResult {
	a.t.Helper()
	q := url.Values{"command": cmd, "output": {"1"}, "error": {"1"}} // as the API server asks
	if stdin != nil {
		q.Set("input", "1")
	}
	return a.stream(ctx, websocket, fmt.Sprintf("/exec/default/%s/%s", pod, ctr), q, stdin)
}

// stream runs one exec or attach at path with the query's streams.
func (a *agent) stream(ctx context.Context, websocket bool, path string, q url.Values, stdin io.Reader) execResult {
	a.t.Helper()
	u, err := url.Parse(a.mainURL(path) + "?" + q.Encode())
	if err != nil {
		a.t.Fatal(err)
	}
	var ex remotecommand.Executor
	if websocket {
		ex, err = remotecommand.NewWebSocketExecutor(a.restConfig(), http.MethodGet, u.String())
	} else {
		rt, up := a.spdyTransport()
		ex, err = remotecommand.NewSPDYExecutorForTransports(rt, up, http.MethodPost, u)
	}
	if err != nil {
		a.t.Fatal(err)
	}
	var out, errOut actortest.SyncBuffer
	opts := remotecommand.StreamOptions{Stdin: stdin}
	if q.Get("output") == "1" {
		opts.Stdout = &out
	}
	if q.Get("error") == "1" {
		opts.Stderr = &errOut
	}
	err = ex.StreamWithContext(ctx, opts)
	return execResult{stdout: out.String(), stderr: errOut.String(), err: err}
}

// forward starts a port forward of ports ("local:remote", local 0 = any)
// to ns/pod and returns the local ports; it ends with the test.
func (a *agent) forward(pod string, ports ...string) []portforward.ForwardedPort {
	a.t.Helper()
	u, err := url.Parse(a.mainURL(fmt.Sprintf("/portForward/default/%s", pod)))
	if err != nil {
		a.t.Fatal(err)
	}
	rt, up := a.spdyTransport()
	dialer := clientspdy.NewDialer(up, &http.Client{Transport: rt}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	var errOut actortest.SyncBuffer
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, ports, stop, ready, io.Discard, &errOut)
	if err != nil {
		a.t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		a.t.Fatalf("port forward to %s: %v", pod, err)
	case <-time.After(30 * time.Second):
		a.t.Fatalf("port forward to %s: not ready within 30s", pod)
	}
	a.t.Cleanup(func() { close(stop); <-errc })
	got, err := fw.GetPorts()
	if err != nil {
		a.t.Fatal(err)
	}
	return got
}

// getThrough GETs / on a forwarded local port.
func getThrough(local uint16) (int, string, error) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://127.0.0.1:" + strconv.Itoa(int(local)) + "/")
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// checkExec is what both runtimes must do: echo, exit codes, stdin, over
// SPDY and over WebSocket; and the refusals.
func checkExec(t *testing.T, a *agent, pod string) {
	for _, proto := range []string{"spdy", "websocket"} {
		t.Run(proto, func(t *testing.T) { checkExecOver(t, a, proto == "websocket", pod) })
	}
	t.Run("refusals", func(t *testing.T) { checkRefusals(t, a, pod) })
}

func checkExecOver(t *testing.T, a *agent, ws bool, pod string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Run("echo", func(t *testing.T) {
		r := a.execIn(ctx, ws, pod, "main", nil, "echo", "hello")
		if r.err != nil || r.stdout != "hello\n" {
			t.Fatalf("exec echo hello = %q %q %v", r.stdout, r.stderr, r.err)
		}
	})
	t.Run("exit code", func(t *testing.T) {
		r := a.execIn(ctx, ws, pod, "main", nil, "sh", "-c", "echo partial; exit 3")
		if code, ok := exitCode(r.err); !ok || code != 3 {
			t.Fatalf("exec exit 3: err = %v (%T), want an exit code error with 3", r.err, r.err)
		}
		if r.stdout != "partial\n" {
			t.Fatalf("stdout = %q", r.stdout)
		}
	})
	t.Run("stderr", func(t *testing.T) {
		r := a.execIn(ctx, ws, pod, "main", nil, "cat", "/no/such/file")
		if code, ok := exitCode(r.err); !ok || code != 1 || !strings.Contains(r.stderr, "/no/such/file") {
			t.Fatalf("exec cat missing = %q %q %v", r.stdout, r.stderr, r.err)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		in := "line one\nline two\n"
		r := a.execIn(ctx, ws, pod, "main", strings.NewReader(in), "cat")
		if r.err != nil || r.stdout != in {
			t.Fatalf("exec cat with stdin = %q %q %v", r.stdout, r.stderr, r.err)
		}
	})
}

// checkRefusals: clear 4xx answers for what cannot stream.
func checkRefusals(t *testing.T, a *agent, pod string) {
	{
		c := a.mainClient()
		for _, tc := range []struct {
			path string
			code int
		}{
			{"/exec/default/no-such-pod/main?command=ls&output=1", http.StatusNotFound},
			{"/exec/default/" + pod + "/no-such-container?command=ls&output=1", http.StatusNotFound},
			{"/exec/default/" + pod + "/main?output=1", http.StatusBadRequest},            // no command
			{"/exec/default/" + pod + "/main?command=ls", http.StatusBadRequest},          // no stream
			{"/exec/default/" + pod + "/main?command=ls&output=1", http.StatusBadRequest}, // not an upgrade
			{"/portForward/default/" + pod + "?port=99999", http.StatusBadRequest},
		} {
			resp, err := c.Post(a.mainURL(tc.path), "text/plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Errorf("POST %s = %d %q, want %d", tc.path, resp.StatusCode, b, tc.code)
			}
		}
	}
}

// checkAttach attaches to a container that prints "tick" every half second
// and waits for one.
func checkAttach(t *testing.T, a *agent, pod string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := url.Parse(a.mainURL(fmt.Sprintf("/attach/default/%s/main", pod)) + "?output=1&error=1")
	if err != nil {
		t.Fatal(err)
	}
	rt, up := a.spdyTransport()
	ex, err := remotecommand.NewSPDYExecutorForTransports(rt, up, http.MethodPost, u)
	if err != nil {
		t.Fatal(err)
	}
	out := &actortest.SyncBuffer{}
	wrote := out.Wrote()
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- ex.StreamWithContext(sctx, remotecommand.StreamOptions{Stdout: out, Stderr: io.Discard})
	}()
	for !strings.Contains(out.String(), "tick") {
		select {
		case <-wrote:
		case err := <-done:
			stop()
			t.Fatalf("attach ended before any output: %v (got %q)", err, out.String())
		case <-ctx.Done():
			stop()
			t.Fatalf("attach: no tick within a minute (got %q)", out.String())
		}
	}
	stop() // the client leaves: the stream ends
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("attach did not end after the client cancelled")
	}
}

// tickScript prints "tick" every half second for a while, then sleeps.
func tickScript(n int) string {
	return "sleep 0.5" + strings.Repeat("; echo tick; sleep 0.5", n) + "; sleep 3600"
}

func TestE2EExecSim(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "shell.yaml", podYAML("shell", simImage, "", `["sleep", "infinity"]`))
	writeManifest(t, dir, "web.yaml", podYAML("web", simImage, "", `["httpd", "-f", "-p", "8080"]`))
	writeManifest(t, dir, "ticker.yaml", podYAML("ticker", simImage, "", fmt.Sprintf("[\"sh\", \"-c\", %q]", tickScript(240))))
	a := startAgent(t, agentOpts{manifestDir: dir})
	for _, p := range []string{"shell", "web", "ticker"} {
		a.waitPod(time.Minute, p+"-e2e-node", "Running", isRunning)
	}
	checkStreaming(t, a, "ok\n")
}

// checkStreaming runs exec in shell-e2e-node, a port forward to port 8080 of
// web-e2e-node (whose server answers body) and attach to ticker-e2e-node
// (tickScript).
func checkStreaming(t *testing.T, a *agent, body string) {
	t.Run("exec", func(t *testing.T) { checkExec(t, a, "shell-e2e-node") })
	t.Run("port-forward", func(t *testing.T) {
		ports := a.forward("web-e2e-node", "0:8080")
		for i := 0; i < 2; i++ { // each connection is a new stream
			code, got, err := getThrough(ports[0].Local)
			if err != nil || code != http.StatusOK || got != body {
				t.Fatalf("GET through the forward = %d %q %v", code, got, err)
			}
		}
	})
	t.Run("attach", func(t *testing.T) { checkAttach(t, a, "ticker-e2e-node") })
}
