// Package httpapi is actorlet's node API, an inbound adapter: it serves
// /healthz, /pods (read and push), /metrics and /debug/ and talks to actors
// only by sending messages to the PIDs it is given. It never imports actors.
package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/messages"
)

// Defaults.
const (
	DefaultRequestTimeout  = 10 * time.Second
	DefaultMaxBodyBytes    = 1 << 20
	DefaultHealthThreshold = 3 * time.Minute // upstream PLEG relist threshold
	readHeaderTimeout      = 10 * time.Second
	retryAfterSeconds      = "1" // Retry-After of a 503 while the pod status is rebuilt
	shutdownTimeout        = 10 * time.Second
)

// Config wires the server to the actors it asks and to its helpers.
type Config struct {
	// System sends the requests. Required.
	System *actor.ActorSystem
	// Status answers *messages.GetPods. Required.
	Status *actor.PID
	// Push answers *messages.PushPod and *messages.RemovePushedPod.
	// Optional: without it (or without Decode) POST and DELETE /pods
	// answer 503.
	Push *actor.PID
	// PLEG answers *messages.GetHealth. Required.
	PLEG *actor.PID
	// Devices answers the DevicesActor's queries: GET /devices (read-only
	// too) and POST /devices/fault (main port). Optional: without it the
	// paths are not served.
	Devices *actor.PID
	// Decode parses and validates one pod manifest (JSON or YAML).
	Decode func([]byte) (*v1.Pod, error)
	// Metrics serves GET /metrics; nil leaves the path unserved (404).
	Metrics http.Handler
	// StatsSummary answers GET /stats/summary and feeds GET
	// /metrics/resource (stats.go); nil leaves both unserved (404).
	StatsSummary func(ctx context.Context) (*statsapi.Summary, error)
	// Debug serves /debug/ on the main handler; may be nil.
	Debug http.Handler
	// ContainerLogs serves GET /containerLogs/{namespace}/{pod}/{container}
	// on the main handler (NewContainerLogs); nil leaves it unserved.
	ContainerLogs http.Handler
	// Streaming serves /exec/, /attach/ and /portForward/ on the main
	// handler (NewStreaming); nil leaves them unserved.
	Streaming http.Handler
	// Configz serves GET /configz on the main handler (NewConfigz); nil
	// leaves it unserved.
	Configz http.Handler
	// RequestTimeout bounds every request to an actor. Default 10s.
	RequestTimeout time.Duration
	// MaxBodyBytes bounds request bodies. Default 1 MiB.
	MaxBodyBytes int64
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Clock for health checks; default the real clock.
	Clock clock.PassiveClock
	// Singletons are the actors /healthz probes besides the PLEG (healthz.go):
	// each must be running and answer a probe within HealthProbeTimeout.
	Singletons []Singleton
	// HealthProbeTimeout bounds each probe of /healthz. Default 5s.
	HealthProbeTimeout time.Duration
	// HealthCacheTTL is how long a /healthz result is reused, so that a
	// storm of health checks does not flood the mailboxes. Default 1s.
	HealthCacheTTL time.Duration
}

// Server serves the node API.
type Server struct {
	cfg    Config
	log    *slog.Logger
	clk    clock.PassiveClock
	health *health
}

// New checks cfg and fills in defaults.
func New(cfg Config) (*Server, error) {
	var missing []string
	if cfg.System == nil {
		missing = append(missing, "System")
	}
	if cfg.Status == nil {
		missing = append(missing, "Status")
	}
	if cfg.PLEG == nil {
		missing = append(missing, "PLEG")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("httpapi: missing %s", strings.Join(missing, ", "))
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.HealthProbeTimeout <= 0 {
		cfg.HealthProbeTimeout = DefaultHealthProbeTimeout
	}
	if cfg.HealthCacheTTL <= 0 {
		cfg.HealthCacheTTL = DefaultHealthCacheTTL
	}
	return &Server{cfg: cfg, log: cfg.Logger, clk: cfg.Clock, health: newHealth(cfg)}, nil
}

// Healthz serves GET /healthz alone.
func (s *Server) Healthz() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.handleHealthz)
	return s.recover(allowMethods(mux, []methodRule{{path: "/healthz", allow: getAndHead}}))
}

