package sim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// The streaming server (exec, attach, port-forward) is the upstream CRI
// streaming library (k8s.io/cri-streaming, the one containerd uses), served
// on 127.0.0.1 on a port chosen by the kernel. It starts with the first
// streaming call, so a density run that never execs opens no listener.

// attachBuffer bounds the output queued for one attached client; a client
// that falls further behind loses output (the container never blocks).
const attachBuffer = 256

// streamState is the runtime's lazily started streaming server.
type streamState struct {
	mu     sync.Mutex
	srv    streaming.Server
	http   *http.Server
	closed bool
}

// streamingServer returns the streaming server, starting it if needed.
func (r *Runtime) streamingServer() (streaming.Server, error) {
	st := &r.stream
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil, status.Error(codes.Unavailable, "sim: runtime closed")
	}
	if st.srv != nil {
		return st.srv, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, status.Errorf(codes.Internal, "sim: streaming server: %v", err)
	}
	cfg := streaming.DefaultConfig
	cfg.Addr = ln.Addr().String()
	cfg.BaseURL = &url.URL{Scheme: "http", Host: ln.Addr().String()}
	srv, err := streaming.NewServer(cfg, &streamRuntime{r: r})
	if err != nil {
		_ = ln.Close()
		return nil, status.Errorf(codes.Internal, "sim: streaming server: %v", err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	st.srv, st.http = srv, hs
	return srv, nil
}

// closeStreaming stops the streaming server and ends its connections.
func (r *Runtime) closeStreaming() {
	st := &r.stream
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	if st.http != nil {
		_ = st.http.Close()
	}
}

// streamingTo returns the streaming server for a session with container id,
// which must be running.
func (r *Runtime) streamingTo(id string) (streaming.Server, error) {
	if err := r.runningContainer(id); err != nil {
		return nil, err
	}
	return r.streamingServer()
}

// runningContainer checks that id names a running container.
func (r *Runtime) runningContainer(id string) error {
	c, err := r.lockContainer(id)
	if err != nil {
		return err
	}
	defer r.mu.Unlock()
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return status.Errorf(codes.FailedPrecondition, "container %q is not in running state", id)
	}
	return nil
}

// Exec prepares a streaming exec in a running container and returns its URL.
func (r *Runtime) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if len(req.GetCmd()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "exec: empty command")
	}
	srv, err := r.streamingTo(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	return srv.GetExec(req)
}

// Attach prepares a streaming attach to a running container's output.
func (r *Runtime) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	srv, err := r.streamingTo(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	return srv.GetAttach(req)
}

// PortForward prepares a port forward into a ready sandbox.
func (r *Runtime) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	for _, p := range req.GetPort() {
		if p <= 0 || p > 65535 {
			return nil, status.Errorf(codes.InvalidArgument, "port forward: invalid port %d", p)
		}
	}
	r.mu.Lock()
	sb, ok := r.sandboxes[req.GetPodSandboxId()]
	ready := ok && sb.state == runtimeapi.PodSandboxState_SANDBOX_READY
	r.mu.Unlock()
	if !ok {
		return nil, notFound("pod sandbox", req.GetPodSandboxId())
	}
	if !ready {
		return nil, status.Errorf(codes.FailedPrecondition, "pod sandbox %q is not ready", req.GetPodSandboxId())
	}
	srv, err := r.streamingServer()
	if err != nil {
		return nil, err
	}
	return srv.GetPortForward(req)
}

// streamRuntime is what the streaming library calls once a client has
// connected to a URL.
type streamRuntime struct{ r *Runtime }

var _ streaming.Runtime = (*streamRuntime)(nil)

// Exec runs cmd in the container. `cat` without files copies stdin to
// stdout; `sh` without -c reads commands from stdin, one line at a time;
// anything else runs as ExecSync does, its output written when it ends. A
// non-zero exit code is returned as an exit error carrying the code.
func (s *streamRuntime) Exec(ctx context.Context, id string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, _ <-chan remotecommandserver.TerminalSize) error {
	defer closeAll(out, errw)
	if tty && errw == nil && out != nil {
		errw = nopCloser{out} // a terminal has one output stream
	}
	switch {
	case in != nil && isStdinCat(cmd):
		if out == nil {
			_, err := io.Copy(io.Discard, in)
			return err
		}
		_, err := io.Copy(out, in)
		return err
	case in != nil && isInteractiveShell(cmd):
		return s.shell(ctx, id, in, out, errw)
	}
	code, err := s.run(ctx, id, cmd, out, errw)
	if err != nil {
		return err
	}
	return exitError(code)
}

// shell runs each line read from in as a script, until EOF or `exit`.
func (s *streamRuntime) shell(ctx context.Context, id string, in io.Reader, out, errw io.Writer) error {
	sc := bufio.NewScanner(in)
	code := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var err error
		code, err = s.run(ctx, id, []string{"sh", "-c", line}, out, errw)
		if err != nil {
			return err
		}
		if f := strings.Fields(line); f[0] == "exit" {
			break
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return err
	}
	return exitError(code)
}

