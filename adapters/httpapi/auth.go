package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/utils/clock"
)

// The upstream kubelet's defaults for its authentication and authorization
// webhooks (KubeletConfiguration authentication.webhook.cacheTTL,
// authorization.webhook.cacheAuthorizedTTL and cacheUnauthorizedTTL).
const (
	DefaultTokenCacheTTL        = 2 * time.Minute
	DefaultAuthorizedCacheTTL   = 5 * time.Minute
	DefaultUnauthorizedCacheTTL = 30 * time.Second
	maxAuthCacheEntries         = 4096
)

// Well-known users and groups, as the API server names them.
const (
	UserAnonymous        = "system:anonymous"
	GroupUnauthenticated = "system:unauthenticated"
	GroupAuthenticated   = "system:authenticated"
)

// TokenReviewer checks a bearer token with the TokenReview API.
// adapters/kube's Client satisfies it.
type TokenReviewer interface {
	ReviewToken(ctx context.Context, token string) (*authenticationv1.TokenReviewStatus, error)
}

// AccessReviewer asks the SubjectAccessReview API whether a user may do
// something. adapters/kube's Client satisfies it.
type AccessReviewer interface {
	ReviewAccess(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (*authorizationv1.SubjectAccessReviewStatus, error)
}

// AuthConfig is the node API's authentication and authorization, with the
// upstream kubelet's semantics (--anonymous-auth, --client-ca-file,
// --authentication-token-webhook, --authorization-mode).
type AuthConfig struct {
	// NodeName is the name in the authorization attributes. Required.
	NodeName string
	// Anonymous lets requests without credentials through as
	// system:anonymous (group system:unauthenticated); else they get 401.
	Anonymous bool
	// ClientCAs verifies client certificates: user = CN, groups = O.
	// Nil: client certificates are not looked at.
	ClientCAs *x509.CertPool
	// Tokens checks bearer tokens; nil: bearer tokens are not accepted.
	Tokens TokenReviewer
	// TokenCacheTTL keeps a token's review, positive or negative (the
	// flag's default is DefaultTokenCacheTTL); 0 asks every time.
	TokenCacheTTL time.Duration
	// Access authorizes with SubjectAccessReviews (--authorization-mode
	// Webhook); nil is AlwaysAllow.
	Access AccessReviewer
	// AnonymousRemoteWrites lets anonymous requests write and execute
	// (WritesOrExecutes) from any peer under AlwaysAllow. False, the safe
	// default: only from loopback peers; from elsewhere they get 403 (see
	// anonymous.go). Authenticated users and Webhook authorization are not
	// affected.
	AnonymousRemoteWrites bool
	// AuthorizedTTL and UnauthorizedTTL keep an access review's answer
	// (the flags' defaults are 5m and 30s); 0 asks every time.
	AuthorizedTTL   time.Duration
	UnauthorizedTTL time.Duration
	// Clock for the caches; default the real clock.
	Clock clock.PassiveClock
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Auth authenticates and authorizes requests to the node API.
type Auth struct {
	cfg    AuthConfig
	log    *slog.Logger
	tokens *ttlCache[tokenResult]
	access *ttlCache[accessResult]
}

// User is an authenticated identity.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Attributes are what a request asks to do, as the upstream kubelet names
// it: verb from the HTTP method, resource nodes, the node's name and a
// subresource from the path.
type Attributes struct {
	Verb        string
	Subresource string
	Name        string
	Path        string
}

type tokenResult struct {
	user User
	ok   bool
}

type accessResult struct {
	allowed bool
	reason  string
}

// NewAuth checks cfg and fills in defaults.
func NewAuth(cfg AuthConfig) (*Auth, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("httpapi auth: missing NodeName")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Auth{
		cfg:    cfg,
		log:    cfg.Logger,
		tokens: newTTLCache[tokenResult](cfg.Clock),
		access: newTTLCache[accessResult](cfg.Clock),
	}, nil
}

type userKey struct{}

// UserFrom returns the user a request was authenticated as by Wrap.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
}

// Wrap authenticates every request (401 "Unauthorized" when it cannot),
// then authorizes it (403 naming the user and attributes when denied, 500
// when the authorizer fails), as the upstream kubelet's auth filter does.
// Under AlwaysAllow an anonymous request that writes or executes from a
// peer other than loopback gets 403 saying why, unless
// AnonymousRemoteWrites (anonymous.go).
func (a *Auth) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok, err := a.Authenticate(r)
		if err != nil {
			a.log.Info("unauthorized request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
			httpError(w, http.StatusUnauthorized, "Unauthorized")
			return
		}
		if !ok {
			httpError(w, http.StatusUnauthorized, "Unauthorized")
			return
		}
		attrs := RequestAttributes(a.cfg.NodeName, r)
		subs := make([]string, len(attrs))
		for i, at := range attrs {
			subs[i] = at.Subresource
		}
		if why := a.refuseAnonymousRemote(u, r); why != "" {
			a.log.Info("refused an anonymous request from another machine", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			httpError(w, http.StatusForbidden, "Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=[%s]): %s",
				u.Name, attrs[0].Verb, strings.Join(subs, " "), why)
			return
		}
		allowed, err := a.Authorize(r.Context(), u, attrs)
		if err != nil {
			a.log.Error("authorization error", "user", u.Name, "verb", attrs[0].Verb, "subresource", subs, "err", err)
			httpError(w, http.StatusInternalServerError, "Authorization error (user=%s, verb=%s, resource=nodes, subresource=%s)",
				u.Name, attrs[0].Verb, attrs[0].Subresource)
			return
		}
		if !allowed {
			a.log.Debug("forbidden", "user", u.Name, "verb", attrs[0].Verb, "subresource", subs, "path", r.URL.Path)
			httpError(w, http.StatusForbidden, "Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=[%s])",
				u.Name, attrs[0].Verb, strings.Join(subs, " "))
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

// Authenticate finds who sent r: a client certificate verified against
// ClientCAs, else a bearer token checked by Tokens, else (with Anonymous)
// system:anonymous. Credentials that are present but wrong are an error,
// never a fall back to anonymous (as upstream).
func (a *Auth) Authenticate(r *http.Request) (User, bool, error) {
	if u, ok, err := a.authenticateCert(r); err != nil || ok {
		return u, ok, err
	}
	if u, ok, err := a.authenticateToken(r); err != nil || ok {
		return u, ok, err
	}
	if a.cfg.Anonymous {
		return User{Name: UserAnonymous, Groups: []string{GroupUnauthenticated}}, true, nil
	}
	return User{}, false, nil
}

func (a *Auth) authenticateCert(r *http.Request) (User, bool, error) {
	if a.cfg.ClientCAs == nil || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return User{}, false, nil
	}
	leaf := r.TLS.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots: a.cfg.ClientCAs, Intermediates: inter,
		CurrentTime: a.cfg.Clock.Now(),
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return User{}, false, fmt.Errorf("client certificate %q: %w", leaf.Subject.CommonName, err)
	}
	if leaf.Subject.CommonName == "" {
		return User{}, false, errors.New("client certificate has no common name")
	}
	return authenticated(User{Name: leaf.Subject.CommonName, Groups: slices.Clone(leaf.Subject.Organization)}), true, nil
}

func (a *Auth) authenticateToken(r *http.Request) (User, bool, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return User{}, false, nil
	}
	scheme, token, found := strings.Cut(strings.TrimSpace(h), " ")
	if !found || !strings.EqualFold(scheme, "bearer") {
		return User{}, false, nil // not ours (e.g. basic): as upstream, ignored
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return User{}, false, errors.New("empty bearer token")
	}
	if a.cfg.Tokens == nil {
		return User{}, false, errors.New("bearer tokens are not accepted (--authentication-token-webhook is off)")
	}
	key := sha256.Sum256([]byte(token))
	if res, ok := a.tokens.get(string(key[:])); ok {
		if !res.ok {
			return User{}, false, errors.New("invalid bearer token (cached)")
		}
		return res.user, true, nil
	}
	st, err := a.cfg.Tokens.ReviewToken(r.Context(), token)
	if err != nil {
		return User{}, false, fmt.Errorf("token review: %w", err) // errors are not cached
	}
	res := tokenResult{}
	if st != nil && st.Authenticated && st.User.Username != "" {
		res = tokenResult{ok: true, user: authenticated(userFromReview(st.User))}
	}
	a.tokens.put(string(key[:]), res, a.cfg.TokenCacheTTL)
	if !res.ok {
		reason := "not authenticated"
		if st != nil && st.Error != "" {
			reason = st.Error
		}
		return User{}, false, fmt.Errorf("invalid bearer token: %s", reason)
	}
	return res.user, true, nil
}

func userFromReview(u authenticationv1.UserInfo) User {
	out := User{Name: u.Username, UID: u.UID, Groups: slices.Clone(u.Groups)}
	if len(u.Extra) > 0 {
		out.Extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			out.Extra[k] = slices.Clone([]string(v))
		}
	}
	return out
}

