package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// The pod issue 9 pushed from another machine: privileged, host network,
// host PID, the host's / mounted.
var hostilePod = busyboxPod("root-me", sleepForever,
	"spec.hostNetwork: true", "spec.hostPID: true",
	"securityContext: {privileged: true}",
	"volumeMounts: [{name: host, mountPath: /host}]",
	"spec.volumes: [{name: host, hostPath: {path: /}}]")

// Issue 9, failure 7: with upstream's flag defaults (--anonymous-auth=true,
// --authorization-mode=AlwaysAllow, --address 0.0.0.0) a request without
// credentials from another machine (here: from the machine's own
// non-loopback address, which is not loopback to the agent) cannot push or
// delete a pod or exec, gets 403 saying why, and may still read; from
// loopback the README's quick-start lines still work. With
// --insecure-anonymous-remote-writes it is open again, and the start-up log
// says so at WARN.
func TestE2EDefaultsRefuseAnonymousRemoteWrites(t *testing.T) {
	ip := nonLoopbackIPv4(t)
	dir := t.TempDir()
	writeManifest(t, dir, "stay.yaml", busyboxPod("stay", sleepForever))
	a := startAgent(t, agentOpts{manifestDir: dir, extra: []string{"--address", "0.0.0.0", "--node-ip", ip}})
	const stay = "stay-e2e-node" // a static pod: named <name>-<node>
	a.waitPod(time.Minute, stay, "running", isRunning)

	send := func(host, method, path, body string) (int, string) {
		t.Helper()
		a.host = host
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, a.mainURL(path), rd)
		if err != nil {
			t.Fatal(err)
		}
		c := a.mainClientAs(nil)
		// The serving certificate names the node IP, not 127.0.0.1.
		c.Transport.(*http.Transport).TLSClientConfig.ServerName = ip
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}

	// From the non-loopback address: writes and exec refused, with why.
	code, body := send(ip, http.MethodPost, "/pods", hostilePod)
	if code != http.StatusForbidden || !strings.Contains(body, "only from this machine (loopback), not from "+ip) {
		t.Fatalf("anonymous push from %s: %d %q, want 403 explaining the loopback rule", ip, code, body)
	}
	if code, body := send(ip, http.MethodDelete, "/pods/default/"+stay, ""); code != http.StatusForbidden {
		t.Fatalf("anonymous delete from %s: %d %q, want 403", ip, code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, ws := range []bool{true, false} {
		a.host = ip
		r := a.execIn(ctx, ws, stay, "app", nil, "id")
		if r.err == nil || r.stdout != "" {
			t.Fatalf("anonymous exec from %s (websocket %v) ran: %q %v", ip, ws, r.stdout, r.err)
		}
	}
	// Reads stay open, as upstream.
	if code, body := send(ip, http.MethodGet, "/pods", ""); code != http.StatusOK || !strings.Contains(body, `"`+stay+`"`) {
		t.Fatalf("anonymous read from %s: %d %.200q, want 200 with the pods", ip, code, body)
	}
	if p, err := a.pod("root-me"); p != nil || !strings.Contains(fmt.Sprint(err), "not listed") {
		t.Fatalf("the refused pod is known to the node: %v %v", p, err)
	}
	for _, sb := range allSandboxes(t, a.runtime()) {
		if sb.GetMetadata().GetName() == "root-me" {
			t.Fatalf("the refused pod has a sandbox in the runtime: %v", sb.GetMetadata())
		}
	}
	if p, err := a.pod(stay); err != nil || p == nil {
		t.Fatalf("the refused delete removed stay: %v %v", p, err)
	}
	if !a.logContains("refused an anonymous request from another machine") {
		t.Fatal("no log line for the refused requests")
	}

	// From loopback the README's quick start works as before (push here;
	// exec, attach and port-forward from loopback without credentials are
	// what exec_sim_test.go does).
	if code, body := send("127.0.0.1", http.MethodPost, "/pods", busyboxPod("hello", sleepForever)); code != http.StatusCreated {
		t.Fatalf("anonymous push from loopback: %d %q, want 201", code, body)
	}
	a.waitPod(time.Minute, "hello-e2e-node", "running", isRunning)
	if code, body := send("127.0.0.1", http.MethodDelete, "/pods/default/hello-e2e-node", ""); code != http.StatusOK {
		t.Fatalf("anonymous delete from loopback: %d %q, want 200", code, body)
	}

	t.Run("opened by flag", func(t *testing.T) {
		b := startAgent(t, agentOpts{extra: []string{"--address", "0.0.0.0", "--node-ip", ip, "--insecure-anonymous-remote-writes"}})
		log, err := os.ReadFile(b.logPath)
		if err != nil {
			t.Fatal(err)
		}
		warned := false
		for _, line := range strings.Split(string(log), "\n") {
			warned = warned || strings.Contains(line, "level=WARN") && strings.Contains(line, "NODE API OPEN WITHOUT CREDENTIALS") &&
				strings.Contains(line, "any machine that reaches 0.0.0.0:") && strings.Contains(line, "POST /pods")
		}
		if !warned {
			t.Fatalf("no start-up warning naming what is open to whom:\n%s", b.logTail(30))
		}
		b.host = ip
		req, _ := http.NewRequest(http.MethodPost, b.mainURL("/pods"), strings.NewReader(busyboxPod("opened", sleepForever)))
		resp, err := b.mainClientAs(nil).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("anonymous push from %s with the flag: %d, want 201", ip, resp.StatusCode)
		}
	})
}
