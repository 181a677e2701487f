package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/messages"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// stubs holds the state the stub actors answer from.
type stubs struct {
	mu      sync.Mutex
	health  messages.Health
	pods    []v1.Pod
	pushed  map[string]*v1.Pod // ns/name
	pushErr string
	// pushAnswer, when set, is the push source's answer to a PushPod.
	pushAnswer *messages.PushResult
	received   []any
	// rebuilding: the status stub answers StatusUnavailable with it.
	rebuilding string
}

func (s *stubs) note(m any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.received = append(s.received, m)
}

type env struct {
	srv   *Server
	stubs *stubs
	sys   *actor.ActorSystem
}

// setup starts a fresh actor system with stub status, PLEG and push actors.
// A nil Status/PLEG/Push in over means a silent actor that never answers.
func setup(t *testing.T, mutate func(*Config)) *env {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	t.Cleanup(sys.Shutdown)
	st := &stubs{
		health: messages.Health{LastRelist: now.Add(-time.Second), Threshold: 3 * time.Minute},
		pods: []v1.Pod{{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u-web"},
			Status:     v1.PodStatus{Phase: v1.PodRunning},
		}},
		pushed: map[string]*v1.Pod{},
	}
	spawn := func(f actor.ReceiveFunc) *actor.PID {
		pid := sys.Root.Spawn(actor.PropsFromFunc(f))
		t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
		return pid
	}
	status := spawn(func(c actor.Context) {
		st.mu.Lock()
		rebuilding := st.rebuilding
		st.mu.Unlock()
		switch c.Message().(type) {
		case *messages.GetPods, *messages.GetPod:
			if rebuilding != "" {
				c.Respond(&messages.StatusUnavailable{Reason: rebuilding, Missing: 2, Expected: 3})
				return
			}
		}
		switch m := c.Message().(type) {
		case *messages.GetPods:
			st.mu.Lock()
			items := make([]*v1.Pod, len(st.pods))
			for i := range st.pods {
				items[i] = st.pods[i].DeepCopy()
			}
			st.mu.Unlock()
			c.Respond(&messages.PodList{Items: items})
		case *messages.GetPod:
			st.mu.Lock()
			found := &messages.PodFound{}
			for i := range st.pods {
				if p := &st.pods[i]; p.Namespace == m.Namespace && p.Name == m.Name {
					found.Pod = p.DeepCopy()
				}
			}
			st.mu.Unlock()
			c.Respond(found)
		}
	})
	pleg := spawn(func(c actor.Context) {
		if _, ok := c.Message().(*messages.GetHealth); ok {
			st.mu.Lock()
			h := st.health
			st.mu.Unlock()
			c.Respond(&messages.Health{RuntimeErr: h.RuntimeErr, LastRelist: h.LastRelist, Threshold: h.Threshold})
		}
	})
	push := spawn(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.PushPod:
			st.note(m)
			st.mu.Lock()
			defer st.mu.Unlock()
			if st.pushErr != "" {
				c.Respond(&messages.PushResult{Err: st.pushErr})
				return
			}
			if st.pushAnswer != nil {
				c.Respond(st.pushAnswer)
				return
			}
			st.pushed[m.Pod.Namespace+"/"+m.Pod.Name] = m.Pod
			c.Respond(&messages.PushResult{UID: m.Pod.UID, Name: m.Pod.Name})
		case *messages.RemovePushedPod:
			st.note(m)
			st.mu.Lock()
			defer st.mu.Unlock()
			p, ok := st.pushed[m.Namespace+"/"+m.Name]
			if !ok {
				c.Respond(&messages.PushResult{Name: m.Name, NotFound: true})
				return
			}
			delete(st.pushed, m.Namespace+"/"+m.Name)
			c.Respond(&messages.PushResult{UID: p.UID, Name: p.Name})
		}
	})
	cfg := Config{
		System: sys, Status: status, PLEG: pleg, Push: push,
		Decode:         testDecode,
		Metrics:        http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "kubelet_running_pods 1\n") }),
		Debug:          http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "debug "+r.URL.Path) }),
		RequestTimeout: 2 * time.Second,
		MaxBodyBytes:   4096,
		Logger:         slog.New(slog.DiscardHandler),
		Clock:          clocktesting.NewFakePassiveClock(now),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{srv: srv, stubs: st, sys: sys}
}