// authenticated adds system:authenticated, as the API server's
// authenticator does for every authenticated (non-anonymous) user.
func authenticated(u User) User {
	if !slices.Contains(u.Groups, GroupAuthenticated) {
		u.Groups = append(u.Groups, GroupAuthenticated)
	}
	return u
}

// Authorize allows when any of attrs is allowed (in order, as upstream
// tries the fine-grained subresource before proxy). Without an
// AccessReviewer everything is allowed (AlwaysAllow).
func (a *Auth) Authorize(ctx context.Context, u User, attrs []Attributes) (bool, error) {
	if a.cfg.Access == nil {
		return true, nil
	}
	for _, at := range attrs {
		spec := subjectAccessReview(u, at)
		key := accessKey(spec)
		res, ok := a.access.get(key)
		if !ok {
			st, err := a.cfg.Access.ReviewAccess(ctx, spec)
			if err != nil {
				return false, fmt.Errorf("subject access review: %w", err) // errors are not cached
			}
			res = accessResult{}
			if st != nil {
				res = accessResult{allowed: st.Allowed && !st.Denied, reason: st.Reason}
			}
			ttl := a.cfg.UnauthorizedTTL
			if res.allowed {
				ttl = a.cfg.AuthorizedTTL
			}
			a.access.put(key, res, ttl)
		}
		if res.allowed {
			return true, nil
		}
	}
	return false, nil
}

