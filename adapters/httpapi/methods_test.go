package httpapi

import (
	"context"
	"io"
	"net/http"
	"testing"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Kubernetes v1.37: the read-only endpoints answer 405 Method Not Allowed,
// with an Allow header, to every method but GET (HEAD included on the
// paths upstream filters; /healthz and /metrics keep HEAD as upstream
// serves it there). Main keeps POST /pods, actorlet's push API.
func TestReadOnlyEndpointsRefuseOtherMethods(t *testing.T) {
	e := setup(t, func(c *Config) {
		c.StatsSummary = func(context.Context) (*statsapi.Summary, error) { return &statsapi.Summary{}, nil }
		c.ContainerLogs = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "log") })
	})
	tests := []struct {
		name      string
		handler   http.Handler
		method    string
		path      string
		wantCode  int
		wantAllow string
	}{
		{"read-only GET /pods", e.srv.ReadOnly(), "GET", "/pods", 200, ""},
		{"read-only POST /pods", e.srv.ReadOnly(), "POST", "/pods", 405, "GET"},
		{"read-only HEAD /pods", e.srv.ReadOnly(), "HEAD", "/pods", 405, "GET"},
		{"read-only DELETE /pods", e.srv.ReadOnly(), "DELETE", "/pods", 405, "GET"},
		{"read-only PATCH /stats/summary", e.srv.ReadOnly(), "PATCH", "/stats/summary", 405, "GET"},
		{"read-only POST /metrics", e.srv.ReadOnly(), "POST", "/metrics", 405, "GET, HEAD"},
		{"read-only HEAD /metrics", e.srv.ReadOnly(), "HEAD", "/metrics", 200, ""},
		{"read-only PUT /metrics/resource", e.srv.ReadOnly(), "PUT", "/metrics/resource", 405, "GET, HEAD"},
		{"read-only POST /healthz", e.srv.ReadOnly(), "POST", "/healthz", 405, "GET, HEAD"},
		{"read-only unknown path stays 404", e.srv.ReadOnly(), "POST", "/nope", 404, ""},
		{"healthz port POST", e.srv.Healthz(), "POST", "/healthz", 405, "GET, HEAD"},
		{"main PUT /pods", e.srv.Main(), "PUT", "/pods", 405, "GET, POST"},
		{"main HEAD /pods", e.srv.Main(), "HEAD", "/pods", 405, "GET, POST"},
		{"main POST /containerLogs", e.srv.Main(), "POST", "/containerLogs/default/web/app", 405, "GET"},
		{"main HEAD /containerLogs", e.srv.Main(), "HEAD", "/containerLogs/default/web/app", 405, "GET"},
		{"main GET /containerLogs", e.srv.Main(), "GET", "/containerLogs/default/web/app", 200, ""},
		{"main POST /debug/pprof/profile", e.srv.Main(), "POST", "/debug/pprof/profile", 405, "GET"},
		{"main GET /debug/actors", e.srv.Main(), "GET", "/debug/actors", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, hdr := do(t, tt.handler, tt.method, tt.path, "")
			if code != tt.wantCode {
				t.Fatalf("%s %s: %d, want %d\n%s", tt.method, tt.path, code, tt.wantCode, body)
			}
			if got := hdr.Get("Allow"); got != tt.wantAllow {
				t.Errorf("%s %s: Allow %q, want %q", tt.method, tt.path, got, tt.wantAllow)
			}
		})
	}
}
