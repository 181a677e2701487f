package httpapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeTokens answers token reviews from a map and records them.
type fakeTokens struct {
	mu    sync.Mutex
	users map[string]authenticationv1.UserInfo
	err   error
	calls []string
}

var _ TokenReviewer = (*fakeTokens)(nil)

func (f *fakeTokens) ReviewToken(_ context.Context, token string) (*authenticationv1.TokenReviewStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, token)
	if f.err != nil {
		return nil, f.err
	}
	u, ok := f.users[token]
	if !ok {
		return &authenticationv1.TokenReviewStatus{Error: "token not found"}, nil
	}
	return &authenticationv1.TokenReviewStatus{Authenticated: true, User: u}, nil
}

func (f *fakeTokens) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// fakeAccess allows what allow says and records every review.
type fakeAccess struct {
	mu    sync.Mutex
	allow func(authorizationv1.SubjectAccessReviewSpec) bool
	err   error
	calls []authorizationv1.SubjectAccessReviewSpec
}

var _ AccessReviewer = (*fakeAccess)(nil)

func (f *fakeAccess) ReviewAccess(_ context.Context, spec authorizationv1.SubjectAccessReviewSpec) (*authorizationv1.SubjectAccessReviewStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, spec)
	if f.err != nil {
		return nil, f.err
	}
	if f.allow != nil && f.allow(spec) {
		return &authorizationv1.SubjectAccessReviewStatus{Allowed: true}, nil
	}
	return &authorizationv1.SubjectAccessReviewStatus{Reason: "no RBAC rule"}, nil
}

func (f *fakeAccess) reviews() []authorizationv1.SubjectAccessReviewSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// testCA is a CA that signs client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return &testCA{cert: c, key: key, pool: pool}
}

