package kube

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// podJSON is what blockingServer answers: a pod, so that a Client can
// decode it.
const podJSON = `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns"}}`

// blockingServer answers every request once release is closed and counts
// how many were in its handler at once.
type blockingServer struct {
	release chan struct{}
	arrived chan struct{}
	now     atomic.Int64
	peak    atomic.Int64
}

func newBlockingServer(capacity int) *blockingServer {
	return &blockingServer{release: make(chan struct{}), arrived: make(chan struct{}, capacity)}
}

func (s *blockingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.now.Add(1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	s.arrived <- struct{}{}
	<-s.release
	s.now.Add(-1)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, podJSON)
}

// burst runs do total times at once, lets the server answer once held
// requests are in it (they stay there until then, so the peak shows that
// no other got past the bound meanwhile), and fails on any error.
func (s *blockingServer) burst(t *testing.T, total, held int, do func() error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, total)
	for range total {
		wg.Go(func() { errs <- do() })
	}
	for range held {
		<-s.arrived
	}
	close(s.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("request: %v", err)
		}
	}
}

func TestInFlightBoundsRequests(t *testing.T) {
	const limit, total = 3, 12
	srv := newBlockingServer(total)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	rt := limitInFlight(limit)(http.DefaultTransport)

	srv.burst(t, total, limit, func() error {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/api/v1/pods", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	})
	if got := srv.peak.Load(); got != limit {
		t.Fatalf("peak in flight = %d, want %d", got, limit)
	}
}

func TestInFlightLetsWatchesThrough(t *testing.T) {
	srv := newBlockingServer(4)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	rt := limitInFlight(1)(http.DefaultTransport)

	done := make(chan error, 2)
	for _, path := range []string{"/api/v1/pods?watch=true", "/api/v1/nodes?watch=1&resourceVersion=5"} {
		go func() {
			req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
			resp, err := rt.RoundTrip(req)
			if err == nil {
				err = resp.Body.Close()
			}
			done <- err
		}()
	}
	// Both watches are in the server at once although the bound is 1.
	<-srv.arrived
	<-srv.arrived
	close(srv.release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestInFlightSlotHeldUntilBodyClosed(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer ts.Close()
	rt := limitInFlight(1)(http.DefaultTransport)

	req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	first, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	// The first body is open: a second request waits, and gives up with
	// its context.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req2, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL, nil)
	if _, err := rt.RoundTrip(req2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second request with the slot taken: err = %v, want deadline exceeded", err)
	}
	// Closing twice gives the slot back once.
	_ = first.Body.Close()
	_ = first.Body.Close()
	req3, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	third, err := rt.RoundTrip(req3)
	if err != nil {
		t.Fatalf("after the first body closed: %v", err)
	}
	_ = third.Body.Close()
	if got := len(rt.(*inFlight).slots); got != 0 {
		t.Fatalf("slots held after every body closed = %d, want 0", got)
	}
}

func TestInFlightWrapsForClientGo(t *testing.T) {
	rt := limitInFlight(1)(http.DefaultTransport)
	w, ok := rt.(utilnet.RoundTripperWrapper)
	if !ok || w.WrappedRoundTripper() != http.DefaultTransport {
		t.Fatal("the in-flight bound does not expose the transport it wraps: client-go cannot cancel requests through it")
	}
}

func TestInFlightReleasesOnTransportError(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close() // nothing listens: every round trip fails
	rt := limitInFlight(1)(http.DefaultTransport)
	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if _, err := rt.RoundTrip(req); err == nil {
			t.Fatal("round trip to a closed server succeeded")
		}
	}
	if got := len(rt.(*inFlight).slots); got != 0 {
		t.Fatalf("slots held after failed requests = %d, want 0", got)
	}
}

// TestClientBurstSharesOneConnection sends 200 requests at once through a
// Client made by New to an HTTP/2 server that allows 100 streams per
// connection (kube-apiserver's default): at most DefaultMaxInFlight reach
// it at once, all succeed, and they share the one TLS connection (without
// the bound: a new connection and handshake for each request past the
// server's 100 streams).
func TestClientBurstSharesOneConnection(t *testing.T) {
	const total = 200
	srv := newBlockingServer(total)
	var conns atomic.Int64
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/warm") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, podJSON)
			return
		}
		srv.ServeHTTP(w, r)
	}))
	ts.EnableHTTP2 = true
	ts.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 100}
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.StartTLS()
	defer ts.Close()

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	writeKubeconfigFile(t, kubeconfig, ts.URL, caPEM, &clientcmdapi.AuthInfo{Token: "t"})
	c, err := New("n1", Options{Kubeconfig: kubeconfig, QPS: 10000, Burst: 10000})
	if err != nil {
		t.Fatal(err)
	}

	// The agent's connection is up before a burst (its informers made it):
	// one request first.
	if _, err := c.GetPod(context.Background(), "ns", "warm"); err != nil {
		t.Fatal(err)
	}
	srv.burst(t, total, DefaultMaxInFlight, func() error {
		_, err := c.GetPod(context.Background(), "ns", "p")
		return err
	})
	if got := srv.peak.Load(); got != DefaultMaxInFlight {
		t.Fatalf("requests in the server at once = %d, want %d", got, DefaultMaxInFlight)
	}
	if got := conns.Load(); got != 1 {
		t.Fatalf("TLS connections = %d, want 1", got)
	}
}
