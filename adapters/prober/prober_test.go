package prober

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/health/grpc_health_v1"
)

func TestHTTPGet(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }))
	defer other.Close()
	otherURL, _ := url.Parse(other.URL)
	otherURL.Host = "localhost:" + otherURL.Port() // another host name
	// A slow answer never comes: the handler waits until the prober gives
	// up (the client's cancellation ends r's context) or the test ends.
	testDone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			if r.Header.Get("X-Probe") != "yes" || r.UserAgent() != UserAgent {
				w.WriteHeader(400)
			}
		case "/fail":
			w.WriteHeader(503)
		case "/local-redirect":
			http.Redirect(w, r, "/fail", http.StatusFound)
		case "/remote-redirect":
			http.Redirect(w, r, otherURL.String(), http.StatusFound)
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-testDone:
			}
		}
	}))
	defer srv.Close()
	defer close(testDone) // before srv.Close, which waits for handlers
	p := New()
	tests := []struct {
		name    string
		path    string
		want    bool
		warning string // the output of a success with a warning
		hasErr  bool
	}{
		{name: "2xx with headers", path: "/ok", want: true},
		{name: "5xx fails", path: "/fail"},
		{name: "redirect on the same host is followed", path: "/local-redirect"},
		{
			name: "redirect to another host is not followed and succeeds with a warning", path: "/remote-redirect", want: true,
			warning: "Probe terminated redirects, Response body: <a href=\"" + otherURL.String() + "\">Found</a>.\n\n",
		},
		{name: "timeout is an error", path: "/slow", hasErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, _ := url.Parse(srv.URL + tt.path)
			ok, warning, out, err := p.HTTPGet(context.Background(), u, http.Header{"X-Probe": {"yes"}}, 500*time.Millisecond)
			if (err != nil) != tt.hasErr || ok != tt.want {
				t.Fatalf("ok=%v out=%q err=%v, want ok=%v err=%v", ok, out, err, tt.want, tt.hasErr)
			}
			if warning != (tt.warning != "") || (warning && out != tt.warning) {
				t.Errorf("warning=%v out=%q, want warning %q", warning, out, tt.warning)
			}
		})
	}
}

func TestTCPCheck(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	p := New()
	if ok, out, _ := p.TCPCheck(context.Background(), "127.0.0.1", port, time.Second); !ok {
		t.Fatalf("open port: %s", out)
	}
	_ = l.Close()
	if ok, _, _ := p.TCPCheck(context.Background(), "127.0.0.1", port, time.Second); ok {
		t.Fatal("closed port succeeded")
	}
}

func TestGRPCCheck(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("", grpc_health_v1.HealthCheckResponse_SERVING)
	hs.SetServingStatus("db", grpc_health_v1.HealthCheckResponse_NOT_SERVING)
	grpc_health_v1.RegisterHealthServer(s, hs)
	go func() { _ = s.Serve(l) }()
	defer s.Stop()
	port, _ := strconv.Atoi(l.Addr().(*net.TCPAddr).AddrPort().String()[len("127.0.0.1:"):])
	p := New()
	if ok, out, _ := p.GRPCCheck(context.Background(), "127.0.0.1", port, "", time.Second); !ok {
		t.Fatalf("serving: %s", out)
	}
	if ok, out, _ := p.GRPCCheck(context.Background(), "127.0.0.1", port, "db", time.Second); ok || out == "" {
		t.Fatalf("not serving: ok=%v %s", ok, out)
	}
}