func subjectAccessReview(u User, at Attributes) authorizationv1.SubjectAccessReviewSpec {
	spec := authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: at.Verb, Version: "v1", Resource: "nodes", Subresource: at.Subresource, Name: at.Name,
		},
		User: u.Name, UID: u.UID, Groups: slices.Clone(u.Groups),
	}
	if len(u.Extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			spec.Extra[k] = slices.Clone(v)
		}
	}
	return spec
}

// accessKey identifies a review: the user (name, uid, groups, extra) and
// the attributes.
func accessKey(s authorizationv1.SubjectAccessReviewSpec) string {
	var b strings.Builder
	ra := s.ResourceAttributes
	fmt.Fprintf(&b, "%q|%q|%q|%q|%q|", ra.Verb, ra.Resource, ra.Subresource, ra.Name, ra.Version)
	fmt.Fprintf(&b, "%q|%q|%q|", s.User, s.UID, s.Groups)
	keys := make([]string, 0, len(s.Extra))
	for k := range s.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%q=%q;", k, []string(s.Extra[k]))
	}
	return b.String()
}

// The node API's paths that get their own subresource, as upstream.
const (
	statsPath      = "/stats/"
	metricsPath    = "/metrics"
	logsPath       = "/logs/"
	checkpointPath = "/checkpoint/"
	podsPath       = "/pods"
	runningPods    = "/runningpods/"
	healthzPath    = "/healthz"
	configzPath    = "/configz"
)

// RequestAttributes are the authorization attributes of r on node, in the
// order they are tried, as the upstream kubelet builds them (with
// KubeletFineGrainedAuthz, on by default): GET→get, POST→create,
// PUT→update, PATCH→patch, DELETE→delete; resource nodes, name node;
// subresource stats, metrics, log (/logs/), checkpoint; pods then proxy for
// /pods and /runningpods/, healthz then proxy for /healthz, configz then
// proxy for /configz; proxy for everything else (/containerLogs, /exec,
// /debug, ...).
func RequestAttributes(node string, r *http.Request) []Attributes {
	var verb string
	switch r.Method {
	case http.MethodPost:
		verb = "create"
	case http.MethodGet:
		verb = "get"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	p := r.URL.Path
	var subs []string
	switch {
	case isSubpath(p, statsPath):
		subs = []string{"stats"}
	case isSubpath(p, metricsPath):
		subs = []string{"metrics"}
	case isSubpath(p, logsPath):
		subs = []string{"log"}
	case isSubpath(p, checkpointPath):
		subs = []string{"checkpoint"}
	case isSubpath(p, podsPath), isSubpath(p, runningPods):
		subs = []string{"pods", "proxy"}
	case isSubpath(p, healthzPath):
		subs = []string{"healthz", "proxy"}
	case isSubpath(p, configzPath):
		subs = []string{"configz", "proxy"}
	default:
		subs = []string{"proxy"}
	}
	out := make([]Attributes, len(subs))
	for i, s := range subs {
		out[i] = Attributes{Verb: verb, Subresource: s, Name: node, Path: p}
	}
	return out
}

// isSubpath: p is prefix itself or below it.
func isSubpath(p, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	return p == prefix || (strings.HasPrefix(p, prefix) && len(p) > len(prefix) && p[len(prefix)] == '/')
}

// ttlCache is a small expiring map; it never grows beyond
// maxAuthCacheEntries (expired entries go first, then the oldest).
type ttlCache[V any] struct {
	mu  sync.Mutex
	clk clock.PassiveClock
	m   map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v       V
	expires time.Time
}

func newTTLCache[V any](clk clock.PassiveClock) *ttlCache[V] {
	return &ttlCache[V]{clk: clk, m: map[string]ttlEntry[V]{}}
}

func (c *ttlCache[V]) get(k string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !c.clk.Now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[V]) put(k string, v V, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clk.Now()
	if len(c.m) >= maxAuthCacheEntries {
		var oldestK string
		var oldest time.Time
		for key, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, key)
				continue
			}
			if oldestK == "" || e.expires.Before(oldest) {
				oldestK, oldest = key, e.expires
			}
		}
		if len(c.m) >= maxAuthCacheEntries {
			delete(c.m, oldestK)
		}
	}
	c.m[k] = ttlEntry[V]{v: v, expires: now.Add(ttl)}
}
