package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"path"
	"strings"
)

// The safe default of the node API (issue 9, README "Security defaults").
//
// The upstream kubelet's flag defaults are --anonymous-auth=true and
// --authorization-mode=AlwaysAllow, and so are actorlet's. Upstream that
// opens reads, exec and attach to anyone who reaches --port; actorlet also
// has a pod push endpoint, so the same defaults would let any machine run a
// privileged pod. So under AlwaysAllow a request that authenticated as
// nobody (system:anonymous) may read from anywhere, but may write or
// execute (WritesOrExecutes) only from a loopback peer, unless
// AuthConfig.AnonymousRemoteWrites opens it. Authenticated users (client
// certificates, bearer tokens) and Webhook authorization (the API server
// decides, anonymous included) are not affected.

// executePaths are the node API's paths that run something on the node or
// reveal its process internals, whatever the method: exec, attach and
// port-forward are GETs when they upgrade to a WebSocket. /run, /cri and
// /checkpoint are upstream paths actorlet does not serve (404); they are
// listed so that serving them later cannot open them by accident.
var executePaths = []string{"/exec", "/attach", "/portForward", "/run", "/cri", "/debug", "/checkpoint"}

// WritesOrExecutes tells whether r changes the node or runs something on
// it: any method but GET and HEAD (POST and DELETE /pods among them), a
// GET or HEAD under one of the execute paths (/exec/, /attach/,
// /portForward/, /run/, /cri/, /debug/, /checkpoint/, the path taken as
// sent and as cleaned), and any request asking for a protocol upgrade.
func WritesOrExecutes(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return true
	}
	if r.Header.Get("Upgrade") != "" {
		return true
	}
	if r.URL == nil {
		return true
	}
	raw := r.URL.Path
	clean := path.Clean("/" + raw)
	for _, p := range executePaths {
		if isSubpath(raw, p) || isSubpath(clean, p) {
			return true
		}
	}
	return false
}

// IsLoopbackPeer tells whether r came from this machine over loopback
// (127.0.0.0/8 or ::1, IPv4-mapped included). An unparsable RemoteAddr is
// not loopback.
func IsLoopbackPeer(r *http.Request) bool {
	ip, ok := peerIP(r.RemoteAddr)
	return ok && ip.Unmap().IsLoopback()
}

func peerIP(remote string) (netip.Addr, bool) {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return ip.WithZone(""), true
}

// refuseAnonymousRemote is why r is refused under the safe default, or ""
// when it may go on to authorization.
func (a *Auth) refuseAnonymousRemote(u User, r *http.Request) string {
	if a.cfg.AnonymousRemoteWrites || a.cfg.Access != nil || u.Name != UserAnonymous {
		return ""
	}
	if !WritesOrExecutes(r) || IsLoopbackPeer(r) {
		return ""
	}
	peer := r.RemoteAddr
	if ip, ok := peerIP(r.RemoteAddr); ok {
		peer = ip.String()
	}
	return "anonymous requests may write or execute (POST/PUT/DELETE /pods, exec, attach, portForward, run, debug) " +
		"only from this machine (loopback), not from " + peer +
		": authenticate with a client certificate (--client-ca-file) or a bearer token (--authentication-token-webhook), " +
		"or open it with --insecure-anonymous-remote-writes"
}
