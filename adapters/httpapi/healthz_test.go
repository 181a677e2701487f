package httpapi

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	clocktesting "k8s.io/utils/clock/testing"
)

// touchCounter is a singleton that counts the probes it gets (protoactor
// answers each *actor.Touch after the actor's Receive).
func touchCounter(sys *actor.ActorSystem, n *atomic.Int64) *actor.PID {
	return sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*actor.Touch); ok {
			n.Add(1)
		}
	}))
}

func TestHealthzProbesSingletons(t *testing.T) {
	tests := []struct {
		name       string
		path       string
		node       string // "ok", "dead", "stuck": the node singleton
		wantCode   int
		wantBody   []string
		unwantBody []string
	}{
		{name: "every singleton answers", path: "/healthz", node: "ok", wantCode: 200, wantBody: []string{"ok"},
			unwantBody: []string{"[+]", "[-]"}},
		{name: "verbose lists every check", path: "/healthz?verbose", node: "ok", wantCode: 200,
			wantBody: []string{"[+]pleg ok\n", "[+]runtime ok\n", "[+]actor-node ok\n", "[+]actor-status ok\n", "healthz check passed"}},
		{name: "a dead singleton fails it", path: "/healthz", node: "dead", wantCode: 500,
			wantBody: []string{"[-]actor-node failed: actor (", ") is not running\n", "[+]actor-status ok\n", "[+]pleg ok\n", "healthz check failed"}},
		{name: "a mailbox that does not answer fails it", path: "/healthz?verbose", node: "stuck", wantCode: 500,
			wantBody: []string{"[-]actor-node failed: actor (", ") did not answer within 100ms\n", "[+]actor-status ok\n", "healthz check failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			var touches atomic.Int64
			e := setup(t, func(c *Config) {
				c.HealthProbeTimeout = 100 * time.Millisecond
				var node *actor.PID
				switch tt.node {
				case "ok":
					node = touchCounter(c.System, &touches)
				case "dead":
					node = touchCounter(c.System, &touches)
					if err := c.System.Root.StopFuture(node).Wait(); err != nil {
						t.Fatal(err)
					}
				case "stuck": // busy in one message: its mailbox waits
					node = c.System.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
						if _, ok := c.Message().(*actor.Touch); ok {
							<-release
						}
					}))
				}
				c.Singletons = []Singleton{{Name: "node", PID: node}, {Name: "status", PID: c.Status}}
			})
			t.Cleanup(func() { close(release) })
			for _, h := range []func(*Server) http.Handler{(*Server).Healthz, (*Server).ReadOnly, (*Server).Main} {
				code, body, hdr := do(t, h(e.srv), "GET", tt.path, "")
				if code != tt.wantCode {
					t.Fatalf("GET %s = %d, want %d; body:\n%s", tt.path, code, tt.wantCode, body)
				}
				if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
					t.Errorf("content type %q", ct)
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
			}
		})
	}
}

// A storm of /healthz requests probes each singleton once per cache TTL:
// concurrent requests share a round, later ones reuse it until it expires.
func TestHealthzCachesRounds(t *testing.T) {
	var touches atomic.Int64
	clk := clocktesting.NewFakePassiveClock(now)
	e := setup(t, func(c *Config) {
		c.Clock = clk
		c.HealthCacheTTL = time.Second
		c.Singletons = []Singleton{{Name: "node", PID: touchCounter(c.System, &touches)}}
	})
	h := e.srv.Healthz()
	var wg sync.WaitGroup
	codes := make([]int, 20)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _, _ = do(t, h, "GET", "/healthz", "")
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != 200 {
			t.Fatalf("request %d: %d", i, c)
		}
	}
	if n := touches.Load(); n != 1 {
		t.Fatalf("20 requests within the TTL probed %d times, want 1", n)
	}
	clk.SetTime(now.Add(999 * time.Millisecond))
	do(t, h, "GET", "/healthz", "")
	if n := touches.Load(); n != 1 {
		t.Fatalf("a request within the TTL probed again (%d probes)", n)
	}
	clk.SetTime(now.Add(2 * time.Second))
	do(t, h, "GET", "/healthz", "")
	if n := touches.Load(); n != 2 {
		t.Fatalf("a request after the TTL: %d probes, want 2", n)
	}
}
