package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestHTTPTargetAndNamedPorts(t *testing.T) {
	c := &v1.Container{Name: "web", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	tests := []struct {
		name       string
		action     v1.HTTPGetAction
		want       string
		wantHeader string
		wantErr    bool
	}{
		{name: "named port, default host", action: v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}, want: "http://10.1.2.3:8080/healthz"},
		{name: "number, https, host", action: v1.HTTPGetAction{Host: "example.test", Port: intstr.FromInt32(443), Scheme: v1.URISchemeHTTPS}, want: "https://example.test:443"},
		{name: "path without slash", action: v1.HTTPGetAction{Path: "ready", Port: intstr.FromInt32(80)}, want: "http://10.1.2.3:80/ready"},
		{name: "headers", action: v1.HTTPGetAction{Port: intstr.FromInt32(80), HTTPHeaders: []v1.HTTPHeader{{Name: "X-Probe", Value: "1"}}},
			want: "http://10.1.2.3:80", wantHeader: "1"},
		{name: "unknown port name", action: v1.HTTPGetAction{Port: intstr.FromString("grpc")}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, header, err := HTTPTarget(&tt.action, c, "10.1.2.3")
			if tt.wantErr {
				if err == nil {
					t.Fatalf("want error, got %s", u)
				}
				return
			}
			if err != nil || u.String() != tt.want {
				t.Fatalf("got %v %v, want %s", u, err, tt.want)
			}
			if got := header.Get("X-Probe"); got != tt.wantHeader {
				t.Fatalf("header X-Probe %q, want %q", got, tt.wantHeader)
			}
		})
	}
}

func TestResolvePort(t *testing.T) {
	c := &v1.Container{Name: "web", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	tests := []struct {
		name    string
		port    intstr.IntOrString
		want    int
		wantErr bool
	}{
		{name: "number", port: intstr.FromInt32(80), want: 80},
		{name: "named", port: intstr.FromString("http"), want: 8080},
		{name: "number as string", port: intstr.FromString("9090"), want: 9090},
		{name: "zero", port: intstr.FromInt32(0), wantErr: true},
		{name: "too high", port: intstr.FromInt32(65536), wantErr: true},
		{name: "unknown name", port: intstr.FromString("grpc"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolvePort(tt.port, c)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("got %d, %v; want %d (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
