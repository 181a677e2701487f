package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	clientexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/fakecri"
	"github.com/actorlet/actorlet/podspec"
)

var _ StreamingRuntime = (*fakecri.Runtime)(nil)

func ctrLabels(uid, name string) map[string]string {
	return map[string]string{podspec.LabelPodUID: uid, podspec.LabelContainerName: name}
}

// newStreamFixture: pod default/web (uid u1) with containers app (running
// twice: an old exited instance and the current one), side (exited) and
// init (not created yet); one ready sandbox.
func newStreamFixture() (*fakecri.Runtime, ResolveFunc) {
	rt := fakecri.New(nil)
	rt.Replace(
		[]*runtimeapi.PodSandbox{
			{Id: "sb-old", CreatedAt: 1, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, Labels: map[string]string{podspec.LabelPodUID: "u1"}},
			{Id: "sb-1", CreatedAt: 2, State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: map[string]string{podspec.LabelPodUID: "u1"}},
		},
		[]*runtimeapi.Container{
			{Id: "app-old", CreatedAt: 1, State: runtimeapi.ContainerState_CONTAINER_EXITED, Labels: ctrLabels("u1", "app")},
			{Id: "app-1", CreatedAt: 2, State: runtimeapi.ContainerState_CONTAINER_RUNNING, Labels: ctrLabels("u1", "app")},
			{Id: "side-1", CreatedAt: 2, State: runtimeapi.ContainerState_CONTAINER_EXITED, Labels: ctrLabels("u1", "side")},
			{Id: "other", CreatedAt: 3, State: runtimeapi.ContainerState_CONTAINER_RUNNING, Labels: ctrLabels("u2", "app")},
		})
	resolve := func(_ context.Context, ns, name string) (string, map[string]ResolvedContainer, error) {
		switch {
		case ns == "default" && name == "web":
			return "u1", map[string]ResolvedContainer{"app": {Attempt: 1}, "side": {}, "init": {}}, nil
		case ns == "default" && name == "stopped":
			return "u3", map[string]ResolvedContainer{"app": {}}, nil
		case ns == "down":
			return "", nil, fmt.Errorf("ask status actor: %w", errdefs.ErrUnavailable)
		}
		return "", nil, fmt.Errorf("pod %s/%s: %w", ns, name, errdefs.ErrNotFound)
	}
	return rt, resolve
}

func upgradeRequest(method, target string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "SPDY/3.1")
	return r
}