// ReadOnly serves GET /pods, GET /healthz, GET /metrics, GET
// /stats/summary and GET /metrics/resource (the read-only port). Other
// paths get 404, other methods 405 with an Allow header (methods.go).
func (s *Server) ReadOnly() http.Handler {
	mux := http.NewServeMux()
	s.readOnlyRoutes(mux)
	return s.recover(allowMethods(mux, s.readOnlyRules(getOnly)))
}

// Main serves everything of ReadOnly plus POST /pods, PUT and DELETE
// /pods/{namespace}/{name} and /debug/ (when a Debug handler is set).
func (s *Server) Main() http.Handler {
	mux := http.NewServeMux()
	s.readOnlyRoutes(mux)
	mux.HandleFunc("POST /pods", s.handlePushPod)
	mux.HandleFunc("PUT /pods/{namespace}/{name}", s.handleReplacePod)
	mux.HandleFunc("DELETE /pods/{namespace}/{name}", s.handleRemovePod)
	if s.cfg.ContainerLogs != nil {
		mux.Handle("GET /containerLogs/", s.cfg.ContainerLogs)
	}
	if s.cfg.Streaming != nil {
		for _, p := range []string{"/exec/", "/attach/", "/portForward/"} {
			mux.Handle(p, s.cfg.Streaming)
		}
	}
	if s.cfg.Debug != nil {
		mux.Handle("/debug/", s.cfg.Debug)
	}
	if s.cfg.Configz != nil {
		mux.Handle("GET /configz", s.cfg.Configz)
	}
	if s.cfg.Devices != nil {
		mux.HandleFunc("POST /devices/fault", s.handleDeviceFault)
	}
	rules := s.readOnlyRules([]string{http.MethodGet, http.MethodPost})
	if s.cfg.ContainerLogs != nil {
		rules = append(rules, methodRule{path: "/containerLogs/", prefix: true, allow: getOnly})
	}
	if s.cfg.Debug != nil {
		rules = append(rules, methodRule{path: "/debug/", prefix: true, allow: getOnly})
	}
	if s.cfg.Configz != nil {
		rules = append(rules, methodRule{path: "/configz", allow: getOnly})
	}
	return s.recover(allowMethods(mux, rules))
}

func (s *Server) readOnlyRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", s.handleHealthz)
	mux.HandleFunc("GET /pods", s.handleGetPods)
	if s.cfg.Devices != nil {
		mux.HandleFunc("GET /devices", s.handleGetDevices)
	}
	if s.cfg.Metrics != nil {
		mux.Handle("GET /metrics", s.cfg.Metrics)
	}
	if s.cfg.StatsSummary != nil {
		mux.HandleFunc("GET /stats/summary", s.handleStatsSummary)
		mux.Handle("GET /metrics/resource", s.resourceMetrics())
	}
}

// ListenAndServe serves h on addr until ctx is done, then shuts down
// gracefully (in-flight requests get up to 10s). It returns nil after a
// shutdown caused by ctx, else the error that stopped the server.
func (s *Server) ListenAndServe(ctx context.Context, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	return s.Serve(ctx, ln, h)
}

// Serve is ListenAndServe on an existing listener, which it closes. It logs
// nothing when it starts: the caller says what it serves where.
func (s *Server) Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown %s: %w", ln.Addr(), err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// recover turns a panic in a handler into a 500 (the server goes on).
func (s *Server) recover(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { //nolint:errorlint // sentinel compared as net/http does
				panic(v)
			}
			s.log.Error("http handler panicked", "method", r.Method, "path", r.URL.Path,
				"reason", fmt.Sprint(v), "stack", string(debug.Stack()))
			httpError(w, http.StatusInternalServerError, "internal error: %v", v)
		}()
		h.ServeHTTP(w, r)
	})
}