// testDecode accepts JSON or YAML, requires a name and defaults namespace
// and UID, as the manifest adapter does.
func testDecode(b []byte) (*v1.Pod, error) {
	var p v1.Pod
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		return nil, err
	}
	if p.Kind != "Pod" {
		return nil, errors.New(`kind must be "Pod"`)
	}
	if p.Name == "" {
		return nil, errors.New("metadata.name is required")
	}
	if p.Name == "explode" {
		panic("decoder bug")
	}
	if p.Namespace == "" {
		p.Namespace = "default"
	}
	if p.UID == "" {
		p.UID = types.UID("uid-" + p.Namespace + "-" + p.Name)
	}
	return &p, nil
}

func do(t *testing.T, h http.Handler, method, path, body string) (int, string, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, httptest.NewRequest(method, path, rd))
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s %s hung", method, path)
	}
	return rec.Code, rec.Body.String(), rec.Header()
}

const podJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"nginx","namespace":"web"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: cache
spec:
  containers:
  - name: c
    image: redis
`

func TestRoutes(t *testing.T) {
	tests := []struct {
		name       string
		mutate     func(*Config)
		stub       func(*stubs)
		handler    func(*Server) http.Handler
		method     string
		path       string
		body       string
		wantCode   int
		wantBody   []string
		unwantBody []string
	}{
		{name: "healthz ok", handler: (*Server).Main, method: "GET", path: "/healthz", wantCode: 200, wantBody: []string{"ok"}},
		{name: "healthz alone", handler: (*Server).Healthz, method: "GET", path: "/healthz", wantCode: 200, wantBody: []string{"ok"}},
		{name: "healthz stale pleg", handler: (*Server).ReadOnly, method: "GET", path: "/healthz",
			stub:     func(s *stubs) { s.health.LastRelist = now.Add(-4 * time.Minute) },
			wantCode: 500, wantBody: []string{"[-]pleg failed: last relist 4m0s ago, threshold 3m0s", "[+]runtime ok", "healthz check failed"}, unwantBody: []string{"[-]runtime"}},
		{name: "healthz runtime error", handler: (*Server).Main, method: "GET", path: "/healthz",
			stub:     func(s *stubs) { s.health.RuntimeErr = "rpc error: connection refused" },
			wantCode: 500, wantBody: []string{"[-]runtime failed: rpc error: connection refused", "[+]pleg ok"}, unwantBody: []string{"[-]pleg"}},
		{name: "healthz no relist yet", handler: (*Server).Main, method: "GET", path: "/healthz",
			stub:     func(s *stubs) { s.health.LastRelist = time.Time{} },
			wantCode: 500, wantBody: []string{"[-]pleg failed: no successful relist yet"}},
		{name: "list pods", handler: (*Server).ReadOnly, method: "GET", path: "/pods", wantCode: 200,
			wantBody: []string{`"kind":"PodList"`, `"apiVersion":"v1"`, `"name":"web"`, `"phase":"Running"`}},
		{name: "list no pods", handler: (*Server).Main, method: "GET", path: "/pods", stub: func(s *stubs) { s.pods = nil },
			wantCode: 200, wantBody: []string{`"items":[]`}},
		{name: "metrics", handler: (*Server).ReadOnly, method: "GET", path: "/metrics", wantCode: 200, wantBody: []string{"kubelet_running_pods 1"}},
		{name: "no metrics handler", handler: (*Server).ReadOnly, mutate: func(c *Config) { c.Metrics = nil }, method: "GET", path: "/metrics", wantCode: 404},
		{name: "unknown path", handler: (*Server).Main, method: "GET", path: "/nope", wantCode: 404, wantBody: []string{"not found"}},
		{name: "read-only refuses push", handler: (*Server).ReadOnly, method: "POST", path: "/pods", body: podJSON, wantCode: 405},
		{name: "read-only has no debug", handler: (*Server).ReadOnly, method: "GET", path: "/debug/actors", wantCode: 404},
		{name: "wrong method", handler: (*Server).Main, method: "PUT", path: "/pods", body: podJSON, wantCode: 405},
		{name: "debug", handler: (*Server).Main, method: "GET", path: "/debug/actors", wantCode: 200, wantBody: []string{"debug /debug/actors"}},
		{name: "push json", handler: (*Server).Main, method: "POST", path: "/pods", body: podJSON, wantCode: 201,
			wantBody: []string{`"uid":"uid-web-nginx"`, `"name":"nginx"`, `"namespace":"web"`}},
		{name: "push yaml", handler: (*Server).Main, method: "POST", path: "/pods", body: podYAML, wantCode: 201,
			wantBody: []string{`"name":"cache"`, `"namespace":"default"`}},
		{name: "push bad json", handler: (*Server).Main, method: "POST", path: "/pods", body: `{"kind":"Pod",`, wantCode: 400,
			wantBody: []string{"invalid pod manifest"}},
		{name: "push bad yaml", handler: (*Server).Main, method: "POST", path: "/pods", body: "kind: Pod\nmetadata: [\n", wantCode: 400,
			wantBody: []string{"invalid pod manifest"}},
		{name: "push invalid pod", handler: (*Server).Main, method: "POST", path: "/pods", body: `{"kind":"Pod","metadata":{}}`, wantCode: 400,
			wantBody: []string{"metadata.name is required"}},
		{name: "push empty body", handler: (*Server).Main, method: "POST", path: "/pods", wantCode: 400, wantBody: []string{"empty body"}},
		{name: "push oversized", handler: (*Server).Main, method: "POST", path: "/pods",
			body:     `{"kind":"Pod","metadata":{"name":"big","annotations":{"a":"` + strings.Repeat("x", 5000) + `"}}}`,
			wantCode: 413, wantBody: []string{"too large", "4096"}},
		{name: "push refused by source", handler: (*Server).Main, method: "POST", path: "/pods", body: podJSON,
			stub: func(s *stubs) { s.pushErr = "pod with a name and a UID is required" }, wantCode: 400,
			wantBody: []string{"push pod web/nginx: pod with a name and a UID is required"}},
		{name: "push of a name that holds another pod is a conflict", handler: (*Server).Main, method: "POST", path: "/pods", body: podJSON,
			stub: func(s *stubs) {
				s.pushAnswer = &messages.PushResult{UID: "uid-old", Name: "nginx", Existed: true, Conflict: true}
			},
			wantCode: 409, wantBody: []string{"pod web/nginx already exists with another spec (uid uid-old)", "PUT /pods/web/nginx replaces it"}},
		{name: "the same pod pushed again is 200", handler: (*Server).Main, method: "POST", path: "/pods", body: podJSON,
			stub: func(s *stubs) {
				s.pushAnswer = &messages.PushResult{UID: "uid-web-nginx", Name: "nginx", Existed: true, Unchanged: true}
			},
			wantCode: 200, wantBody: []string{`"uid":"uid-web-nginx"`}},
		{name: "put replaces", handler: (*Server).Main, method: "PUT", path: "/pods/web/nginx", body: podJSON,
			stub: func(s *stubs) {
				s.pushAnswer = &messages.PushResult{UID: "uid-web-nginx", Name: "nginx", Existed: true}
			},
			wantCode: 200, wantBody: []string{`"uid":"uid-web-nginx"`, `"namespace":"web"`}},
		{name: "put creates", handler: (*Server).Main, method: "PUT", path: "/pods/web/nginx", body: podJSON, wantCode: 201,
			wantBody: []string{`"uid":"uid-web-nginx"`}},
		{name: "put of another pod than the path", handler: (*Server).Main, method: "PUT", path: "/pods/web/other", body: podJSON,
			wantCode: 400, wantBody: []string{"the manifest is pod web/nginx, the path names web/other"}},
		{name: "read-only has no put", handler: (*Server).ReadOnly, method: "PUT", path: "/pods/web/nginx", body: podJSON, wantCode: 404},
		{name: "push disabled", handler: (*Server).Main, mutate: func(c *Config) { c.Push = nil }, method: "POST", path: "/pods", body: podJSON,
			wantCode: 503, wantBody: []string{"not enabled"}},
		{name: "decoder panic is a 500", handler: (*Server).Main, method: "POST", path: "/pods",
			body: `{"kind":"Pod","metadata":{"name":"explode"}}`, wantCode: 500, wantBody: []string{"internal error: decoder bug"}},
		{name: "delete missing", handler: (*Server).Main, method: "DELETE", path: "/pods/web/ghost", wantCode: 404,
			wantBody: []string{"pod web/ghost not found"}},
		{name: "delete pushed", handler: (*Server).Main, method: "DELETE", path: "/pods/web/nginx",
			stub: func(s *stubs) {
				s.pushed["web/nginx"] = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: "web", UID: "u1"}}
			},
			wantCode: 200, wantBody: []string{`"uid":"u1"`, `"namespace":"web"`}},
		{name: "delete needs both segments", handler: (*Server).Main, method: "DELETE", path: "/pods/web", wantCode: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t, tt.mutate)
			if tt.stub != nil {
				e.stubs.mu.Lock()
				tt.stub(e.stubs)
				e.stubs.mu.Unlock()
			}
			code, body, _ := do(t, tt.handler(e.srv), tt.method, tt.path, tt.body)
			if code != tt.wantCode {
				t.Fatalf("%s %s = %d, want %d; body:\n%s", tt.method, tt.path, code, tt.wantCode, body)
			}
			for _, w := range tt.wantBody {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %q:\n%s", w, body)
				}
			}
			for _, w := range tt.unwantBody {
				if strings.Contains(body, w) {
					t.Errorf("body has %q:\n%s", w, body)
				}
			}
		})
	}
}

func TestPodListDecodes(t *testing.T) {
	e := setup(t, nil)
	code, body, hdr := do(t, e.srv.ReadOnly(), "GET", "/pods", "")
	if code != 200 || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("code %d, content type %q", code, hdr.Get("Content-Type"))
	}
	var list v1.PodList
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "PodList" || list.APIVersion != "v1" || len(list.Items) != 1 || list.Items[0].UID != "u-web" {
		t.Fatalf("list = %+v", list)
	}
}

// While the StatusActor rebuilds its view, /pods answers 503 with its
// reason and a Retry-After (never a 200 with a short list), on both ports;
// the logs/exec resolver reports the pod unavailable, not "not found".
func TestPodsWhileStatusRebuilds(t *testing.T) {
	const reason = "the status actor is rebuilding its view of the pods: 2 of 3 pods not reported again yet"
	e := setup(t, nil)
	e.stubs.mu.Lock()
	e.stubs.rebuilding = reason
	e.stubs.mu.Unlock()
	for _, h := range []http.Handler{e.srv.ReadOnly(), e.srv.Main()} {
		code, body, hdr := do(t, h, "GET", "/pods", "")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, reason) || hdr.Get("Retry-After") == "" {
			t.Fatalf("GET /pods = %d, Retry-After %q, body %q; want 503 with the reason and a Retry-After", code, hdr.Get("Retry-After"), body)
		}
	}
	_, _, err := StatusResolver(e.sys, e.srv.cfg.Status, time.Second)(context.Background(), "default", "web")
	if !errors.Is(err, errdefs.ErrUnavailable) || errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), reason) {
		t.Fatalf("resolve during a rebuild: %v; want unavailable with the reason", err)
	}
}

func TestPushReachesSource(t *testing.T) {
	e := setup(t, nil)
	if code, body, _ := do(t, e.srv.Main(), "POST", "/pods", podJSON); code != 201 {
		t.Fatalf("push: %d %s", code, body)
	}
	if code, body, _ := do(t, e.srv.Main(), "DELETE", "/pods/web/nginx", ""); code != 200 {
		t.Fatalf("delete: %d %s", code, body)
	}
	e.stubs.mu.Lock()
	defer e.stubs.mu.Unlock()
	if len(e.stubs.received) != 2 {
		t.Fatalf("push source got %d messages", len(e.stubs.received))
	}
	if m, ok := e.stubs.received[0].(*messages.PushPod); !ok || m.Pod.Spec.Containers[0].Image != "nginx" || m.Replace {
		t.Fatalf("first message %#v, want the pod, no Replace", e.stubs.received[0])
	}
}

// TestPutAsksToReplace: PUT /pods/{namespace}/{name} is the explicit
// replacement, POST never is.
func TestPutAsksToReplace(t *testing.T) {
	e := setup(t, nil)
	if code, body, _ := do(t, e.srv.Main(), "PUT", "/pods/web/nginx", podJSON); code != 201 {
		t.Fatalf("put: %d %s", code, body)
	}
	e.stubs.mu.Lock()
	defer e.stubs.mu.Unlock()
	if len(e.stubs.received) != 1 {
		t.Fatalf("push source got %d messages", len(e.stubs.received))
	}
	if m, ok := e.stubs.received[0].(*messages.PushPod); !ok || !m.Replace || m.Pod.Name != "nginx" {
		t.Fatalf("message %#v, want the pod with Replace", e.stubs.received[0])
	}
}

func TestTimeouts(t *testing.T) {
	silent := func(sys *actor.ActorSystem) *actor.PID {
		return sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	}
	tests := []struct {
		name     string
		target   func(c *Config, pid *actor.PID)
		method   string
		path     string
		body     string
		wantCode int
		want     string
	}{
		{name: "healthz", target: func(c *Config, p *actor.PID) { c.PLEG = p }, method: "GET", path: "/healthz", wantCode: 500, want: "[-]pleg failed: PLEG"},
		{name: "pods", target: func(c *Config, p *actor.PID) { c.Status = p }, method: "GET", path: "/pods", wantCode: 503, want: "did not answer within 100ms"},
		{name: "push", target: func(c *Config, p *actor.PID) { c.Push = p }, method: "POST", path: "/pods", body: podJSON, wantCode: 503, want: "push source"},
		{name: "delete", target: func(c *Config, p *actor.PID) { c.Push = p }, method: "DELETE", path: "/pods/a/b", wantCode: 503, want: "did not answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t, func(c *Config) {
				c.RequestTimeout, c.HealthProbeTimeout = 100*time.Millisecond, 100*time.Millisecond
				tt.target(c, silent(c.System))
			})
			start := time.Now()
			code, body, _ := do(t, e.srv.Main(), tt.method, tt.path, tt.body)
			if code != tt.wantCode || !strings.Contains(body, tt.want) {
				t.Fatalf("%d %q, want %d containing %q", code, body, tt.wantCode, tt.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %s", d)
			}
		})
	}
}

func TestDeadTarget(t *testing.T) {
	e := setup(t, func(c *Config) {
		dead := c.System.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
		if err := c.System.Root.StopFuture(dead).Wait(); err != nil {
			t.Fatal(err)
		}
		c.Status = dead
	})
	code, body, _ := do(t, e.srv.Main(), "GET", "/pods", "")
	if code != 503 || !strings.Contains(body, "not running") {
		t.Fatalf("%d %q", code, body)
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "System, Status, PLEG") {
		t.Fatalf("err = %v", err)
	}
}

func TestServeOverTCP(t *testing.T) {
	e := setup(t, func(c *Config) { c.Clock = nil })
	e.stubs.mu.Lock()
	e.stubs.health.LastRelist = time.Now()
	e.stubs.mu.Unlock()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- e.srv.Serve(ctx, ln, e.srv.ReadOnly()) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok" {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestListenAndServeShutsDown(t *testing.T) {
	e := setup(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- e.srv.ListenAndServe(ctx, "127.0.0.1:0", e.srv.Main()) }()
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no shutdown")
	}
	if err := e.srv.ListenAndServe(context.Background(), "256.0.0.1:1", e.srv.Main()); err == nil {
		t.Fatal("bad address accepted")
	}
}
