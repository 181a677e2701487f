package testenv

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"
)

func TestDNSServer(t *testing.T) {
	s := StartDNSServer(t, "127.0.0.1:0", map[string]string{"myservice.default.svc.cluster.local": "10.96.0.42"})
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", s.Addr.String())
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tests := []struct {
		name     string
		host     string
		want     []string
		notFound bool
	}{
		{name: "a known name", host: "myservice.default.svc.cluster.local.", want: []string{"10.96.0.42"}},
		{name: "case does not matter", host: "MyService.Default.svc.cluster.local.", want: []string{"10.96.0.42"}},
		{name: "an unknown name", host: "other.default.svc.cluster.local.", notFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.LookupHost(ctx, tt.host)
			if tt.notFound {
				var de *net.DNSError
				if !errors.As(err, &de) || !de.IsNotFound {
					t.Fatalf("got %v, %v; want not found", got, err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if asked := s.Asked(); !slices.Contains(asked, "A myservice.default.svc.cluster.local.") {
		t.Errorf("asked %q", asked)
	}
}

func TestDNSServerRefusesBadRecords(t *testing.T) {
	if _, err := NewDNSServer("127.0.0.1:0", map[string]string{"x.example": "not-an-ip"}); err == nil {
		t.Fatal("a record that is not an IPv4 address was accepted")
	}
}
