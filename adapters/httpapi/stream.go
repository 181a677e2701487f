package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/proxy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/podspec"
)

// StreamingRuntime is what the streaming endpoints need from the container
// runtime; *cri.Client satisfies it. Exec, Attach and PortForward return the
// URL of the runtime's streaming server to proxy the client to.
type StreamingRuntime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*url.URL, error)
	Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*url.URL, error)
	PortForward(ctx context.Context, podSandboxID string, ports []int32) (*url.URL, error)
}

type streaming struct {
	resolve ResolveFunc
	rt      StreamingRuntime
	log     *slog.Logger
}

// NewStreaming serves the upstream kubelet's streaming endpoints, GET and
// POST:
//
//	/exec/{namespace}/{pod}[/{uid}]/{container}?command=...&input=1&output=1&error=1&tty=1
//	/attach/{namespace}/{pod}[/{uid}]/{container}?input=1&output=1&error=1&tty=1
//	/portForward/{namespace}/{pod}[/{uid}][?port=N]
//
// It finds the pod with resolve (StatusResolver), its running container or
// ready sandbox in the runtime (by the CRI labels), asks the runtime for a
// streaming URL and proxies the client's upgraded connection (SPDY, or a
// WebSocket the runtime speaks) to it; v5 WebSocket clients are served by
// actorlet itself and bridged to the runtime over SPDY (stream_ws.go). It routes by itself, so it can be
// mounted on "/exec/", "/attach/" and "/portForward/". It panics without
// resolve or rt (a wiring error).
func NewStreaming(resolve ResolveFunc, rt StreamingRuntime, log *slog.Logger) http.Handler {
	if resolve == nil || rt == nil {
		panic("httpapi.NewStreaming: resolve and runtime are required")
	}
	if log == nil {
		log = slog.Default()
	}
	h := &streaming{resolve: resolve, rt: rt, log: log}
	mux := http.NewServeMux()
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{container}", h.serveExec)
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{uid}/{container}", h.serveExec)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{container}", h.serveAttach)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{uid}/{container}", h.serveAttach)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}", h.servePortForward)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}/{uid}", h.servePortForward)
	}
	return mux
}

// streamOptions is the decoded query of an exec or an attach.
type streamOptions struct {
	stdin, stdout, stderr, tty bool
}

// parseStreamOptions reads the streams as the API server names them on the
// kubelet URL (input, output, error, tty: "1"), also under the names of the
// API's PodExecOptions (stdin, stdout, stderr) and with any
// strconv.ParseBool value. tty with stderr drops stderr (a terminal has one
// output), as upstream does.
func parseStreamOptions(q url.Values) (streamOptions, error) {
	var o streamOptions
	for _, f := range []struct {
		keys []string
		dst  *bool
	}{
		{[]string{v1.ExecStdinParam, "stdin"}, &o.stdin},
		{[]string{v1.ExecStdoutParam, "stdout"}, &o.stdout},
		{[]string{v1.ExecStderrParam, "stderr"}, &o.stderr},
		{[]string{v1.ExecTTYParam}, &o.tty},
	} {
		for _, k := range f.keys {
			v, ok := q[k]
			if !ok || len(v) == 0 {
				continue
			}
			if v[0] == "" {
				*f.dst = true
				break
			}
			b, err := strconv.ParseBool(v[0])
			if err != nil {
				return o, fmt.Errorf("invalid %s %q: want 1, 0, true or false", k, v[0])
			}
			*f.dst = b
			break // the first name given wins
		}
	}
	if o.tty && o.stderr {
		o.stderr = false
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return o, errors.New("you must specify at least 1 of input, output, error (or stdin, stdout, stderr)")
	}
	return o, nil
}

// parsePorts reads the port parameters (repeated or comma separated). None
// is fine: SPDY clients name the ports in their streams.
func parsePorts(q url.Values) ([]int32, error) {
	var ports []int32
	for _, v := range q["port"] {
		for _, p := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
			if err != nil || n == 0 {
				return nil, fmt.Errorf("invalid port %q: want 1-65535", p)
			}
			ports = append(ports, int32(n))
		}
	}
	return ports, nil
}

// target is a resolved request path.
type target struct {
	ns, name, uid, ctr string
}

func (t target) pod() string { return t.ns + "/" + t.name }