// ask sends msg to pid from this (non-actor) goroutine and waits for the
// reply, at most RequestTimeout or until the request is cancelled.
func (s *Server) ask(r *http.Request, pid *actor.PID, what string, msg any) (any, *apiError) {
	timeout := s.cfg.RequestTimeout
	if dl, ok := r.Context().Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	res, err := s.cfg.System.Root.RequestFuture(pid, msg, timeout).Result()
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, actor.ErrTimeout):
		return nil, &apiError{http.StatusServiceUnavailable, fmt.Sprintf("%s (%s) did not answer within %s", what, pid.Id, timeout)}
	case errors.Is(err, actor.ErrDeadLetter):
		return nil, &apiError{http.StatusServiceUnavailable, fmt.Sprintf("%s (%s) is not running", what, pid.Id)}
	default:
		return nil, &apiError{http.StatusServiceUnavailable, fmt.Sprintf("%s (%s): %v", what, pid.Id, err)}
	}
}

// askFor is ask wanting an answer of type T. Otherwise it writes the error,
// prefixed with prefix, and answers false.
func askFor[T any](s *Server, w http.ResponseWriter, r *http.Request, pid *actor.PID, what, prefix string, msg any) (T, bool) {
	var zero T
	res, aerr := s.ask(r, pid, what, msg)
	if aerr != nil {
		httpError(w, aerr.code, "%s: %s", prefix, aerr.msg)
		return zero, false
	}
	v, ok := res.(T)
	if !ok {
		httpError(w, http.StatusInternalServerError, "%s: unexpected answer %T", prefix, res)
		return zero, false
	}
	return v, true
}

type apiError struct {
	code int
	msg  string
}

func httpError(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, format, args...)
	_, _ = io.WriteString(w, "\n")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "encode response: %v", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

func (s *Server) handleGetPods(w http.ResponseWriter, r *http.Request) {
	res, aerr := s.ask(r, s.cfg.Status, "status actor", &messages.GetPods{})
	if aerr != nil {
		httpError(w, aerr.code, "list pods: %s", aerr.msg)
		return
	}
	var items []*v1.Pod
	switch m := res.(type) {
	case *messages.PodList:
		if m != nil {
			items = m.Items
		}
	case messages.PodList:
		items = m.Items
	case *messages.StatusUnavailable:
		// Never a partial list: the client is told to come back.
		w.Header().Set("Retry-After", retryAfterSeconds)
		httpError(w, http.StatusServiceUnavailable, "list pods: %s; retry later", m.Reason)
		return
	default:
		httpError(w, http.StatusInternalServerError, "list pods: unexpected answer %T", res)
		return
	}
	writePodList(w, items)
}

