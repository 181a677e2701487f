package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlet/actorlet/adapters/httpapi"
	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/supervisors"
)

// namedHandlers answers each port's requests with the port's name.
type namedHandlers struct{}

var _ nodeAPIHandlers = namedHandlers{}

func named(s string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, s) })
}

func (namedHandlers) Main() http.Handler     { return named("main") }
func (namedHandlers) ReadOnly() http.Handler { return named("read-only") }
func (namedHandlers) Healthz() http.Handler  { return named("healthz") }

func TestListeners(t *testing.T) {
	tests := []struct {
		name   string
		flags  func(o *options)
		want   []string // what@addr
		bodies []string
	}{
		{name: "defaults", flags: func(*options) {},
			want:   []string{"node API@0.0.0.0:10250", "read-only node API@0.0.0.0:10255", "healthz@127.0.0.1:10248"},
			bodies: []string{"main", "read-only", "healthz"}},
		{name: "ports set", flags: func(o *options) {
			o.Address, o.Port, o.ReadOnlyPort, o.HealthzPort = "127.0.0.1", 19250, 19255, 19248
		}, want: []string{"node API@127.0.0.1:19250", "read-only node API@127.0.0.1:19255", "healthz@127.0.0.1:19248"},
			bodies: []string{"main", "read-only", "healthz"}},
		{name: "read-only and healthz off", flags: func(o *options) { o.ReadOnlyPort, o.HealthzPort = 0, 0 },
			want: []string{"node API@0.0.0.0:10250"}, bodies: []string{"main"}},
		{name: "all off", flags: func(o *options) { o.Port, o.ReadOnlyPort, o.HealthzPort = 0, 0, 0 }},
		{name: "ipv6", flags: func(o *options) { o.Address, o.ReadOnlyPort, o.HealthzPort = "::1", 0, 0 },
			want: []string{"node API@[::1]:10250"}, bodies: []string{"main"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := defaultOptions()
			o.AnonymousAuth = true
			tc.flags(o)
			auth, err := httpapi.NewAuth(httpapi.AuthConfig{NodeName: "n1", Anonymous: true, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			secure := nodeAPI{tls: &tls.Config{MinVersion: tls.VersionTLS12}, auth: auth}
			ls := listeners(o, namedHandlers{}, secure)
			if len(ls) != len(tc.want) {
				t.Fatalf("%d listeners, want %v", len(ls), tc.want)
			}
			for i, l := range ls {
				if got := l.what + "@" + l.addr; got != tc.want[i] {
					t.Errorf("listener %d: %s, want %s", i, got, tc.want[i])
				}
				if (l.tls != nil) != (l.what == "node API") {
					t.Errorf("%s: tls %v: only the node API on --port uses TLS", l.what, l.tls != nil)
				}
				rec := httptest.NewRecorder()
				l.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/pods", nil))
				if rec.Body.String() != tc.bodies[i] {
					t.Errorf("%s serves %q (%d), want %q", l.what, rec.Body.String(), rec.Code, tc.bodies[i])
				}
			}
		})
	}
}

// podActor panics on "boom" (a restart and a last failure to show).
type podActor struct{}

func (podActor) Receive(c actor.Context) {
	if c.Message() == "boom" {
		panic("boom on purpose")
	}
}

// nodeActorStub spawns one pod actor under itself, as the NodeActor does.
type nodeActorStub struct{ props *actor.Props }

func (n *nodeActorStub) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); ok {
		_, _ = c.SpawnNamed(n.props, "pod-1")
	}
}