func TestStreamingErrors(t *testing.T) {
	tests := []struct {
		name      string
		method    string
		target    string
		noUpgrade bool
		listErr   error
		callErr   error
		wantCode  int
		wantMsg   string
	}{
		{name: "unknown pod", target: "/exec/default/nope/app?command=ls&output=1", wantCode: 404, wantMsg: `pod "nope" does not exist`},
		{name: "wrong uid", target: "/exec/default/web/u9/app?command=ls&output=1", wantCode: 404, wantMsg: `pod "web" does not exist`},
		{name: "unknown container", target: "/exec/default/web/nope?command=ls&output=1", wantCode: 404, wantMsg: `container "nope" not found in pod default/web`},
		{name: "container exited", target: "/exec/default/web/side?command=ls&output=1", wantCode: 400, wantMsg: `container "side" in pod default/web is not running`},
		{name: "container not created", target: "/attach/default/web/init?output=1", wantCode: 400, wantMsg: "is waiting to start"},
		{name: "no command", target: "/exec/default/web/app?output=1", wantCode: 400, wantMsg: "command is required"},
		{name: "empty command", target: "/exec/default/web/app?command=&output=1", wantCode: 400, wantMsg: "command is required"},
		{name: "no stream", target: "/exec/default/web/app?command=ls", wantCode: 400, wantMsg: "at least 1 of input, output, error"},
		{name: "bad bool", target: "/exec/default/web/app?command=ls&stdout=yes%21", wantCode: 400, wantMsg: `invalid stdout "yes!"`},
		{name: "bad port", target: "/portForward/default/web?port=http", wantCode: 400, wantMsg: `invalid port "http"`},
		{name: "port zero", target: "/portForward/default/web?port=80,0", wantCode: 400, wantMsg: `invalid port "0"`},
		{name: "port too big", target: "/portForward/default/web?port=65536", wantCode: 400, wantMsg: "invalid port"},
		{name: "no ready sandbox", target: "/portForward/default/stopped", wantCode: 400, wantMsg: "has no ready sandbox"},
		{name: "not an upgrade", target: "/exec/default/web/app?command=ls&output=1", noUpgrade: true, wantCode: 400, wantMsg: "upgrade request required"},
		{name: "status actor down", target: "/exec/down/web/app?command=ls&output=1", wantCode: 503, wantMsg: "find pod down/web"},
		{name: "runtime down on list", target: "/exec/default/web/app?command=ls&output=1", listErr: errdefs.Wrap(errdefs.ErrUnavailable, fmt.Errorf("connection refused")), wantCode: 503, wantMsg: "connection refused"},
		{name: "runtime error", target: "/exec/default/web/app?command=ls&output=1", callErr: errdefs.Wrap(errdefs.ErrUnknown, fmt.Errorf("OCI runtime exec failed: no such file")), wantCode: 500, wantMsg: "OCI runtime exec failed: no such file"},
		{name: "container gone meanwhile", target: "/attach/default/web/app?output=1", callErr: errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("container not found")), wantCode: 404, wantMsg: "container not found"},
		{name: "streaming unimplemented", target: "/portForward/default/web", callErr: errdefs.Wrap(errdefs.ErrUnimplemented, fmt.Errorf("no streaming")), wantCode: 501, wantMsg: "no streaming"},
		{name: "wrong method", method: http.MethodPut, target: "/exec/default/web/app?command=ls&output=1", wantCode: 405},
		{name: "path too short", target: "/exec/default/web", wantCode: 404},
		{name: "path too long", target: "/exec/default/web/u1/app/more", wantCode: 404},
		{name: "escaped slash", target: "/exec/default/web/a%2Fb?command=ls&output=1", wantCode: 400, wantMsg: "invalid path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, resolve := newStreamFixture()
			for _, m := range []string{"ListContainers", "ListPodSandbox"} {
				rt.InjectAlways(m, tt.listErr)
			}
			for _, m := range []string{"Exec", "Attach", "PortForward"} {
				rt.InjectAlways(m, tt.callErr)
			}
			rt.SetStreamURL(&url.URL{Scheme: "http", Host: "127.0.0.1:1", Path: "/unused"})
			h := NewStreaming(resolve, rt, nil)
			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			r := upgradeRequest(method, tt.target)
			if tt.noUpgrade {
				r = httptest.NewRequest(method, tt.target, nil)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.wantCode || !strings.Contains(w.Body.String(), tt.wantMsg) {
				t.Fatalf("%s %s = %d %q, want %d containing %q", method, tt.target, w.Code, w.Body.String(), tt.wantCode, tt.wantMsg)
			}
			if tt.wantCode < 500 && tt.wantCode != 404 && tt.callErr == nil && rt.Count("Exec")+rt.Count("Attach")+rt.Count("PortForward") > 0 {
				t.Fatalf("the runtime was asked for a stream for a refused request: %v %v %v", rt.ExecRequests(), rt.AttachRequests(), rt.PortForwards())
			}
		})
	}
}

func TestParseStreamOptions(t *testing.T) {
	tests := []struct {
		name    string
		query   string
		want    streamOptions
		wantErr bool
	}{
		{name: "API server", query: "input=1&output=1&error=1", want: streamOptions{stdin: true, stdout: true, stderr: true}},
		{name: "PodExecOptions names", query: "stdin=1&stdout=1&stderr=1", want: streamOptions{stdin: true, stdout: true, stderr: true}},
		{name: "upstream name wins", query: "output=0&stdout=1&error=1", want: streamOptions{stderr: true}},
		{name: "booleans", query: "stdout=true&stderr=false", want: streamOptions{stdout: true}},
		{name: "bare flag", query: "stdout", want: streamOptions{stdout: true}},
		{name: "tty drops stderr", query: "stdout=1&stderr=1&tty=1", want: streamOptions{stdout: true, tty: true}},
		{name: "none", query: "tty=1", wantErr: true},
		{name: "garbage", query: "stdin=2", wantErr: true},
		{name: "garbage upstream", query: "input=yes", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tt.query)
			got, err := parseStreamOptions(q)
			if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
				t.Fatalf("parseStreamOptions(%q) = %+v, %v", tt.query, got, err)
			}
		})
	}
}