// client signs a client certificate for cn in groups.
func (ca *testCA) client(t *testing.T, cn string, groups ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn, Organization: groups},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// authServer serves a handler that echoes the user behind Auth over real
// TLS (client certificates requested, as on --port).
func authServer(t *testing.T, cfg AuthConfig) *httptest.Server {
	t.Helper()
	if cfg.NodeName == "" {
		cfg.NodeName = "n1"
	}
	if cfg.Clock == nil {
		cfg.Clock = clocktesting.NewFakeClock(now)
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	a, err := NewAuth(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := UserFrom(r.Context())
		_, _ = io.WriteString(w, u.Name+" "+strings.Join(u.Groups, ","))
	}))
	srv := httptest.NewUnstartedServer(h)
	certPEM, keyPEM, err := SelfSignedCert([]string{"localhost"}, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = TLSConfig(cert)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

type call struct {
	method, path string
	cert         *tls.Certificate
	token        string
}

func doAuth(t *testing.T, srv *httptest.Server, c call) (int, string) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // test server
	if c.cert != nil {
		tr.TLSClientConfig.Certificates = []tls.Certificate{*c.cert}
	}
	defer tr.CloseIdleConnections()
	if c.method == "" {
		c.method = http.MethodGet
	}
	if c.path == "" {
		c.path = "/pods"
	}
	req, err := http.NewRequest(c.method, srv.URL+c.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func TestAuthentication(t *testing.T) {
	ca, other := newTestCA(t, "cluster-ca"), newTestCA(t, "other-ca")
	admin := ca.client(t, "alice", "system:masters", "devs")
	stranger := other.client(t, "mallory", "system:masters")
	tokens := &fakeTokens{users: map[string]authenticationv1.UserInfo{
		"good-token": {Username: "system:serviceaccount:default:sa", UID: "u1", Groups: []string{"system:serviceaccounts"}},
	}}
	tests := []struct {
		name      string
		anonymous bool
		noTokens  bool
		reviewErr error
		call      call
		wantCode  int
		wantBody  string
	}{
		{name: "anonymous on, no credentials", anonymous: true, wantCode: 200, wantBody: "system:anonymous system:unauthenticated"},
		{name: "anonymous off, no credentials", wantCode: 401, wantBody: "Unauthorized"},
		{name: "client cert from the CA", call: call{cert: &admin}, wantCode: 200, wantBody: "alice devs,system:masters,system:authenticated"},
		{name: "client cert from another CA, anonymous on", anonymous: true, call: call{cert: &stranger}, wantCode: 401},
		{name: "valid token", call: call{token: "good-token"}, wantCode: 200,
			wantBody: "system:serviceaccount:default:sa system:serviceaccounts,system:authenticated"},
		{name: "rejected token, anonymous on", anonymous: true, call: call{token: "bad-token"}, wantCode: 401},
		{name: "token review fails", reviewErr: errors.New("connection refused"), call: call{token: "good-token"}, wantCode: 401},
		{name: "token webhook off", noTokens: true, anonymous: true, call: call{token: "good-token"}, wantCode: 401},
		{name: "client cert wins over token", call: call{cert: &admin, token: "bad-token"}, wantCode: 200,
			wantBody: "alice devs,system:masters,system:authenticated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ft := &fakeTokens{users: tokens.users, err: tt.reviewErr}
			cfg := AuthConfig{Anonymous: tt.anonymous, ClientCAs: ca.pool, Tokens: ft, TokenCacheTTL: time.Minute}
			if tt.noTokens {
				cfg.Tokens = nil
			}
			code, body := doAuth(t, authServer(t, cfg), tt.call)
			if code != tt.wantCode {
				t.Fatalf("status %d (%q), want %d", code, body, tt.wantCode)
			}
			if tt.wantBody != "" && body != tt.wantBody {
				t.Fatalf("body %q, want %q", body, tt.wantBody)
			}
		})
	}
}

func TestRequestAttributes(t *testing.T) {
	tests := []struct {
		name, method, path string
		wantVerb           string
		wantSubs           []string
	}{
		{name: "list pods", method: "GET", path: "/pods", wantVerb: "get", wantSubs: []string{"pods", "proxy"}},
		{name: "push pod", method: "POST", path: "/pods", wantVerb: "create", wantSubs: []string{"pods", "proxy"}},
		{name: "remove pod", method: "DELETE", path: "/pods/default/web", wantVerb: "delete", wantSubs: []string{"pods", "proxy"}},
		{name: "container logs", method: "GET", path: "/containerLogs/default/web/main", wantVerb: "get", wantSubs: []string{"proxy"}},
		{name: "exec", method: "POST", path: "/exec/default/web/main", wantVerb: "create", wantSubs: []string{"proxy"}},
		{name: "debug", method: "GET", path: "/debug/actors", wantVerb: "get", wantSubs: []string{"proxy"}},
		{name: "metrics", method: "GET", path: "/metrics", wantVerb: "get", wantSubs: []string{"metrics"}},
		{name: "metrics cadvisor", method: "GET", path: "/metrics/cadvisor", wantVerb: "get", wantSubs: []string{"metrics"}},
		{name: "not metrics", method: "GET", path: "/metricsfoo", wantVerb: "get", wantSubs: []string{"proxy"}},
		{name: "stats", method: "GET", path: "/stats/summary", wantVerb: "get", wantSubs: []string{"stats"}},
		{name: "node logs", method: "GET", path: "/logs/syslog", wantVerb: "get", wantSubs: []string{"log"}},
		{name: "checkpoint", method: "POST", path: "/checkpoint/ns/p/c", wantVerb: "create", wantSubs: []string{"checkpoint"}},
		{name: "healthz", method: "GET", path: "/healthz", wantVerb: "get", wantSubs: []string{"healthz", "proxy"}},
		{name: "configz", method: "GET", path: "/configz", wantVerb: "get", wantSubs: []string{"configz", "proxy"}},
		{name: "spec is proxy upstream", method: "GET", path: "/spec/", wantVerb: "get", wantSubs: []string{"proxy"}},
		{name: "put", method: "PUT", path: "/pods", wantVerb: "update", wantSubs: []string{"pods", "proxy"}},
		{name: "patch", method: "PATCH", path: "/x", wantVerb: "patch", wantSubs: []string{"proxy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.path, nil)
			attrs := RequestAttributes("n1", r)
			var subs []string
			for _, a := range attrs {
				if a.Verb != tt.wantVerb || a.Name != "n1" || a.Path != tt.path {
					t.Fatalf("attributes %+v, want verb %s on n1", a, tt.wantVerb)
				}
				subs = append(subs, a.Subresource)
			}
			if !slices.Equal(subs, tt.wantSubs) {
				t.Fatalf("subresources %v, want %v", subs, tt.wantSubs)
			}
		})
	}
}

func TestAuthorizationWebhook(t *testing.T) {
	ca := newTestCA(t, "cluster-ca")
	bob := ca.client(t, "bob", "team")
	tests := []struct {
		name      string
		call      call
		allow     func(authorizationv1.SubjectAccessReviewSpec) bool
		reviewErr error
		wantCode  int
		wantBody  string
		wantSubs  []string // subresources reviewed, in order
	}{
		{name: "allowed on pods", call: call{cert: &bob},
			allow: func(s authorizationv1.SubjectAccessReviewSpec) bool {
				return s.ResourceAttributes.Subresource == "pods"
			},
			wantCode: 200, wantSubs: []string{"pods"}},
		{name: "pods denied, proxy allowed", call: call{cert: &bob},
			allow: func(s authorizationv1.SubjectAccessReviewSpec) bool {
				return s.ResourceAttributes.Subresource == "proxy"
			},
			wantCode: 200, wantSubs: []string{"pods", "proxy"}},
		{name: "denied", call: call{cert: &bob, method: "POST"}, wantCode: 403,
			wantBody: "Forbidden (user=bob, verb=create, resource=nodes, subresource(s)=[pods proxy])", wantSubs: []string{"pods", "proxy"}},
		{name: "logs need proxy", call: call{cert: &bob, path: "/containerLogs/default/p/c"}, wantCode: 403,
			allow: func(s authorizationv1.SubjectAccessReviewSpec) bool {
				return s.ResourceAttributes.Subresource == "pods"
			},
			wantSubs: []string{"proxy"}},
		{name: "review fails", call: call{cert: &bob, path: "/metrics"}, reviewErr: errors.New("etcd on fire"), wantCode: 500,
			wantBody: "Authorization error (user=bob, verb=get, resource=nodes, subresource=metrics)", wantSubs: []string{"metrics"}},
		{name: "anonymous is reviewed too", call: call{path: "/healthz"}, wantCode: 403, wantSubs: []string{"healthz", "proxy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fa := &fakeAccess{allow: tt.allow, err: tt.reviewErr}
			srv := authServer(t, AuthConfig{NodeName: "n1", Anonymous: true, ClientCAs: ca.pool, Access: fa,
				AuthorizedTTL: time.Minute, UnauthorizedTTL: time.Minute})
			code, body := doAuth(t, srv, tt.call)
			if code != tt.wantCode {
				t.Fatalf("status %d (%q), want %d", code, body, tt.wantCode)
			}
			if tt.wantBody != "" && body != tt.wantBody {
				t.Fatalf("body %q, want %q", body, tt.wantBody)
			}
			var subs []string
			for _, s := range fa.reviews() {
				ra := s.ResourceAttributes
				if ra == nil || ra.Resource != "nodes" || ra.Name != "n1" || ra.Version != "v1" || ra.Group != "" || ra.Namespace != "" {
					t.Fatalf("review attributes %+v", ra)
				}
				if tt.call.cert != nil && (s.User != "bob" || !slices.Equal(s.Groups, []string{"team", GroupAuthenticated})) {
					t.Fatalf("review user %q groups %v", s.User, s.Groups)
				}
				if tt.call.cert == nil && (s.User != UserAnonymous || !slices.Equal(s.Groups, []string{GroupUnauthenticated})) {
					t.Fatalf("anonymous review user %q groups %v", s.User, s.Groups)
				}
				subs = append(subs, ra.Subresource)
			}
			if !slices.Equal(subs, tt.wantSubs) {
				t.Fatalf("reviewed %v, want %v", subs, tt.wantSubs)
			}
		})
	}
}

func TestTokenCacheTTL(t *testing.T) {
	clk := clocktesting.NewFakeClock(now)
	ft := &fakeTokens{users: map[string]authenticationv1.UserInfo{"good": {Username: "u"}}}
	srv := authServer(t, AuthConfig{Tokens: ft, TokenCacheTTL: 2 * time.Minute, Clock: clk})
	steps := []struct {
		name      string
		advance   time.Duration
		token     string
		wantCode  int
		wantCalls int
	}{
		{name: "first use asks", token: "good", wantCode: 200, wantCalls: 1},
		{name: "cached", advance: time.Minute, token: "good", wantCode: 200, wantCalls: 1},
		{name: "expired asks again", advance: time.Minute + time.Second, token: "good", wantCode: 200, wantCalls: 2},
		{name: "bad token asks", token: "bad", wantCode: 401, wantCalls: 3},
		{name: "bad token cached too", advance: 119 * time.Second, token: "bad", wantCode: 401, wantCalls: 3},
		{name: "bad token expired", advance: time.Second, token: "bad", wantCode: 401, wantCalls: 4},
	}
	for _, s := range steps {
		clk.Step(s.advance)
		if code, body := doAuth(t, srv, call{token: s.token}); code != s.wantCode {
			t.Fatalf("%s: status %d (%q), want %d", s.name, code, body, s.wantCode)
		}
		if n := ft.count(); n != s.wantCalls {
			t.Fatalf("%s: %d reviews, want %d", s.name, n, s.wantCalls)
		}
	}
	// A failed review is not cached: the next request asks again.
	ft.mu.Lock()
	ft.err = errors.New("timeout")
	ft.mu.Unlock()
	clk.Step(3 * time.Minute)
	for range 2 {
		if code, _ := doAuth(t, srv, call{token: "good"}); code != 401 {
			t.Fatalf("review error: status %d, want 401", code)
		}
	}
	if n := ft.count(); n != 6 {
		t.Fatalf("errors were cached: %d reviews, want 6", n)
	}
}

func TestAccessCacheTTL(t *testing.T) {
	clk := clocktesting.NewFakeClock(now)
	ca := newTestCA(t, "ca")
	alice, bob := ca.client(t, "alice"), ca.client(t, "bob")
	fa := &fakeAccess{allow: func(s authorizationv1.SubjectAccessReviewSpec) bool { return s.User == "alice" }}
	srv := authServer(t, AuthConfig{ClientCAs: ca.pool, Access: fa, Clock: clk,
		AuthorizedTTL: 5 * time.Minute, UnauthorizedTTL: 30 * time.Second})
	steps := []struct {
		name      string
		advance   time.Duration
		cert      *tls.Certificate
		path      string
		wantCode  int
		wantCalls int
	}{
		{name: "alice asks", cert: &alice, path: "/debug/actors", wantCode: 200, wantCalls: 1},
		{name: "alice cached", advance: 4 * time.Minute, cert: &alice, path: "/debug/actors", wantCode: 200, wantCalls: 1},
		{name: "another subresource is another review", cert: &alice, path: "/metrics", wantCode: 200, wantCalls: 2},
		{name: "alice expired", advance: time.Minute, cert: &alice, path: "/debug/actors", wantCode: 200, wantCalls: 3},
		{name: "bob denied", cert: &bob, path: "/debug/actors", wantCode: 403, wantCalls: 4},
		{name: "bob denial cached", advance: 29 * time.Second, cert: &bob, path: "/debug/actors", wantCode: 403, wantCalls: 4},
		{name: "bob denial expired", advance: time.Second, cert: &bob, path: "/debug/actors", wantCode: 403, wantCalls: 5},
	}
	for _, s := range steps {
		clk.Step(s.advance)
		if code, body := doAuth(t, srv, call{cert: s.cert, path: s.path}); code != s.wantCode {
			t.Fatalf("%s: status %d (%q), want %d", s.name, code, body, s.wantCode)
		}
		if n := len(fa.reviews()); n != s.wantCalls {
			t.Fatalf("%s: %d reviews, want %d", s.name, n, s.wantCalls)
		}
	}
}

func TestAlwaysAllowWithoutReviewer(t *testing.T) {
	srv := authServer(t, AuthConfig{Anonymous: true})
	for _, m := range []string{"GET", "POST", "DELETE"} {
		if code, body := doAuth(t, srv, call{method: m, path: "/pods"}); code != 200 {
			t.Fatalf("%s: status %d (%q), want 200 (AlwaysAllow)", m, code, body)
		}
	}
}

func TestTTLCacheIsBounded(t *testing.T) {
	clk := clocktesting.NewFakeClock(now)
	c := newTTLCache[int](clk)
	for i := range maxAuthCacheEntries + 10 {
		c.put(strings.Repeat("k", 1)+string(rune(i+1000)), i, time.Duration(i+1)*time.Second)
	}
	if n := len(c.m); n > maxAuthCacheEntries {
		t.Fatalf("cache holds %d entries, bound %d", n, maxAuthCacheEntries)
	}
	if _, ok := c.get("k" + string(rune(maxAuthCacheEntries+9+1000))); !ok {
		t.Fatal("newest entry evicted")
	}
}

// The safe default (issue 9, failure 7): under AlwaysAllow an anonymous
// request that writes or executes from another machine gets 403 saying why
// and how to open it; from loopback, or with credentials, or with the
// opening flag, it goes through as before; reads go through from anywhere.
func TestAnonymousRemoteWrites(t *testing.T) {
	const remote, local = "192.0.2.7:40000", "127.0.0.1:40000"
	tokens := &fakeTokens{users: map[string]authenticationv1.UserInfo{"good-token": {Username: "alice"}}}
	allowAll := &fakeAccess{allow: func(authorizationv1.SubjectAccessReviewSpec) bool { return true }}
	tests := []struct {
		name         string
		cfg          AuthConfig
		method, path string
		remote       string
		header       map[string]string
		wantCode     int
		wantBody     string // substring
	}{
		// Refused: every write or execute path, from another machine.
		{name: "push", method: "POST", path: "/pods", wantCode: 403,
			wantBody: "Forbidden (user=system:anonymous, verb=create, resource=nodes, subresource(s)=[pods proxy]): anonymous requests may write or execute"},
		{name: "remove pushed pod", method: "DELETE", path: "/pods/default/web", wantCode: 403, wantBody: "not from 192.0.2.7"},
		{name: "exec GET (websocket)", method: "GET", path: "/exec/default/web/c?command=id", wantCode: 403,
			wantBody: "--insecure-anonymous-remote-writes"},
		{name: "exec POST (spdy)", method: "POST", path: "/exec/default/web/c?command=id", wantCode: 403},
		{name: "attach", method: "GET", path: "/attach/default/web/c", wantCode: 403},
		{name: "port-forward", method: "GET", path: "/portForward/default/web", wantCode: 403},
		{name: "run", method: "POST", path: "/run/default/web/c", wantCode: 403},
		{name: "debug actors", method: "GET", path: "/debug/actors", wantCode: 403},
		{name: "debug pprof", method: "GET", path: "/debug/pprof/goroutine", wantCode: 403},
		{name: "debug without slash", method: "GET", path: "/debug", wantCode: 403},
		{name: "checkpoint", method: "POST", path: "/checkpoint/default/web/c", wantCode: 403},
		{name: "dot segments", method: "GET", path: "/pods/../exec/default/web/c", wantCode: 403},
		{name: "double slash", method: "GET", path: "//exec/default/web/c", wantCode: 403},
		{name: "upgrade anywhere", method: "GET", path: "/pods", header: map[string]string{"Upgrade": "websocket"}, wantCode: 403},
		{name: "put", method: "PUT", path: "/pods", wantCode: 403},
		{name: "remote IPv6", method: "POST", path: "/pods", remote: "[2001:db8::1]:5000", wantCode: 403, wantBody: "not from 2001:db8::1"},
		{name: "unparsable peer", method: "POST", path: "/pods", remote: "somewhere", wantCode: 403},
		// Reads from anywhere.
		{name: "list pods", method: "GET", path: "/pods", wantCode: 200},
		{name: "container logs", method: "GET", path: "/containerLogs/default/web/c", wantCode: 200},
		{name: "metrics", method: "HEAD", path: "/metrics", wantCode: 200},
		{name: "healthz", method: "GET", path: "/healthz", wantCode: 200},
		// Allowed: loopback peers.
		{name: "push from 127.0.0.1", method: "POST", path: "/pods", remote: local, wantCode: 200},
		{name: "exec from ::1", method: "GET", path: "/exec/default/web/c", remote: "[::1]:40000", wantCode: 200},
		{name: "push from mapped loopback", method: "POST", path: "/pods", remote: "[::ffff:127.0.0.2]:1", wantCode: 200},
		// Allowed: credentials, the opening flag, Webhook authorization.
		{name: "token from another machine", cfg: AuthConfig{Tokens: tokens, TokenCacheTTL: time.Minute}, method: "POST", path: "/pods",
			header: map[string]string{"Authorization": "Bearer good-token"}, wantCode: 200},
		{name: "opened by flag", cfg: AuthConfig{AnonymousRemoteWrites: true}, method: "GET", path: "/exec/default/web/c", wantCode: 200},
		{name: "webhook decides", cfg: AuthConfig{Access: allowAll, AuthorizedTTL: time.Minute}, method: "POST", path: "/pods", wantCode: 200},
		// Anonymous off: 401 as before.
		{name: "anonymous off", cfg: AuthConfig{Anonymous: false}, method: "POST", path: "/pods", wantCode: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.NodeName = "n1"
			cfg.Anonymous = tt.name != "anonymous off"
			cfg.Logger = slog.New(slog.DiscardHandler)
			cfg.Clock = clocktesting.NewFakeClock(now)
			a, err := NewAuth(cfg)
			if err != nil {
				t.Fatal(err)
			}
			reached := false
			h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached = true
				_, _ = io.WriteString(w, "ok")
			}))
			r := httptest.NewRequest(tt.method, "http://n1"+tt.path, nil)
			r.RemoteAddr = remote
			if tt.remote != "" {
				r.RemoteAddr = tt.remote
			}
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != tt.wantCode || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Fatalf("%s %s from %s: %d %q, want %d with %q", tt.method, tt.path, r.RemoteAddr, rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody)
			}
			if reached != (tt.wantCode == 200) {
				t.Fatalf("handler reached: %v with status %d", reached, rec.Code)
			}
		})
	}
}

