package e2e

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// Kubernetes v1.37 node items on the wire, against the real agent on the
// simulated runtime (docs/KUBERNETES-1.37.md).

// TestE2ESimV137ReadOnlyMethods: the read-only port and the health port
// answer 405 Method Not Allowed with an Allow header to any method but
// GET (HEAD too on /pods, as upstream's GETOnlyRestfulFilter), and GET
// still works.
func TestE2ESimV137ReadOnlyMethods(t *testing.T) {
	a := startAgent(t, agentOpts{})
	client := &http.Client{Timeout: 10 * time.Second}
	tests := []struct {
		port      int
		method    string
		path      string
		wantCode  int
		wantAllow string
	}{
		{a.roPort, "GET", "/pods", 200, ""},
		{a.roPort, "POST", "/pods", 405, "GET"},
		{a.roPort, "HEAD", "/pods", 405, "GET"},
		{a.roPort, "DELETE", "/pods", 405, "GET"},
		{a.roPort, "POST", "/stats/summary", 405, "GET"},
		{a.roPort, "PUT", "/metrics", 405, "GET, HEAD"},
		{a.roPort, "POST", "/metrics/resource", 405, "GET, HEAD"},
		{a.roPort, "POST", "/healthz", 405, "GET, HEAD"},
		{a.hzPort, "POST", "/healthz", 405, "GET, HEAD"},
		{a.hzPort, "GET", "/healthz", 200, ""},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, fmt.Sprintf("http://127.0.0.1:%d%s", tt.port, tt.path), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.method, tt.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tt.wantCode {
			t.Errorf("port %d %s %s: %d, want %d (%s)", tt.port, tt.method, tt.path, resp.StatusCode, tt.wantCode, body)
		}
		if got := resp.Header.Get("Allow"); got != tt.wantAllow {
			t.Errorf("port %d %s %s: Allow %q, want %q", tt.port, tt.method, tt.path, got, tt.wantAllow)
		}
	}
}