// upstreamEcho is a stand-in for a runtime's streaming server: it accepts
// the upgrade and echoes one line, prefixed with what it saw.
func upstreamEcho(t *testing.T) (*url.URL, chan *http.Request) {
	seen := make(chan *http.Request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Clone(context.Background())
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer func() { _ = conn.Close() }()
		_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n")
		line, _ := brw.ReadString('\n')
		_, _ = io.WriteString(conn, "echo: "+line)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL + "/exec/tok123")
	return u, seen
}

func TestStreamingProxiesTheUpgrade(t *testing.T) {
	tests := []struct {
		name     string
		target   string
		check    func(t *testing.T, rt *fakecri.Runtime)
		wantPath string
	}{
		{name: "exec", target: "/exec/default/web/app?command=sh&command=-c&command=echo+hi&input=1&output=1&tty=1", check: func(t *testing.T, rt *fakecri.Runtime) {
			got := rt.ExecRequests()[0]
			if got.ContainerId != "app-1" || strings.Join(got.Cmd, "|") != "sh|-c|echo hi" || !got.Stdin || !got.Stdout || got.Stderr || !got.Tty {
				t.Fatalf("ExecRequest = %v", got)
			}
		}},
		{name: "exec with uid", target: "/exec/default/web/u1/app?command=ls&output=1", check: func(t *testing.T, rt *fakecri.Runtime) {
			if got := rt.ExecRequests()[0]; got.ContainerId != "app-1" {
				t.Fatalf("ExecRequest = %v", got)
			}
		}},
		{name: "attach", target: "/attach/default/web/app?output=1&error=1", check: func(t *testing.T, rt *fakecri.Runtime) {
			got := rt.AttachRequests()[0]
			if got.ContainerId != "app-1" || !got.Stdout || !got.Stderr || got.Stdin {
				t.Fatalf("AttachRequest = %v", got)
			}
		}},
		{name: "port forward", target: "/portForward/default/web?port=8080&port=9090,80", check: func(t *testing.T, rt *fakecri.Runtime) {
			if got := rt.PortForwards(); len(got) != 1 || got[0].SandboxID != "sb-1" || fmt.Sprint(got[0].Ports) != "[8080 9090 80]" {
				t.Fatalf("PortForward = %+v", got)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, resolve := newStreamFixture()
			u, seen := upstreamEcho(t)
			rt.SetStreamURL(u)
			srv := httptest.NewServer(NewStreaming(resolve, rt, nil))
			defer srv.Close()

			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			_, _ = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: node\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nAuthorization: Bearer secret\r\nContent-Length: 0\r\n\r\n", tt.target)
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusSwitchingProtocols {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d %q, want 101", resp.StatusCode, b)
			}
			_, _ = io.WriteString(conn, "ping\n")
			line, err := br.ReadString('\n')
			if err != nil || line != "echo: ping\n" {
				t.Fatalf("through the proxy: %q, %v", line, err)
			}
			up := <-seen
			if up.URL.Path != "/exec/tok123" || up.Header.Get("Authorization") != "" {
				t.Fatalf("upstream saw %s with Authorization %q", up.URL.Path, up.Header.Get("Authorization"))
			}
			tt.check(t, rt)
		})
	}
}

func TestStreamStatus(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus string
		wantReason string
		wantCause  string
	}{
		{name: "success", wantStatus: "Success"},
		{name: "exit code", err: fmt.Errorf("stream: %w", clientexec.CodeExitError{Err: fmt.Errorf("exit 3"), Code: 3}), wantStatus: "Failure", wantReason: "NonZeroExitCode", wantCause: "3"},
		{name: "other", err: fmt.Errorf("connection reset"), wantStatus: "Failure", wantReason: "InternalError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := streamStatus(tt.err)
			if st.Status != tt.wantStatus || string(st.Reason) != tt.wantReason {
				t.Fatalf("status = %+v", st)
			}
			if tt.wantCause != "" && (st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Message != tt.wantCause || st.Details.Causes[0].Type != "ExitCode") {
				t.Fatalf("causes = %+v", st.Details)
			}
		})
	}
}

func TestStreamingRefusesWebSocketPortForwardTunnel(t *testing.T) {
	rt, resolve := newStreamFixture()
	h := NewStreaming(resolve, rt, nil)
	r := upgradeRequest(http.MethodGet, "/portForward/default/web")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Sec-WebSocket-Protocol", "SPDY/3.1+portforward.k8s.io")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusBadRequest || rt.Count("PortForward") != 0 {
		t.Fatalf("tunnel = %d %q (runtime asked %v), want 400 before the runtime is asked", w.Code, w.Body.String(), rt.PortForwards())
	}
}