// The same through the real node API handler: a push or removal from
// another machine without credentials never reaches the push source, one
// from loopback does.
func TestAnonymousRemotePushNeverReachesPushSource(t *testing.T) {
	e := setup(t, nil)
	a, err := NewAuth(AuthConfig{NodeName: "n1", Anonymous: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Wrap(e.srv.Main())
	send := func(method, path, body, peer string) (int, string) {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		r := httptest.NewRequest(method, path, rd)
		r.RemoteAddr = peer
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code, rec.Body.String()
	}
	if code, body := send("POST", "/pods", podJSON, "198.51.100.9:1234"); code != http.StatusForbidden {
		t.Fatalf("remote push: %d %q, want 403", code, body)
	}
	if code, body := send("DELETE", "/pods/web/nginx", "", "198.51.100.9:1234"); code != http.StatusForbidden {
		t.Fatalf("remote removal: %d %q, want 403", code, body)
	}
	e.stubs.mu.Lock()
	n := len(e.stubs.received)
	e.stubs.mu.Unlock()
	if n != 0 {
		t.Fatalf("the push source got %d messages from refused requests", n)
	}
	if code, body := send("POST", "/pods", podJSON, "127.0.0.1:1234"); code != http.StatusCreated {
		t.Fatalf("loopback push: %d %q, want 201", code, body)
	}
	if code, body := send("DELETE", "/pods/web/nginx", "", "127.0.0.1:1234"); code != http.StatusOK {
		t.Fatalf("loopback removal: %d %q, want 200", code, body)
	}
}
