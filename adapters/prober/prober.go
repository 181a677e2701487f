// Package prober holds the outbound probe handlers, as the upstream
// kubelet's pkg/probe: HTTP GET, TCP and the gRPC health service. They only
// do I/O; thresholds and timing live in the ProbeActor (actors/probe).
package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// UserAgent is sent by HTTP probes, as upstream's kube-probe/<major.minor>.
const UserAgent = "kube-probe/1.37"

// maxBody is how much of a response body is read (upstream: 10 KiB).
const maxBody = 10 * 1024

// Prober runs HTTP, TCP and gRPC probes.
type Prober struct {
	transport *http.Transport
}

// New returns a Prober. Keep-alives are off, as upstream (a probe opens a
// fresh connection each time), and TLS is not verified.
func New() *Prober {
	return &Prober{transport: &http.Transport{
		TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as upstream: probes do not verify certificates
		DisableKeepAlives:  true,
		DisableCompression: true,
		Proxy:              nil,
		DialContext:        (&net.Dialer{}).DialContext,
	}}
}

// HTTPGet gets u; a status in [200, 400) succeeds. Redirects are followed
// to the same host (up to 10); a redirect to another host is not followed
// and succeeds with a warning, as upstream (pkg/probe/http: "Probe
// terminated redirects, Response body: ...").
func (p *Prober) HTTPGet(ctx context.Context, u *url.URL, header http.Header, timeout time.Duration) (ok, warning bool, output string, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{
		Transport: p.transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Hostname() != via[0].URL.Hostname() {
				return http.ErrUseLastResponse
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, false, "", err
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", UserAgent)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "*/*")
	}
	if h := req.Header.Get("Host"); h != "" {
		req.Host = h
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, false, "", fmt.Errorf("Get %q: %w", u.String(), unwrapTimeout(err, timeout)) //nolint:staticcheck // the text of net/http's errors, as upstream probes report them
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	switch {
	case resp.StatusCode >= http.StatusMultipleChoices && resp.StatusCode < http.StatusBadRequest:
		return true, true, "Probe terminated redirects, Response body: " + string(b), nil
	case resp.StatusCode >= http.StatusOK && resp.StatusCode < http.StatusBadRequest:
		return true, false, string(b), nil
	}
	return false, false, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode), nil
}

func unwrapTimeout(err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("context deadline exceeded (timeout %s)", timeout)
	}
	return err
}

// TCPCheck connects to host:port and closes the connection.
func (p *Prober) TCPCheck(ctx context.Context, host string, port int, timeout time.Duration) (bool, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, fmt.Sprintf("dial tcp %s: %v", addr, unwrapTimeout(err, timeout)), nil
	}
	_ = conn.Close()
	return true, "", nil
}

// GRPCCheck calls grpc.health.v1.Health/Check for service on host:port
// (plaintext, as upstream); SERVING succeeds.
func (p *Prober) GRPCCheck(ctx context.Context, host string, port int, service string, timeout time.Duration) (bool, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(UserAgent))
	if err != nil {
		return false, fmt.Sprintf("failed to connect service %q: %v", addr, err), nil
	}
	defer func() { _ = conn.Close() }()
	resp, err := grpc_health_v1.NewHealthClient(conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: service})
	if err != nil {
		st, _ := status.FromError(err)
		switch st.Code() {
		case codes.Unimplemented:
			return false, fmt.Sprintf("this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", st.Message()), nil
		case codes.DeadlineExceeded:
			return false, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout), nil
		}
		return false, fmt.Sprintf("error: health rpc probe failed: %v", err), nil
	}
	if resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
		return false, "service unhealthy (responded with " + strings.TrimPrefix(resp.GetStatus().String(), "HealthCheckResponse_") + ")", nil
	}
	return true, "", nil
}
