package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// containerLogs GETs /containerLogs/{ns}/{pod}/{container} on the main port.
func (a *agent) containerLogs(ns, pod, ctr, query string) (int, string, error) {
	u := a.mainURL(fmt.Sprintf("/containerLogs/%s/%s/%s", url.PathEscape(ns), url.PathEscape(pod), url.PathEscape(ctr)))
	if query != "" {
		u += "?" + query
	}
	resp, err := a.mainClient().Get(u)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// waitLog waits (what: for what) until the log of container ctr of pod
// (namespace default) satisfies ok.
func (a *agent) waitLog(t *testing.T, pod, ctr, what string, ok func(log string) bool) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, what, func() (bool, error) {
		_, log, err := a.containerLogs("default", pod, ctr, "")
		if err != nil {
			return false, err
		}
		return ok(log), fmt.Errorf("log %q", log)
	})
}

// requireLogsRoute checks that the node API answers an unknown pod with the
// container logs handler's own 404 (naming the pod), not the mux's.
func requireLogsRoute(t *testing.T, a *agent) {
	t.Helper()
	code, body, err := a.containerLogs("default", "no-such-pod", "main", "")
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusNotFound || !strings.Contains(body, "no-such-pod") {
		t.Fatalf("GET /containerLogs of an unknown pod: %d %q, want 404 naming the pod", code, body)
	}
}

// waitLogs waits until the container's log reads want.
func waitLogs(t *testing.T, a *agent, pod, ctr, query, want string) {
	t.Helper()
	testenv.WaitFor(t, time.Minute, fmt.Sprintf("logs of %s/%s?%s = %q", pod, ctr, query, want), func() (bool, error) {
		code, body, err := a.containerLogs("default", pod, ctr, query)
		if err != nil {
			return false, err
		}
		return code == http.StatusOK && body == want, fmt.Errorf("%d %q", code, body)
	})
}

// followLogs opens a followed log and returns its lines as they arrive; the
// channel closes when the server ends the stream.
func followLogs(t *testing.T, ctx context.Context, a *agent, pod, ctr, query string) <-chan string {
	t.Helper()
	u := a.mainURL(fmt.Sprintf("/containerLogs/default/%s/%s?follow=true&%s", pod, ctr, query))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	c := a.mainClient()
	c.Timeout = 0 // a followed log lasts as long as the test wants
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		t.Fatalf("follow %s: %d %s", u, resp.StatusCode, b)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		defer func() { _ = resp.Body.Close() }()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

func nextLine(t *testing.T, lines <-chan string, timeout time.Duration) (string, bool) {
	t.Helper()
	select {
	case l, ok := <-lines:
		return l, ok
	case <-time.After(timeout):
		t.Fatalf("no line within %s", timeout)
		return "", false
	}
}

// checkTalkerLogs checks a running container that printed "one" and "two"
// and sleeps: what `kubectl logs` would show with each option.
func checkTalkerLogs(t *testing.T, a *agent, pod string) {
	t.Helper()
	waitLogs(t, a, pod, "main", "", "one\ntwo\n")
	for _, tc := range []struct {
		name, query string
		ctr         string
		code        int
		body        string // exact on 200, substring otherwise
	}{
		{name: "tailLines", query: "tailLines=1", code: 200, body: "two\n"},
		{name: "limitBytes", query: "limitBytes=6", code: 200, body: "one\ntw"},
		{name: "sinceSeconds", query: "sinceSeconds=3600", code: 200, body: "one\ntwo\n"},
		{name: "no previous attempt", query: "previous=true", code: 400, body: "previous terminated container"},
		{name: "unknown container", ctr: "nope", code: 404, body: `container "nope" not found`},
		{name: "bad tailLines", query: "tailLines=-3", code: 400, body: "invalid tailLines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctr := tc.ctr
			if ctr == "" {
				ctr = "main"
			}
			code, body, err := a.containerLogs("default", pod, ctr, tc.query)
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || (code == 200 && body != tc.body) || (code != 200 && !strings.Contains(body, tc.body)) {
				t.Errorf("%s: %d %q, want %d %q", tc.query, code, body, tc.code, tc.body)
			}
		})
	}
	t.Run("unknown pod", func(t *testing.T) {
		code, body, err := a.containerLogs("default", "nope", "main", "")
		if err != nil || code != http.StatusNotFound || !strings.Contains(body, `pod "nope" does not exist`) {
			t.Errorf("%d %q %v", code, body, err)
		}
	})
	t.Run("timestamps", func(t *testing.T) {
		code, body, err := a.containerLogs("default", pod, "main", "timestamps=true")
		if err != nil || code != http.StatusOK {
			t.Fatalf("%d %q %v", code, body, err)
		}
		lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
		if len(lines) != 2 {
			t.Fatalf("%q", body)
		}
		for i, want := range []string{"one", "two"} {
			ts, text, _ := strings.Cut(lines[i], " ")
			when, err := time.Parse(time.RFC3339Nano, ts)
			if err != nil || text != want || time.Since(when) > 10*time.Minute {
				t.Errorf("line %q: timestamp %v (%v), text %q, want %q", lines[i], when, err, text, want)
			}
		}
	})
	t.Run("follow", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		lines := followLogs(t, ctx, a, pod, "main", "")
		for _, want := range []string{"one", "two"} {
			if l, ok := nextLine(t, lines, 30*time.Second); !ok || l != want {
				t.Fatalf("line %q (open %v), want %q", l, ok, want)
			}
		}
		// The container sleeps: the stream stays open, with nothing more.
		select {
		case l, ok := <-lines:
			t.Fatalf("unexpected %q (open %v) from a sleeping container", l, ok)
		case <-time.After(time.Second):
		}
	})
}

