package httpapi

import (
	"net/http"
	"strings"
)

// methodRule names the methods one read-only path accepts. Kubernetes
// v1.37 made the kubelet's read-only endpoints answer 405 Method Not
// Allowed, with an Allow header, to every method but GET
// (pkg/kubelet/server GETOnlyRestfulFilter on /pods, /containerLogs,
// /runningpods, /logs and /debug/pprof): a HEAD is refused there too.
// actorlet applies the same rule to its read-only paths, before the mux
// routes the request, so that the answer does not depend on the pattern
// syntax (Go's mux would let a HEAD through a GET route and answer
// "Allow: GET, HEAD"). /healthz and /metrics keep HEAD, which upstream
// serves there (no method filter on those handlers).
type methodRule struct {
	path   string
	prefix bool // path is a prefix (ends in "/")
	allow  []string
}

var (
	getOnly    = []string{http.MethodGet}
	getAndHead = []string{http.MethodGet, http.MethodHead}
)

// allowMethods answers 405 with an Allow header to a request whose path
// matches a rule and whose method the rule does not allow; other requests
// go to h unchanged.
func allowMethods(h http.Handler, rules []methodRule) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, rule := range rules {
			if !rule.matches(r.URL.Path) {
				continue
			}
			for _, m := range rule.allow {
				if r.Method == m {
					h.ServeHTTP(w, r)
					return
				}
			}
			w.Header().Set("Allow", strings.Join(rule.allow, ", "))
			httpError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (m methodRule) matches(path string) bool {
	if m.prefix {
		return strings.HasPrefix(path, m.path)
	}
	return path == m.path
}

// readOnlyRules are the method rules of the paths readOnlyRoutes serves;
// podsAllow is what /pods accepts (GET, and POST on the main port where
// pods are pushed).
func (s *Server) readOnlyRules(podsAllow []string) []methodRule {
	rules := []methodRule{
		{path: "/healthz", allow: getAndHead},
		{path: "/pods", allow: podsAllow},
	}
	if s.cfg.Devices != nil {
		rules = append(rules, methodRule{path: "/devices", allow: getOnly})
	}
	if s.cfg.Metrics != nil {
		rules = append(rules, methodRule{path: "/metrics", allow: getAndHead})
	}
	if s.cfg.StatsSummary != nil {
		rules = append(rules,
			methodRule{path: "/stats/summary", allow: getOnly},
			methodRule{path: "/metrics/resource", allow: getAndHead})
	}
	return rules
}
