package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/adapters/manifest"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"

	"github.com/actorlet/actorlet/internal/actorkit"
)

// fuzzSecret is the content of a file next to (outside) the pod logs dir:
// no request may ever show it.
const fuzzSecret = "TOP-SECRET-OUTSIDE-THE-LOGS-ROOT"

// fuzzRuntime is the container runtime behind the streaming endpoints: one
// running container c of default/web; it records every exec, attach and
// port-forward it is asked for and refuses them (nothing is proxied).
type fuzzRuntime struct{ calls atomic.Int64 }

var _ StreamingRuntime = (*fuzzRuntime)(nil)

func (f *fuzzRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return []*runtimeapi.Container{{
		Id: "ctr-c", PodSandboxId: "sb-web", State: runtimeapi.ContainerState_CONTAINER_RUNNING,
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
		Labels:   map[string]string{podspec.LabelPodUID: "u-web", podspec.LabelContainerName: "c"},
	}}, nil
}

func (f *fuzzRuntime) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return []*runtimeapi.PodSandbox{{
		Id: "sb-web", State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Labels: map[string]string{podspec.LabelPodUID: "u-web"},
	}}, nil
}

var errFuzzRuntime = errors.New("fuzz runtime: not streaming")

func (f *fuzzRuntime) Exec(context.Context, *runtimeapi.ExecRequest) (*url.URL, error) {
	f.calls.Add(1)
	return nil, errFuzzRuntime
}

func (f *fuzzRuntime) Attach(context.Context, *runtimeapi.AttachRequest) (*url.URL, error) {
	f.calls.Add(1)
	return nil, errFuzzRuntime
}

func (f *fuzzRuntime) PortForward(context.Context, string, []int32) (*url.URL, error) {
	f.calls.Add(1)
	return nil, errFuzzRuntime
}

// fuzzActors is a two-actor tree for /debug/actors.
type fuzzActors struct{}

func (fuzzActors) Snapshot() []actorkit.ActorInfo {
	return []actorkit.ActorInfo{{PID: "root", Kind: "root"}, {PID: "root/node", Kind: "node", Parent: "root"}}
}
func (fuzzActors) KindStats() []actorkit.KindStats {
	return []actorkit.KindStats{{Kind: "node", Live: 1}}
}

// panicLog fails on the recover middleware's "http handler panicked".
type panicLog struct {
	mu     sync.Mutex
	panics []string
}

func (p *panicLog) Enabled(context.Context, slog.Level) bool { return true }
func (p *panicLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "panicked") {
		p.mu.Lock()
		defer p.mu.Unlock()
		var b strings.Builder
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		p.panics = append(p.panics, r.Message+b.String())
	}
	return nil
}
func (p *panicLog) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *panicLog) WithGroup(string) slog.Handler      { return p }

func (p *panicLog) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.panics
	p.panics = nil
	return out
}

// fuzzEnv is the node API as the agent wires it (auth filter with the
// default flags, main, read-only and healthz handlers, container logs,
// streaming, debug) on stub actors, made once per fuzz target.
type fuzzEnv struct {
	main, readOnly, healthz http.Handler
	rt                      *fuzzRuntime
	pushes                  atomic.Int64 // messages the push source got
	pprof                   atomic.Int64 // requests that reached pprof
	log                     *panicLog
}