// run is one ExecSync: the same shell subset, the container's filesystem.
func (s *streamRuntime) run(ctx context.Context, id string, cmd []string, out, errw io.Writer) (int, error) {
	resp, err := s.r.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd})
	if err != nil {
		return 0, err
	}
	if out != nil && len(resp.GetStdout()) > 0 {
		if _, err := out.Write(resp.GetStdout()); err != nil {
			return 0, err
		}
	}
	if errw != nil && len(resp.GetStderr()) > 0 {
		if _, err := errw.Write(resp.GetStderr()); err != nil {
			return 0, err
		}
	}
	return int(resp.GetExitCode()), nil
}

func exitError(code int) error {
	if code == 0 {
		return nil
	}
	return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
}

// isStdinCat: `cat` or `cat -` (files are read from the container's fs).
func isStdinCat(cmd []string) bool {
	if len(cmd) == 0 || progName(cmd[0]) != "cat" {
		return false
	}
	for _, a := range cmd[1:] {
		if a != "-" {
			return false
		}
	}
	return true
}

// isInteractiveShell: `sh`, `sh -i`, `bash`, ... without -c.
func isInteractiveShell(cmd []string) bool {
	if len(cmd) == 0 {
		return false
	}
	switch progName(cmd[0]) {
	case "sh", "bash", "ash":
	default:
		return false
	}
	for _, a := range cmd[1:] {
		if !strings.HasPrefix(a, "-") || strings.Contains(a, "c") {
			return false
		}
	}
	return true
}

func progName(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// Attach streams the container's output from now on until it exits or the
// client goes away. The simulated programs read no input: stdin is drained.
func (s *streamRuntime) Attach(ctx context.Context, id string, in io.Reader, out, errw io.WriteCloser, tty bool, _ <-chan remotecommandserver.TerminalSize) error {
	defer closeAll(out, errw)
	if tty && errw == nil && out != nil {
		errw = nopCloser{out}
	}
	a := &attachment{ch: make(chan attachChunk, attachBuffer)}
	r := s.r
	r.mu.Lock()
	c, ok := r.containers[id]
	if !ok || c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.Unlock()
		return fmt.Errorf("container %q is not running", id)
	}
	if c.attached == nil {
		c.attached = map[*attachment]struct{}{}
	}
	c.attached[a] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		c.detach(a)
		r.mu.Unlock()
	}()
	if in != nil {
		go func() { _, _ = io.Copy(io.Discard, in) }()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ch, ok := <-a.ch:
			if !ok {
				return nil // the container ended
			}
			w := io.Writer(out)
			if ch.stderr {
				w = errw
			}
			if w == nil {
				continue
			}
			if _, err := w.Write(ch.b); err != nil {
				return err
			}
		}
	}
}

// PortForward connects stream to port on the sandbox's address.
func (s *streamRuntime) PortForward(ctx context.Context, sandboxID string, port int32, stream io.ReadWriteCloser) error {
	defer func() { _ = stream.Close() }()
	r := s.r
	r.mu.Lock()
	sb, ok := r.sandboxes[sandboxID]
	var addr string
	if ok {
		addr = net.JoinHostPort(sb.listenAddr(), strconv.Itoa(int(port)))
	}
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("pod sandbox %q not found", sandboxID)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("port forward to %s in pod sandbox %s: %w", addr, sandboxID, err)
	}
	defer func() { _ = conn.Close() }()
	errc := make(chan error, 2)
	go func() {
		_, err := io.Copy(conn, stream)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite() // the client is done sending: pass the EOF on
		}
		errc <- err
	}()
	go func() {
		_, err := io.Copy(stream, conn)
		errc <- err
	}()
	// The pod's side closing ends the forward; the client closing its
	// writing half only half-closes the connection.
	select {
	case err := <-errc:
		if err == nil {
			err = <-errc
		}
		if errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
			return nil
		}
		return err
	case <-ctx.Done():
		return nil
	}
}

// attachment is one attached client's queue of output.
type attachment struct {
	ch chan attachChunk
}

type attachChunk struct {
	stderr bool
	b      []byte
}

// broadcast hands output of the container's main program to every attached
// client, without blocking; the caller holds r.mu.
func (c *container) broadcast(stream runtimeapi.LogStreamType, b []byte) {
	if len(c.attached) == 0 || len(b) == 0 {
		return
	}
	ch := attachChunk{stderr: stream == runtimeapi.Stderr, b: append([]byte(nil), b...)}
	for a := range c.attached {
		select {
		case a.ch <- ch:
		default: // too slow a client: drop rather than block the container
		}
	}
}

// detach removes one client; the caller holds r.mu.
func (c *container) detach(a *attachment) {
	if _, ok := c.attached[a]; ok {
		delete(c.attached, a)
		close(a.ch)
	}
}

// detachAll ends every attach (the container stopped); the caller holds r.mu.
func (c *container) detachAll() {
	for a := range c.attached {
		c.detach(a)
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func closeAll(ws ...io.WriteCloser) {
	for _, w := range ws {
		if w != nil {
			_ = w.Close()
		}
	}
}
