package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/actorlet/actorlet/adapters/httpapi"
	"github.com/actorlet/actorlet/adapters/kube"
)

// The node's certificates from the cluster, as upstream's kubelet gets
// them:
//
//   - --bootstrap-kubeconfig: when --kubeconfig is missing or its client
//     certificate has expired, a CSR made with the bootstrap token gets the
//     client certificate (<cert-dir>/kubelet-client-current.pem) and
//     --kubeconfig is written to use it. actorlet waits for it before it
//     goes on (upstream does too without rotation; with rotation upstream
//     starts first and waits in the background).
//   - --rotate-certificates: the client certificate is renewed at 70-90 %
//     of its life; the API clients use the new one at once.
//   - --rotate-server-certificates: the node API serves a certificate from
//     a kubernetes.io/kubelet-serving CSR, renewed likewise. Until an admin
//     approves the first one (kubectl certificate approve), TLS handshakes
//     on --port fail, as upstream (--tls-cert-file, if given, is served
//     meanwhile).

// nodeClient is cluster mode's API client with the node's credentials:
// TLS bootstrapping first when --bootstrap-kubeconfig is set, then a
// client whose certificate rotates with --rotate-certificates.
func nodeClient(ctx context.Context, o *options, nodeName string, log *slog.Logger) (*kube.Client, error) {
	kopts := kube.Options{Kubeconfig: o.Kubeconfig, QPS: o.KubeAPIQPS, Burst: int(o.KubeAPIBurst),
		EventQPS: eventClientQPS(o.EventQPS), EventBurst: int(o.EventBurst),
		UserAgent: "actorlet/" + kubeletVersion + " (" + nodeName + ")"}
	if o.BootstrapKubeconfig != "" {
		_, err := kube.LoadClientCert(ctx, kube.Bootstrap{
			Kubeconfig: o.Kubeconfig, BootstrapKubeconfig: o.BootstrapKubeconfig, CertDir: o.certDir(),
			NodeName: nodeName, Log: log.With("component", "tls-bootstrap"),
		})
		if err != nil {
			return nil, fmt.Errorf("TLS bootstrap with --bootstrap-kubeconfig %s: %w", o.BootstrapKubeconfig, err)
		}
	}
	if o.RotateCertificates {
		return kube.NewRotating(ctx, nodeName, kopts, kube.Rotation{
			CertDir: o.certDir(), BootstrapKubeconfig: o.BootstrapKubeconfig, Log: log.With("component", "client-certificate"),
		})
	}
	return kube.New(nodeName, kopts)
}

// servingTLS is the node API's TLS with its serving certificate from the
// cluster (--rotate-server-certificates), for the node's names and IPs.
// The certificate manager runs as long as the process, as upstream's.
func servingTLS(o *options, nodeName string, hosts []string, ips []net.IP, kc *kube.Client, log *slog.Logger) (*tls.Config, error) {
	if kc == nil {
		return nil, errors.New("--rotate-server-certificates needs --kubeconfig")
	}
	certs, err := kc.ServingCertificates(context.Background(), kube.ServingOptions{
		NodeName: nodeName, CertDir: o.certDir(), CertFile: o.TLSCertFile, KeyFile: o.TLSPrivateKeyFile,
		Hostnames: hosts, IPs: ips, Log: log.With("component", "serving-certificate"),
	})
	if err != nil {
		return nil, err
	}
	certs.Start()
	return httpapi.TLSConfigFunc(certs.Current), nil
}
