package podspec

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ResolvePort returns a numbered port, or the containerPort of a named one.
func ResolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal <= 0 || p.IntVal > 65535 {
			return 0, fmt.Errorf("invalid port %d", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil && n > 0 && n <= 65535 {
		return n, nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("couldn't find port %q in container %s", p.StrVal, c.Name)
}

// HTTPTarget builds the URL and headers of an httpGet action (probe or
// hook): scheme (default HTTP), host (default podIP), named or numbered
// port, path and headers; a Host header sets the request's host.
func HTTPTarget(g *v1.HTTPGetAction, c *v1.Container, podIP string) (*url.URL, http.Header, error) {
	port, err := ResolvePort(g.Port, c)
	if err != nil {
		return nil, nil, err
	}
	host := g.Host
	if host == "" {
		host = podIP
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if path != "" && !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u, err := url.Parse(scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + path)
	if err != nil {
		return nil, nil, fmt.Errorf("probe url: %w", err)
	}
	header := http.Header{}
	for _, h := range g.HTTPHeaders {
		header.Add(h.Name, h.Value)
	}
	return u, header, nil
}