func newFuzzEnv(f *testing.F) *fuzzEnv {
	e := &fuzzEnv{rt: &fuzzRuntime{}, log: &panicLog{}}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	f.Cleanup(sys.Shutdown)
	web := v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u-web"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
			Name: "c", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}},
		}}},
	}
	status := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.GetPods:
			c.Respond(&messages.PodList{Items: []*v1.Pod{web.DeepCopy()}})
		case *messages.GetPod:
			found := &messages.PodFound{}
			if m.Namespace == web.Namespace && m.Name == web.Name {
				found.Pod = web.DeepCopy()
			}
			c.Respond(found)
		}
	}))
	pleg := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*messages.GetHealth); ok {
			c.Respond(&messages.Health{LastRelist: now.Add(-time.Second), Threshold: time.Minute})
		}
	}))
	push := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.PushPod:
			e.pushes.Add(1)
			c.Respond(&messages.PushResult{UID: m.Pod.UID, Name: m.Pod.Name})
		case *messages.RemovePushedPod:
			e.pushes.Add(1)
			c.Respond(&messages.PushResult{Name: m.Name, NotFound: true})
		}
	}))

	dir := f.TempDir()
	root := filepath.Join(dir, "logs")
	if err := os.MkdirAll(filepath.Join(root, "default_web_u-web", "c"), 0o755); err != nil {
		f.Fatal(err)
	}
	line := now.Format(time.RFC3339Nano) + " stdout F hello from web\n"
	if err := os.WriteFile(filepath.Join(root, "default_web_u-web", "c", "0.log"), []byte(line), 0o644); err != nil {
		f.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "secret"), filepath.Join(dir, "secret.log"), filepath.Join(root, "secret.log")} {
		if err := os.WriteFile(p, []byte(fuzzSecret+"\n"), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	log := slog.New(e.log)
	resolve := StatusResolver(sys, status, time.Second)
	debug := http.NewServeMux()
	debug.Handle("/debug/actors", NewDebug(fuzzActors{}))
	debug.HandleFunc("/debug/", func(w http.ResponseWriter, _ *http.Request) { // pprof would block for seconds
		e.pprof.Add(1)
		_, _ = io.WriteString(w, "pprof")
	})
	srv, err := New(Config{
		System: sys, Status: status, PLEG: pleg, Push: push,
		Decode:         fuzzDecode,
		Metrics:        http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "kubelet_running_pods 1\n") }),
		Debug:          debug,
		ContainerLogs:  NewContainerLogs(root, resolve, log, WithLogsPollInterval(10*time.Millisecond)),
		Streaming:      NewStreaming(resolve, e.rt, log),
		RequestTimeout: time.Second,
		MaxBodyBytes:   4096,
		Logger:         log,
		Clock:          clocktesting.NewFakePassiveClock(now),
	})
	if err != nil {
		f.Fatal(err)
	}
	auth, err := NewAuth(AuthConfig{NodeName: "n1", Anonymous: true, Logger: log})
	if err != nil {
		f.Fatal(err)
	}
	e.main, e.readOnly, e.healthz = auth.Wrap(srv.Main()), srv.ReadOnly(), srv.Healthz()
	return e
}

// fuzzDecode is the agent's push decoder (cmd/actorlet pushDecoder): the
// manifest adapter's decoding, defaults and validation of exactly one pod.
func fuzzDecode(b []byte) (*v1.Pod, error) {
	pods, err := manifest.Decode(b)
	if err != nil {
		return nil, err
	}
	if len(pods) != 1 {
		return nil, fmt.Errorf("want exactly one pod, got %d", len(pods))
	}
	manifest.ApplyDefaults(pods[0], messages.SourcePush, "n1", "push")
	if err := manifest.Validate(pods[0]); err != nil {
		return nil, err
	}
	return pods[0], nil
}