// writePodList streams a v1 PodList one pod at a time: with thousands of
// pods the answer is tens of MB, and building it whole doubled the agent's
// memory for the length of a request.
func writePodList(w http.ResponseWriter, items []*v1.Pod) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	_, _ = bw.WriteString(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[`)
	for i := range items {
		b, err := json.Marshal(items[i])
		if err != nil {
			continue // a v1.Pod always encodes; never a half item
		}
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		_, _ = bw.Write(b)
	}
	_, _ = bw.WriteString("]}\n")
	_ = bw.Flush()
}

// podRef is the body of a successful push or removal.
type podRef struct {
	UID       types.UID `json:"uid"`
	Name      string    `json:"name"`
	Namespace string    `json:"namespace"`
}

// handlePushPod is POST /pods: a create, as the API server's. 201 for a
// new pod; 200 when the same pod is pushed again (an idempotent retry:
// nothing restarts); 409 when the name holds a pod with another spec
// (PUT /pods/{namespace}/{name} replaces it, DELETE removes it).
func (s *Server) handlePushPod(w http.ResponseWriter, r *http.Request) {
	s.push(w, r, "", "")
}

// handleReplacePod is PUT /pods/{namespace}/{name}: the body's pod takes
// the place of the pushed pod of that name (killed, then the new one
// started, when their specs differ), or is created. 200 when a pod of that
// name was there, 201 when not; 400 when the body names another pod.
func (s *Server) handleReplacePod(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if ns == "" || name == "" {
		httpError(w, http.StatusBadRequest, "expected /pods/{namespace}/{name}")
		return
	}
	s.push(w, r, ns, name)
}

// push decodes one pod manifest and hands it to the push source; ns and
// name are the PUT's path ("" for a POST).
func (s *Server) push(w http.ResponseWriter, r *http.Request, ns, name string) {
	if s.cfg.Push == nil || s.cfg.Decode == nil {
		httpError(w, http.StatusServiceUnavailable, "pod push is not enabled on this node")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			httpError(w, http.StatusRequestEntityTooLarge, "pod manifest too large: limit is %d bytes", tooBig.Limit)
			return
		}
		httpError(w, http.StatusBadRequest, "read pod manifest: %v", err)
		return
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		httpError(w, http.StatusBadRequest, "empty body: expected one pod manifest (JSON or YAML)")
		return
	}
	pod, err := s.cfg.Decode(body)
	if err != nil {
		httpError(w, http.StatusBadRequest, "invalid pod manifest: %v", err)
		return
	}
	if pod == nil {
		httpError(w, http.StatusBadRequest, "invalid pod manifest: no pod")
		return
	}
	replace := name != ""
	if replace && (pod.Namespace != ns || pod.Name != name) {
		httpError(w, http.StatusBadRequest, "the manifest is pod %s/%s, the path names %s/%s", pod.Namespace, pod.Name, ns, name)
		return
	}
	res, aerr := s.ask(r, s.cfg.Push, "push source", &messages.PushPod{Pod: pod, Replace: replace})
	if aerr != nil {
		httpError(w, aerr.code, "push pod %s/%s: %s", pod.Namespace, pod.Name, aerr.msg)
		return
	}
	pr, ok := pushResult(res)
	if !ok {
		httpError(w, http.StatusInternalServerError, "push pod: unexpected answer %T", res)
		return
	}
	if pr.Err != "" {
		httpError(w, http.StatusBadRequest, "push pod %s/%s: %s", pod.Namespace, pod.Name, pr.Err)
		return
	}
	if pr.Conflict {
		httpError(w, http.StatusConflict, "pod %s/%s already exists with another spec (uid %s): PUT /pods/%s/%s replaces it, DELETE removes it",
			pod.Namespace, pod.Name, pr.UID, pod.Namespace, pod.Name)
		return
	}
	if pr.Name == "" {
		pr.Name = pod.Name
	}
	code := http.StatusCreated
	if pr.Existed {
		code = http.StatusOK
	}
	s.log.Debug("pod pushed", "pod", pod.Namespace+"/"+pr.Name, "uid", pr.UID, "existed", pr.Existed, "unchanged", pr.Unchanged)
	writeJSON(w, code, podRef{UID: pr.UID, Name: pr.Name, Namespace: pod.Namespace})
}

func (s *Server) handleRemovePod(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Push == nil {
		httpError(w, http.StatusServiceUnavailable, "pod push is not enabled on this node")
		return
	}
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if ns == "" || name == "" {
		httpError(w, http.StatusBadRequest, "expected /pods/{namespace}/{name}")
		return
	}
	res, aerr := s.ask(r, s.cfg.Push, "push source", &messages.RemovePushedPod{Namespace: ns, Name: name})
	if aerr != nil {
		httpError(w, aerr.code, "remove pod %s/%s: %s", ns, name, aerr.msg)
		return
	}
	pr, ok := pushResult(res)
	if !ok {
		httpError(w, http.StatusInternalServerError, "remove pod: unexpected answer %T", res)
		return
	}
	switch {
	case pr.NotFound:
		httpError(w, http.StatusNotFound, "pod %s/%s not found among pushed pods", ns, name)
	case pr.Err != "":
		httpError(w, http.StatusInternalServerError, "remove pod %s/%s: %s", ns, name, pr.Err)
	default:
		s.log.Debug("pushed pod removed", "pod", ns+"/"+name, "uid", pr.UID)
		writeJSON(w, http.StatusOK, podRef{UID: pr.UID, Name: name, Namespace: ns})
	}
}

func pushResult(res any) (messages.PushResult, bool) {
	switch m := res.(type) {
	case *messages.PushResult:
		if m == nil {
			return messages.PushResult{}, false
		}
		return *m, true
	case messages.PushResult:
		return m, true
	}
	return messages.PushResult{}, false
}
