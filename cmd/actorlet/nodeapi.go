package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/actorlet/actorlet/adapters/httpapi"
	"github.com/actorlet/actorlet/adapters/kube"
)

// nodeAPI is how --port is secured: its TLS and its authentication and
// authorization filter.
type nodeAPI struct {
	tls  *tls.Config
	auth *httpapi.Auth
}

// nodeAPISecurity loads (or makes, or with --rotate-server-certificates
// requests from the cluster) the serving certificate and builds the
// auth filter from the flags, as the upstream kubelet does: x509 client
// certificates with --client-ca-file, bearer tokens through TokenReview
// with --authentication-token-webhook, anonymous requests with
// --anonymous-auth, and --authorization-mode AlwaysAllow or Webhook
// (SubjectAccessReview). kc is nil in standalone mode (the flags were
// checked: no webhook then).
func nodeAPISecurity(o *options, nodeName, nodeIP string, kc *kube.Client, log *slog.Logger) (nodeAPI, error) {
	var out nodeAPI
	if o.Port != 0 {
		hosts := []string{nodeName}
		if h, err := os.Hostname(); err == nil && strings.ToLower(h) != nodeName {
			hosts = append(hosts, strings.ToLower(h))
		}
		var ips []net.IP
		if ip := net.ParseIP(nodeIP); ip != nil {
			ips = append(ips, ip)
		}
		if ip := net.ParseIP(o.Address); ip != nil && !ip.IsUnspecified() && !ip.Equal(net.ParseIP(nodeIP)) {
			ips = append(ips, ip)
		}
		if o.ServerTLSBootstrap {
			// The serving certificate from the cluster (bootstrap.go).
			cfg, err := servingTLS(o, nodeName, hosts, ips, kc, log)
			if err != nil {
				return out, err
			}
			out.tls = cfg
		} else {
			cert, path, generated, err := httpapi.ServingCert{
				CertFile: o.TLSCertFile, KeyFile: o.TLSPrivateKeyFile, Dir: o.certDir(), Hosts: hosts, IPs: ips,
			}.Load()
			if err != nil {
				return out, err
			}
			if generated {
				log.Info("made a self-signed serving certificate for the node API", "cert", path, "hosts", hosts, "ips", ips)
			} else {
				log.Info("node API serving certificate", "cert", path)
			}
			out.tls = httpapi.TLSConfig(cert)
		}
	}
	cfg := httpapi.AuthConfig{
		NodeName:        nodeName,
		Anonymous:       o.AnonymousAuth,
		TokenCacheTTL:   o.AuthenticationTokenWebhookTTL,
		AuthorizedTTL:   o.AuthorizationWebhookAuthorized,
		UnauthorizedTTL: o.AuthorizationWebhookUnauthorized,
		Logger:          log.With("component", "node-api-auth"),
	}
	// The safe default (README "Security defaults"): anonymous writes and
	// exec only from loopback unless the flag opens them.
	cfg.AnonymousRemoteWrites = o.InsecureAnonymousRemoteWrites
	if o.ClientCAFile != "" {
		pool, err := httpapi.LoadClientCAs(o.ClientCAFile)
		if err != nil {
			return out, err
		}
		cfg.ClientCAs = pool
	}
	if o.AuthenticationTokenWebhook || o.AuthorizationMode == authzWebhook {
		if kc == nil {
			return out, fmt.Errorf("webhook authentication or authorization needs --kubeconfig")
		}
		rv, err := kc.Reviewer()
		if err != nil {
			return out, err
		}
		if o.AuthenticationTokenWebhook {
			cfg.Tokens = rv
		}
		if o.AuthorizationMode == authzWebhook {
			cfg.Access = rv
		}
	}
	auth, err := httpapi.NewAuth(cfg)
	if err != nil {
		return out, err
	}
	out.auth = auth
	log.Info("node API authentication", "anonymous", o.AnonymousAuth, "clientCA", o.ClientCAFile != "",
		"tokenWebhook", o.AuthenticationTokenWebhook, "authorization", o.AuthorizationMode)
	if lvl, msg, attrs, ok := o.nodeAPIExposure(); ok {
		log.Log(context.Background(), lvl, msg, attrs...)
	}
	return out, nil
}