// resolvePod validates the path and finds the pod (and the container, if
// the path names one); it writes the error answer and returns false on
// failure.
func (h *streaming) resolvePod(w http.ResponseWriter, r *http.Request, what string, withContainer bool) (target, bool) {
	t := target{ns: r.PathValue("namespace"), name: r.PathValue("pod"), ctr: r.PathValue("container")}
	wantUID := r.PathValue("uid")
	if !validName(t.ns) || !validName(t.name) || (withContainer && !validName(t.ctr)) {
		if withContainer {
			httpError(w, http.StatusBadRequest, "invalid path: expected /%s/{namespace}/{pod}/{container}", what)
		} else {
			httpError(w, http.StatusBadRequest, "invalid path: expected /%s/{namespace}/{pod}", what)
		}
		return t, false
	}
	uid, containers, err := h.resolve(r.Context(), t.ns, t.name)
	switch {
	case errors.Is(err, errdefs.ErrNotFound) || (err == nil && wantUID != "" && uid != wantUID):
		httpError(w, http.StatusNotFound, "pod %q does not exist in namespace %q", t.name, t.ns)
		return t, false
	case err != nil:
		httpError(w, http.StatusServiceUnavailable, "find pod %s: %v", t.pod(), err)
		return t, false
	case uid == "":
		httpError(w, http.StatusInternalServerError, "pod %s has no UID", t.pod())
		return t, false
	}
	t.uid = uid
	if withContainer {
		if _, ok := containers[t.ctr]; !ok {
			httpError(w, http.StatusNotFound, "container %q not found in pod %s", t.ctr, t.pod())
			return t, false
		}
	}
	return t, true
}

// runningContainer finds the ID of the container's running instance.
func (h *streaming) runningContainer(w http.ResponseWriter, r *http.Request, t target) (string, bool) {
	cs, err := h.rt.ListContainers(r.Context(), &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{podspec.LabelPodUID: t.uid, podspec.LabelContainerName: t.ctr},
	})
	if err != nil {
		h.runtimeError(w, err, "find container %q of pod %s", t.ctr, t.pod())
		return "", false
	}
	var best *runtimeapi.Container
	for _, c := range cs {
		if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING && (best == nil || c.GetCreatedAt() > best.GetCreatedAt()) {
			best = c
		}
	}
	if best == nil {
		state := "is waiting to start"
		if len(cs) > 0 {
			state = "is not running"
		}
		httpError(w, http.StatusBadRequest, "container %q in pod %s %s", t.ctr, t.pod(), state)
		return "", false
	}
	return best.GetId(), true
}

// upgradeOnly refuses a plain request before anything is asked of the
// runtime: only an upgraded connection (SPDY or WebSocket) can stream.
func upgradeOnly(w http.ResponseWriter, r *http.Request) bool {
	if httpstream.IsUpgradeRequest(r) {
		return true
	}
	httpError(w, http.StatusBadRequest, "upgrade request required: use a streaming client (kubectl, client-go remotecommand or portforward) over SPDY or WebSocket")
	return false
}

func (h *streaming) serveExec(w http.ResponseWriter, r *http.Request) {
	h.serveContainerStream(w, r, "exec", func(ctx context.Context, id string, cmd []string, o streamOptions) (*url.URL, error) {
		return h.rt.Exec(ctx, &runtimeapi.ExecRequest{
			ContainerId: id, Cmd: cmd, Stdin: o.stdin, Stdout: o.stdout, Stderr: o.stderr, Tty: o.tty,
		})
	})
}

func (h *streaming) serveAttach(w http.ResponseWriter, r *http.Request) {
	h.serveContainerStream(w, r, "attach", func(ctx context.Context, id string, _ []string, o streamOptions) (*url.URL, error) {
		return h.rt.Attach(ctx, &runtimeapi.AttachRequest{
			ContainerId: id, Stdin: o.stdin, Stdout: o.stdout, Stderr: o.stderr, Tty: o.tty,
		})
	})
}

