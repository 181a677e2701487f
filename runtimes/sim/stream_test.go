package sim

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// spdyStream runs one exec or attach at rawURL as kubectl does; the
// streams must be those of the request (stdout always, stderr unless tty).
func spdyStream(t *testing.T, rawURL string, stdin io.Reader, tty bool) (stdout, stderr string, err error) {
	return spdyStreams(t, rawURL, stdin, !tty, tty)
}

func spdyStreams(t *testing.T, rawURL string, stdin io.Reader, withStderr, tty bool) (stdout, stderr string, err error) {
	t.Helper()
	u, perr := url.Parse(rawURL)
	if perr != nil {
		t.Fatal(perr)
	}
	ex, perr := remotecommand.NewSPDYExecutor(&rest.Config{}, http.MethodPost, u)
	if perr != nil {
		t.Fatal(perr)
	}
	var o, e bytes.Buffer
	opts := remotecommand.StreamOptions{Stdin: stdin, Stdout: &o, Tty: tty}
	if withStderr {
		opts.Stderr = &e
	}
	err = ex.StreamWithContext(ctx(t), opts)
	return o.String(), e.String(), err
}

func exitCode(err error) (int, bool) {
	var ee utilexec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitStatus(), true
	}
	return 0, false
}

func TestStreamingExec(t *testing.T) {
	e := newEnv(t, Config{})
	_, id := e.run(t, "exec", "sleep", "infinity")
	tests := []struct {
		name       string
		cmd        []string
		stdin      string
		tty        bool
		wantStdout string
		wantStderr string
		wantExit   int
	}{
		{name: "echo", cmd: []string{"echo", "hello"}, wantStdout: "hello\n"},
		{name: "exit code", cmd: []string{"sh", "-c", "exit 3"}, wantExit: 3},
		{name: "stderr", cmd: []string{"cat", "/nope"}, wantStderr: "cat: can't open '/nope': No such file or directory\n", wantExit: 1},
		{name: "stdin through cat", cmd: []string{"cat"}, stdin: "piped\nthrough\n", wantStdout: "piped\nthrough\n"},
		{name: "interactive shell", cmd: []string{"sh"}, stdin: "echo one > /tmp/f\ncat /tmp/f\necho two\nexit 4\necho never\n", wantStdout: "one\ntwo\n", wantExit: 4},
		{name: "tty merges stderr", cmd: []string{"sh", "-c", "echo out; cat /nope"}, tty: true, wantStdout: "out\ncat: can't open '/nope': No such file or directory\n", wantExit: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := e.rt.Exec(ctx(t), &runtimeapi.ExecRequest{
				ContainerId: id, Cmd: tt.cmd, Stdin: tt.stdin != "", Stdout: true, Stderr: !tt.tty, Tty: tt.tty,
			})
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			var in io.Reader
			if tt.stdin != "" {
				in = strings.NewReader(tt.stdin)
			}
			out, errOut, err := spdyStream(t, resp.Url, in, tt.tty)
			code, isExit := exitCode(err)
			switch {
			case tt.wantExit == 0 && err != nil:
				t.Fatalf("stream: %v", err)
			case tt.wantExit != 0 && (!isExit || code != tt.wantExit):
				t.Fatalf("stream err = %v, want exit code %d", err, tt.wantExit)
			}
			if out != tt.wantStdout || errOut != tt.wantStderr {
				t.Fatalf("stdout %q stderr %q, want %q %q", out, errOut, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

func TestStreamingRequestErrors(t *testing.T) {
	e := newEnv(t, Config{})
	sb, id := e.run(t, "run", "sleep", "infinity")
	_, done := e.run(t, "done", "true")
	e.waitState(t, done, runtimeapi.ContainerState_CONTAINER_EXITED)
	c := ctx(t)
	_, err := e.rt.Exec(c, &runtimeapi.ExecRequest{ContainerId: "nope", Cmd: []string{"true"}, Stdout: true})
	wantCode(t, err, codes.NotFound)
	_, err = e.rt.Exec(c, &runtimeapi.ExecRequest{ContainerId: done, Cmd: []string{"true"}, Stdout: true})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = e.rt.Exec(c, &runtimeapi.ExecRequest{ContainerId: id, Stdout: true})
	wantCode(t, err, codes.InvalidArgument)
	_, err = e.rt.Exec(c, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"true"}})
	wantCode(t, err, codes.InvalidArgument) // no stream at all
	_, err = e.rt.Attach(c, &runtimeapi.AttachRequest{ContainerId: done, Stdout: true})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = e.rt.PortForward(c, &runtimeapi.PortForwardRequest{PodSandboxId: "nope"})
	wantCode(t, err, codes.NotFound)
	_, err = e.rt.PortForward(c, &runtimeapi.PortForwardRequest{PodSandboxId: sb, Port: []int32{70000}})
	wantCode(t, err, codes.InvalidArgument)

	// A URL is single use.
	resp, err := e.rt.Exec(c, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"true"}, Stdout: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := spdyStreams(t, resp.Url, nil, false, false); err != nil {
		t.Fatalf("first use: %v", err)
	}
	if _, _, err := spdyStreams(t, resp.Url, nil, false, false); err == nil {
		t.Fatal("second use of an exec URL succeeded")
	}
}

func TestStreamingAttach(t *testing.T) {
	e := newEnv(t, Config{})
	_, id := e.run(t, "attach", "sleep", "infinity")
	resp, err := e.rt.Attach(ctx(t), &runtimeapi.AttachRequest{ContainerId: id, Stdout: true, Stderr: true})
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	type result struct {
		out, errOut string
		err         error
	}
	res := make(chan result, 1)
	go func() {
		o, eo, err := spdyStream(t, resp.Url, nil, false)
		res <- result{o, eo, err}
	}()
	// Once the client is attached, the container's program writes.
	attached := func() bool {
		e.r.mu.Lock()
		defer e.r.mu.Unlock()
		return len(e.r.containers[id].attached) == 1
	}
	eventually(t, "client attached", attached)
	e.r.mu.Lock()
	p := e.r.containers[id].proc
	p.emit(runtimeapi.Stdout, []byte("to stdout\n"))
	p.emit(runtimeapi.Stderr, []byte("to stderr\n"))
	e.r.mu.Unlock()
	// Stopping the container ends the attach.
	if _, err := e.rt.StopContainer(ctx(t), &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil || r.out != "to stdout\n" || r.errOut != "to stderr\n" {
		t.Fatalf("attach = %q %q %v", r.out, r.errOut, r.err)
	}
}

func TestStreamingPortForward(t *testing.T) {
	e := newEnv(t, Config{})
	sb, _ := e.run(t, "web", "httpd", "-p", "8080")
	var ip string
	eventually(t, "httpd listening", func() bool {
		st, err := e.rt.PodSandboxStatus(ctx(t), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
		if err != nil {
			return false
		}
		ip = st.Status.GetNetwork().GetIp()
		return dialable(net.JoinHostPort(ip, "8080"))
	})
	resp, err := e.rt.PortForward(ctx(t), &runtimeapi.PortForwardRequest{PodSandboxId: sb})
	if err != nil {
		t.Fatalf("PortForward: %v", err)
	}
	u, _ := url.Parse(resp.Url)
	rt, upgrader, err := spdy.RoundTripperFor(&rest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8080", "0:9"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("ForwardPorts: %v", err)
	}
	defer func() { close(stop); <-errc }()
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 2 {
		t.Fatalf("GetPorts = %v, %v", ports, err)
	}
	for i := 0; i < 2; i++ { // two requests: the forward outlives one connection
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		r, err := hc.Get("http://127.0.0.1:" + strconv.Itoa(int(ports[0].Local)) + "/")
		if err != nil {
			t.Fatalf("GET through the forward: %v", err)
		}
		b, _ := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if r.StatusCode != http.StatusOK || string(b) != "ok\n" {
			t.Fatalf("GET = %d %q", r.StatusCode, b)
		}
	}
	// Nothing listens on port 9 in the pod: the connection is closed.
	conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(int(ports[1].Local)))
	if err == nil {
		_, rerr := conn.Read(make([]byte, 1))
		_ = conn.Close()
		if rerr == nil {
			t.Fatal("read from a forward to a closed port succeeded")
		}
	}
}