// FuzzNodeAPI sends arbitrary request lines (method, path, query), headers
// and bodies to the node API's three handlers, as the HTTP server parses
// them, from loopback or from another machine, without credentials. It
// must never panic and always answer a valid status; an anonymous request
// that writes or executes from another machine never reaches the push
// source, the runtime's exec/attach/port-forward or /debug/; no path shows
// a file outside the pod logs dir.
func FuzzNodeAPI(f *testing.F) {
	e := newFuzzEnv(f)
	for _, s := range []struct {
		method, target, body string
		flags                byte
	}{
		{"GET", "/pods", "", 0},
		{"GET", "/healthz", "", 1},
		{"GET", "/metrics", "", 2},
		{"POST", "/pods", podJSON, 0},
		{"POST", "/pods", podJSON, 1},
		{"POST", "/pods", podYAML, 0},
		{"POST", "/pods", "kind: Pod\nmetadata: {name: explode}\n", 1},
		{"DELETE", "/pods/web/nginx", "", 1},
		{"DELETE", "/pods/web/nginx", "", 0},
		{"GET", "/containerLogs/default/web/c?tailLines=1&timestamps=true", "", 0},
		{"GET", "/containerLogs/default/web/c?sinceSeconds=-1&limitBytes=0", "", 1},
		{"GET", "/containerLogs/default/web/../../secret", "", 1},
		{"GET", "/containerLogs/default/web/c%2F..%2F..%2F..%2Fsecret", "", 1},
		{"GET", "/containerLogs/default/web/c?previous=true&follow=true", "", 1},
		{"POST", "/exec/default/web/c?command=id&output=1", "", 0},
		{"GET", "/exec/default/web/c?command=id&output=1", "", 5},
		{"POST", "/exec/default/web/u-web/c?command=sh&command=-c&command=id&input=1&tty=1", "", 1},
		{"GET", "/attach/default/web/c?output=1", "", 1},
		{"POST", "/portForward/default/web?port=80", "", 1},
		{"GET", "/portForward/default/web?port=-1&port=99999", "", 1},
		{"GET", "/debug/actors?format=json", "", 1},
		{"GET", "/debug/actors?limit=-5", "", 0},
		{"GET", "/debug/pprof/profile?seconds=30", "", 0},
		{"GET", "//exec/default/web/c", "", 0},
		{"GET", "/pods/../debug/actors", "", 0},
		{"OPTIONS", "*", "", 0},
		{"CONNECT", "n1:443", "", 0},
		{"BREW", "/pods", "", 0},
	} {
		f.Add(s.method, s.target, []byte(s.body), s.flags)
	}
	f.Fuzz(func(t *testing.T, method, target string, body []byte, flags byte) {
		var raw bytes.Buffer
		fmt.Fprintf(&raw, "%s %s HTTP/1.1\r\nHost: n1\r\nContent-Length: %d\r\n", method, target, len(body))
		if flags&4 != 0 {
			raw.WriteString("Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n")
		}
		if flags&8 != 0 {
			raw.WriteString("Content-Type: application/yaml\r\n")
		}
		raw.WriteString("\r\n")
		raw.Write(body)
		r, err := http.ReadRequest(bufio.NewReader(&raw))
		if err != nil {
			return // the HTTP server answers 400 itself
		}
		r.RemoteAddr = "203.0.113.9:5555"
		if flags&1 != 0 {
			r.RemoteAddr = "127.0.0.1:5555"
		}
		which := (flags >> 4) % 4
		handler := []http.Handler{e.main, e.main, e.readOnly, e.healthz}[which]
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		r = r.WithContext(ctx)

		pushes, execs, pprof := e.pushes.Load(), e.rt.calls.Load(), e.pprof.Load()
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() {
				if v := recover(); v != nil && v != http.ErrAbortHandler { //nolint:errorlint // sentinel, as net/http compares it
					t.Errorf("%s %q panicked: %v", method, target, v)
				}
			}()
			handler.ServeHTTP(rec, r)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s %q did not return within 10s of its 300ms deadline", method, target)
		}
		if p := e.log.take(); len(p) > 0 {
			t.Fatalf("%s %q: a handler panicked: %v", method, target, p)
		}
		if rec.Code < 100 || rec.Code > 599 {
			t.Fatalf("%s %q: status %d", method, target, rec.Code)
		}
		if bytes.Contains(rec.Body.Bytes(), []byte(fuzzSecret)) {
			t.Fatalf("%s %q shows a file outside the pod logs dir: %q", method, target, rec.Body.String())
		}
		if flags&1 != 0 {
			return
		}
		if e.pushes.Load() != pushes || e.rt.calls.Load() != execs || e.pprof.Load() != pprof {
			t.Fatalf("anonymous %s %q from another machine reached the push source, the runtime or /debug/: %d %q",
				method, target, rec.Code, rec.Body.String())
		}
		if which < 2 && WritesOrExecutes(r) && rec.Code != http.StatusForbidden {
			t.Fatalf("anonymous %s %q from another machine: %d %q, want 403", method, target, rec.Code, rec.Body.String())
		}
	})
}