// serveContainerStream is exec (what "exec": the query must carry a
// command) and attach: everything is checked before the runtime is asked
// for a URL to the container's running instance, then the client is
// streamed to it.
func (h *streaming) serveContainerStream(w http.ResponseWriter, r *http.Request, what string,
	ask func(ctx context.Context, id string, cmd []string, o streamOptions) (*url.URL, error)) {
	t, ok := h.resolvePod(w, r, what, true)
	if !ok {
		return
	}
	q := r.URL.Query()
	var cmd []string
	if what == "exec" {
		cmd = q[v1.ExecCommandParam]
		if len(cmd) == 0 || cmd[0] == "" {
			httpError(w, http.StatusBadRequest, "command is required: add command=... to the query, once per argument")
			return
		}
	}
	o, err := parseStreamOptions(q)
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if !upgradeOnly(w, r) {
		return
	}
	id, ok := h.runningContainer(w, r, t)
	if !ok {
		return
	}
	u, err := ask(r.Context(), id, cmd, o)
	if err != nil {
		h.runtimeError(w, err, "%s in container %q of pod %s", what, t.ctr, t.pod())
		return
	}
	log := h.log.With("pod", t.pod(), "container", t.ctr, "tty", o.tty, "stdin", o.stdin)
	if len(cmd) > 0 {
		log = log.With("command", cmd[0])
	}
	log.Info(what)
	h.serveStream(w, r, u, o)
}

func (h *streaming) servePortForward(w http.ResponseWriter, r *http.Request) {
	t, ok := h.resolvePod(w, r, "portForward", false)
	if !ok {
		return
	}
	ports, err := parsePorts(r.URL.Query())
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if !upgradeOnly(w, r) {
		return
	}
	if wsstream.IsWebSocketRequestWithTunnelingProtocol(r) {
		// client-go falls back to SPDY on this answer.
		httpError(w, http.StatusBadRequest, "port-forward over a WebSocket tunnel is not supported: use SPDY")
		return
	}
	sbs, err := h.rt.ListPodSandbox(r.Context(), &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{podspec.LabelPodUID: t.uid},
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	})
	if err != nil {
		h.runtimeError(w, err, "find the sandbox of pod %s", t.pod())
		return
	}
	var best *runtimeapi.PodSandbox
	for _, sb := range sbs {
		if best == nil || sb.GetCreatedAt() > best.GetCreatedAt() {
			best = sb
		}
	}
	if best == nil {
		httpError(w, http.StatusBadRequest, "pod %s has no ready sandbox (not started yet, or stopped)", t.pod())
		return
	}
	u, err := h.rt.PortForward(r.Context(), best.GetId(), ports)
	if err != nil {
		h.runtimeError(w, err, "port forward to pod %s", t.pod())
		return
	}
	h.log.Info("port forward", "pod", t.pod(), "ports", ports)
	h.proxy(w, r, u)
}

// runtimeError answers a failed runtime call: the client's fault as 4xx,
// the runtime's as 5xx, with the runtime's message either way.
func (h *streaming) runtimeError(w http.ResponseWriter, err error, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, errdefs.ErrFailedPrecondition), errors.Is(err, errdefs.ErrInvalidArgument):
		code = http.StatusBadRequest
	case errors.Is(err, errdefs.ErrResourceExhausted):
		code = http.StatusTooManyRequests
	case errors.Is(err, errdefs.ErrUnimplemented):
		code = http.StatusNotImplemented
	case errors.Is(err, errdefs.ErrUnavailable), errors.Is(err, errdefs.ErrDeadlineExceeded):
		code = http.StatusServiceUnavailable
	}
	if code >= 500 {
		h.log.Warn("streaming request failed", "what", msg, "err", err)
	}
	httpError(w, code, "%s: %v", msg, err)
}

// serveStream connects an exec or attach client to the runtime's URL.
func (h *streaming) serveStream(w http.ResponseWriter, r *http.Request, u *url.URL, o streamOptions) {
	if isWebSocketV5(r) {
		h.translateWebSocket(w, r, u, o)
		return
	}
	h.proxy(w, r, u)
}

// proxy hands the client's connection to the runtime's streaming server,
// as the upstream kubelet does. The client's credentials are for this
// node, not for the runtime: they are not passed on.
func (h *streaming) proxy(w http.ResponseWriter, r *http.Request, u *url.URL) {
	r.Header.Del("Authorization")
	r.Header.Del("Proxy-Authorization")
	p := proxy.NewUpgradeAwareHandler(u, nil, false, true, &proxyResponder{log: h.log})
	p.ServeHTTP(w, r)
}

// proxyResponder reports a failure to reach the runtime's streaming server.
type proxyResponder struct{ log *slog.Logger }

func (p *proxyResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	p.log.Warn("proxy to the runtime's streaming server failed", "path", r.URL.Path, "err", err)
	httpError(w, http.StatusBadGateway, "proxy to the runtime's streaming server: %v", err)
}