// TestDebugPageOnLiveRegistry serves /debug/actors from a live tree's
// registry, as the agent wires it: a crashed and restarted pod actor shows
// under its node, with its restart and its failure.
func TestDebugPageOnLiveRegistry(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return log }))
	t.Cleanup(sys.Shutdown)
	reg := supervisors.NewRegistry(nil)
	strategy := supervisors.NewStrategy(supervisors.StrategyConfig{}, nil, log, nil)
	mws := supervisors.Middlewares(reg, log, nil)
	props := func(p actor.Producer) *actor.Props {
		return actor.PropsFromProducer(p, actor.WithReceiverMiddleware(mws...), actor.WithSupervisor(strategy))
	}
	podProps := props(func() actor.Actor { return podActor{} })
	root, err := supervisors.SpawnRoot(sys, strategy, mws, []supervisors.Child{
		{Name: "node", Props: props(func() actor.Actor { return &nodeActorStub{props: podProps} })},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = supervisors.Stop(sys, root) })
	src := reg
	podID := "root/node/pod-1"
	restarts := func() int {
		for _, a := range src.Snapshot() {
			if a.PID == podID {
				return a.Restarts
			}
		}
		return -1
	}
	actortest.Eventually(t, "pod actor registered", func() bool { return restarts() == 0 })
	sys.Root.Send(actor.NewPID(sys.Address(), podID), "boom")
	actortest.Eventually(t, "pod actor restarted", func() bool { return restarts() == 1 })

	rec := httptest.NewRecorder()
	httpapi.NewDebug(src).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/actors?format=json", nil))
	var page httpapi.ActorsPage
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	if page.Actors != 3 || len(page.Tree) != 1 || len(page.Tree[0].Children) != 1 ||
		len(page.Tree[0].Children[0].Children) != 1 {
		t.Fatalf("want root -> node -> pod: %s", rec.Body)
	}
	pod := page.Tree[0].Children[0].Children[0]
	if pod.Kind != supervisors.KindPod || pod.Restarts != 1 || !strings.Contains(pod.LastFailure, "boom on purpose") {
		t.Fatalf("pod actor: %+v", pod)
	}
	kinds := map[string]httpapi.KindSummary{}
	for _, k := range page.Kinds {
		kinds[k.Kind] = k
	}
	if kinds["pod"].Live != 1 || kinds["pod"].Handled == 0 || kinds["node"].Live != 1 {
		t.Fatalf("kinds: %+v", page.Kinds)
	}
}

// records keeps "msg api address" of every log record.
type records struct {
	mu    sync.Mutex
	lines []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "api" {
			line += " api=" + a.Value.String()
		}
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	return nil
}

func (r *records) serving() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		if strings.HasPrefix(l, "serving") {
			out = append(out, l)
		}
	}
	return out
}

// Issue 9: each listener was logged twice ("serving" here and "serving
// node API" in httpapi), and one whose port was in use was logged as
// serving before it failed. Each open port is logged once, a port in use
// only as the error.
func TestServeLogsEachListenerOnce(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	logs := &records{}
	log := slog.New(logs)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	pid := actor.NewPID(sys.Address(), "none")
	srv, err := httpapi.New(httpapi.Config{System: sys, Status: pid, PLEG: pid, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ls := []listener{
		{what: "node API", addr: "127.0.0.1:0", handler: named("main"), tls: &tls.Config{MinVersion: tls.VersionTLS12}},
		{what: "read-only node API", addr: "127.0.0.1:0", handler: named("read-only")},
		{what: "healthz", addr: taken.Addr().String(), handler: named("healthz")},
	}
	ctx, cancel := context.WithCancel(context.Background())
	wait, errc := serve(ctx, srv, ls, log)
	select {
	case err := <-errc:
		if !strings.Contains(err.Error(), "healthz on "+taken.Addr().String()) {
			t.Errorf("error %v does not name the listener and its address", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no error for the port in use")
	}
	actortest.Eventually(t, "two listeners serving", func() bool { return len(logs.serving()) >= 2 })
	cancel()
	wait()
	got := logs.serving()
	slices.Sort(got)
	if want := []string{"serving api=node API", "serving api=read-only node API"}; !slices.Equal(got, want) {
		t.Fatalf("serving lines %q, want %q", got, want)
	}
}
