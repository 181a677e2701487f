package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/actorlet/actorlet/adapters/httpapi"
	"github.com/actorlet/actorlet/adapters/kube"
)

// writeNodeKubeconfig writes a kubeconfig with a client certificate valid
// for a year.
func writeNodeKubeconfig(t *testing.T, path string) {
	t.Helper()
	certPEM, keyPEM, err := httpapi.SelfSignedCert([]string{"system:node:n1"}, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: "https://127.0.0.1:1", CertificateAuthorityData: certPEM}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": {ClientCertificateData: certPEM, ClientKeyData: keyPEM}},
		Contexts:       map[string]*clientcmdapi.Context{"x": {Cluster: "c", AuthInfo: "u"}},
		CurrentContext: "x",
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		t.Fatal(err)
	}
}

func TestNodeClient(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name    string
		prepare func(t *testing.T, o *options)
		wantErr []string // empty: a client
	}{
		{name: "no bootstrap: the kubeconfig as it is",
			prepare: func(t *testing.T, o *options) { writeNodeKubeconfig(t, o.Kubeconfig) }},
		{name: "valid kubeconfig: no bootstrap (the bootstrap kubeconfig is not even read)",
			prepare: func(t *testing.T, o *options) {
				writeNodeKubeconfig(t, o.Kubeconfig)
				o.BootstrapKubeconfig = filepath.Join(t.TempDir(), "missing-bootstrap.conf")
			}},
		{name: "no kubeconfig and a missing bootstrap kubeconfig",
			prepare: func(t *testing.T, o *options) {
				o.BootstrapKubeconfig = filepath.Join(t.TempDir(), "missing-bootstrap.conf")
			},
			wantErr: []string{"TLS bootstrap with --bootstrap-kubeconfig", "missing-bootstrap.conf", "no such file"}},
		{name: "rotation from the kubeconfig's certificate",
			prepare: func(t *testing.T, o *options) {
				writeNodeKubeconfig(t, o.Kubeconfig)
				o.RotateCertificates = true
			}},
		{name: "rotation without a kubeconfig",
			prepare: func(t *testing.T, o *options) { o.RotateCertificates = true },
			wantErr: []string{"kubelet.conf"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			o := defaultOptions()
			o.RootDir, o.Kubeconfig = dir, filepath.Join(dir, "kubelet.conf")
			tt.prepare(t, o)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			kc, err := nodeClient(ctx, o, "n1", log)
			if len(tt.wantErr) == 0 {
				if err != nil || kc == nil {
					t.Fatalf("client %v, %v", kc, err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// With --rotate-server-certificates the node API makes no self-signed
// certificate: its TLS asks for the certificate from the cluster at each
// handshake.
func TestNodeAPISecurityServingCertFromTheCluster(t *testing.T) {
	o := defaultOptions()
	o.RootDir, o.Kubeconfig, o.ServerTLSBootstrap = t.TempDir(), "/unused", true
	kc := kube.NewForClientset(fake.NewClientset(), "n1")
	secure, err := nodeAPISecurity(o, "n1", "127.0.0.1", kc, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if secure.tls == nil || secure.tls.GetCertificate == nil || len(secure.tls.Certificates) != 0 {
		t.Fatalf("TLS config: GetCertificate %v, %d static certificates", secure.tls.GetCertificate != nil, len(secure.tls.Certificates))
	}
	if _, err := os.Stat(filepath.Join(o.certDir(), httpapi.SelfSignedCertName)); !os.IsNotExist(err) {
		t.Fatalf("a self-signed certificate was made: %v", err)
	}
	if _, err := servingTLS(o, "n1", nil, nil, nil, slog.Default()); err == nil {
		t.Fatal("serving certificates without an API client")
	}
}