// checkCrasherLogs checks a container that printed "ran" and exited, at
// least once restarted: the previous attempt's log, and a followed log that
// ends when the next attempt starts.
func checkCrasherLogs(t *testing.T, a *agent, pod string) {
	t.Helper()
	a.waitPod(3*time.Minute, pod, "restarted", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	waitLogs(t, a, pod, "main", "previous=true", "ran\n")
	t.Run("follow ends when the next attempt starts", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The current attempt may not have written yet: wait for its log.
		waitLogs(t, a, pod, "main", "", "ran\n")
		lines := followLogs(t, ctx, a, pod, "main", "")
		if l, ok := nextLine(t, lines, 30*time.Second); !ok || l != "ran" {
			t.Fatalf("line %q (open %v), want ran", l, ok)
		}
		if l, ok := nextLine(t, lines, time.Minute); ok {
			t.Fatalf("line %q, want the end of the stream", l)
		}
	})
}

func TestE2ESimContainerLogs(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "talker.yaml", podYAML("talker", simImage, "", `["sh", "-c", "echo one; echo two; sleep infinity"]`))
	writeManifest(t, dir, "crasher.yaml", podYAML("crasher", simImage, "Always", `["sh", "-c", "echo ran; exit 3"]`))
	a := startAgent(t, agentOpts{manifestDir: dir, extra: []string{
		"--crashloop-backoff-initial", "500ms", "--crashloop-backoff-max", "2s",
	}})
	requireLogsRoute(t, a)
	a.waitPod(time.Minute, "talker-e2e-node", "Running", isRunning)
	t.Run("talker", func(t *testing.T) { checkTalkerLogs(t, a, "talker-e2e-node") })
	t.Run("crasher", func(t *testing.T) { checkCrasherLogs(t, a, "crasher-e2e-node") })
	// Not served on the read-only port, as upstream.
	if code := statusOf(t)(http.Get(fmt.Sprintf("http://127.0.0.1:%d/containerLogs/default/talker-e2e-node/main", a.roPort))); code != http.StatusNotFound {
		t.Errorf("read-only port: %d, want 404", code)
	}
}

func TestE2EContainerdContainerLogs(t *testing.T) {
	dir := t.TempDir()
	a, image := startContainerdAgent(t, dir, "--crashloop-backoff-initial", "1s", "--crashloop-backoff-max", "2s")
	requireLogsRoute(t, a)
	writeManifest(t, dir, "talker.yaml", podYAML("talker", image, "", `["sh", "-c", "echo one; echo two; sleep 3600"]`))
	writeManifest(t, dir, "crasher.yaml", podYAML("crasher", image, "Always", `["sh", "-c", "echo ran; exit 3"]`))
	p := a.waitPod(2*time.Minute, "talker-e2e-node", "Running", isRunning)
	c := a.waitPod(2*time.Minute, "crasher-e2e-node", "started", func(p *v1.Pod) bool { return p.UID != "" })
	t.Run("talker", func(t *testing.T) { checkTalkerLogs(t, a, "talker-e2e-node") })
	t.Run("crasher", func(t *testing.T) { checkCrasherLogs(t, a, "crasher-e2e-node") })
	cleanupPods(t, a, dir, string(p.UID), string(c.UID))
}
