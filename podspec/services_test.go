package podspec

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func svc(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func TestServiceEnv(t *testing.T) {
	master := svc("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP})
	masterEnv := map[string]string{
		"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", "KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"KUBERNETES_PORT": "tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP_PROTO": "tcp", "KUBERNETES_PORT_443_TCP_PORT": "443", "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
	}
	with := func(base map[string]string, more map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range more {
			out[k] = v
		}
		return out
	}
	abc := svc("x", "abc-123", "5.6.7.8", v1.ServicePort{Name: "u-d-p", Port: 8081, Protocol: v1.ProtocolUDP}, v1.ServicePort{Name: "t-c-p", Port: 8081})
	abcEnv := map[string]string{
		"ABC_123_SERVICE_HOST": "5.6.7.8", "ABC_123_SERVICE_PORT": "8081",
		"ABC_123_SERVICE_PORT_U_D_P": "8081", "ABC_123_SERVICE_PORT_T_C_P": "8081",
		"ABC_123_PORT":          "udp://5.6.7.8:8081",
		"ABC_123_PORT_8081_UDP": "udp://5.6.7.8:8081", "ABC_123_PORT_8081_UDP_PROTO": "udp", "ABC_123_PORT_8081_UDP_PORT": "8081", "ABC_123_PORT_8081_UDP_ADDR": "5.6.7.8",
		"ABC_123_PORT_8081_TCP": "tcp://5.6.7.8:8081", "ABC_123_PORT_8081_TCP_PROTO": "tcp", "ABC_123_PORT_8081_TCP_PORT": "8081", "ABC_123_PORT_8081_TCP_ADDR": "5.6.7.8",
	}
	v6 := svc("x", "super-ipv6", "2001:DB8::", v1.ServicePort{Port: 8084, Protocol: v1.ProtocolSCTP})
	v6Env := map[string]string{
		"SUPER_IPV6_SERVICE_HOST": "2001:DB8::", "SUPER_IPV6_SERVICE_PORT": "8084", "SUPER_IPV6_PORT": "sctp://[2001:DB8::]:8084",
		"SUPER_IPV6_PORT_8084_SCTP": "sctp://[2001:DB8::]:8084", "SUPER_IPV6_PORT_8084_SCTP_PROTO": "sctp",
		"SUPER_IPV6_PORT_8084_SCTP_PORT": "8084", "SUPER_IPV6_PORT_8084_SCTP_ADDR": "2001:DB8::",
	}
	tests := []struct {
		name     string
		services []*v1.Service
		ns       string
		links    bool
		want     map[string]string
	}{
		{name: "no services (standalone)", ns: "x", links: true, want: map[string]string{}},
		{name: "the master service without links", services: []*v1.Service{master, abc}, ns: "x", want: masterEnv},
		{name: "links: the namespace's services", services: []*v1.Service{master, abc, v6}, ns: "x", links: true, want: with(with(masterEnv, abcEnv), v6Env)},
		{name: "another namespace's services are not seen", services: []*v1.Service{master, abc}, ns: "y", links: true, want: masterEnv},
		{name: "headless and IP-less services are skipped", ns: "x", links: true,
			services: []*v1.Service{svc("x", "none", v1.ClusterIPNone, v1.ServicePort{Port: 1}), svc("x", "empty", "", v1.ServicePort{Port: 1})}, want: map[string]string{}},
		{name: "only the master service of the default namespace", ns: "x", links: false,
			services: []*v1.Service{svc("default", "other", "10.0.0.9", v1.ServicePort{Port: 80})}, want: map[string]string{}},
		{name: "a namespace's own kubernetes service wins with links", ns: "x", links: true,
			services: []*v1.Service{svc("x", "kubernetes", "10.0.0.2", v1.ServicePort{Port: 80}), master},
			want: map[string]string{
				"KUBERNETES_SERVICE_HOST": "10.0.0.2", "KUBERNETES_SERVICE_PORT": "80", "KUBERNETES_PORT": "tcp://10.0.0.2:80",
				"KUBERNETES_PORT_80_TCP": "tcp://10.0.0.2:80", "KUBERNETES_PORT_80_TCP_PROTO": "tcp", "KUBERNETES_PORT_80_TCP_PORT": "80", "KUBERNETES_PORT_80_TCP_ADDR": "10.0.0.2",
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ServiceEnv(tc.services, tc.ns, tc.links); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}
