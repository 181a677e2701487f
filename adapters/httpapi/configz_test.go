package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func testKubeletConfig() *kubeletconfig.KubeletConfiguration {
	return &kubeletconfig.KubeletConfiguration{
		TypeMeta:      metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"},
		StaticPodPath: "/etc/kubernetes/manifests",
		MaxPods:       42,
		ClusterDNS:    []string{"10.96.0.10"},
		HealthzPort:   ptr.To[int32](10248),
	}
}

// GET /configz on the main port answers upstream's shape:
// {"kubeletconfig": <a v1beta1 KubeletConfiguration>}; the read-only port
// does not serve it.
func TestConfigzShape(t *testing.T) {
	h, err := NewConfigz(testKubeletConfig())
	if err != nil {
		t.Fatal(err)
	}
	e := setup(t, func(c *Config) { c.Configz = h })
	tests := []struct {
		name     string
		handler  http.Handler
		method   string
		wantCode int
	}{
		{name: "main port", handler: e.srv.Main(), method: http.MethodGet, wantCode: http.StatusOK},
		{name: "read-only port", handler: e.srv.ReadOnly(), method: http.MethodGet, wantCode: http.StatusNotFound},
		{name: "not a write", handler: e.srv.Main(), method: http.MethodPost, wantCode: http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, hdr := do(t, tt.handler, tt.method, "/configz", "")
			if code != tt.wantCode {
				t.Fatalf("%s /configz: %d, want %d\n%s", tt.method, code, tt.wantCode, body)
			}
			if code != http.StatusOK {
				return
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var raw map[string]json.RawMessage
			if err := json.Unmarshal([]byte(body), &raw); err != nil {
				t.Fatalf("%v\n%s", err, body)
			}
			if len(raw) != 1 || raw["kubeletconfig"] == nil {
				t.Fatalf("top-level keys of %s, want only kubeletconfig", body)
			}
			var got kubeletconfig.KubeletConfiguration
			if err := json.Unmarshal(raw["kubeletconfig"], &got); err != nil {
				t.Fatal(err)
			}
			if got.Kind != "KubeletConfiguration" || got.APIVersion != "kubelet.config.k8s.io/v1beta1" ||
				got.StaticPodPath != "/etc/kubernetes/manifests" || got.MaxPods != 42 ||
				len(got.ClusterDNS) != 1 || got.ClusterDNS[0] != "10.96.0.10" || ptr.Deref(got.HealthzPort, 0) != 10248 {
				t.Fatalf("kubeletconfig %+v", got)
			}
		})
	}
}

// Without a Configz handler the path is not served.
func TestConfigzOffWithoutHandler(t *testing.T) {
	e := setup(t, nil)
	if code, _, _ := do(t, e.srv.Main(), http.MethodGet, "/configz", ""); code != http.StatusNotFound {
		t.Fatalf("GET /configz without a handler: %d, want 404", code)
	}
	if _, err := NewConfigz(nil); err == nil {
		t.Fatal("NewConfigz(nil): no error")
	}
}

// With Webhook authorization, /configz is reviewed as upstream: nodes/configz
// first, then nodes/proxy.
func TestConfigzAuthorizationSubresource(t *testing.T) {
	h, err := NewConfigz(testKubeletConfig())
	if err != nil {
		t.Fatal(err)
	}
	e := setup(t, func(c *Config) { c.Configz = h })
	tests := []struct {
		name     string
		allow    string // the subresource the reviewer allows
		wantCode int
		wantSubs []string
	}{
		{name: "configz allowed", allow: "configz", wantCode: http.StatusOK, wantSubs: []string{"configz"}},
		{name: "proxy allowed", allow: "proxy", wantCode: http.StatusOK, wantSubs: []string{"configz", "proxy"}},
		{name: "denied", allow: "pods", wantCode: http.StatusForbidden, wantSubs: []string{"configz", "proxy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fa := &fakeAccess{allow: func(s authorizationv1.SubjectAccessReviewSpec) bool {
				return s.ResourceAttributes.Subresource == tt.allow
			}}
			a, err := NewAuth(AuthConfig{NodeName: "n1", Anonymous: true, Access: fa, AuthorizedTTL: time.Minute,
				Logger: slog.New(slog.DiscardHandler), Clock: clocktesting.NewFakeClock(now)})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			a.Wrap(e.srv.Main()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/configz", nil))
			if rec.Code != tt.wantCode {
				t.Fatalf("GET /configz: %d %q, want %d", rec.Code, rec.Body.String(), tt.wantCode)
			}
			var subs []string
			for _, r := range fa.reviews() {
				subs = append(subs, r.ResourceAttributes.Subresource)
				if r.ResourceAttributes.Verb != "get" || r.ResourceAttributes.Resource != "nodes" || r.ResourceAttributes.Name != "n1" {
					t.Errorf("review %+v", r.ResourceAttributes)
				}
			}
			if !slices.Equal(subs, tt.wantSubs) {
				t.Fatalf("reviewed %v, want %v", subs, tt.wantSubs)
			}
		})
	}
}
