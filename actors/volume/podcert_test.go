package volume

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// fakeCerts is a signer's API server: requests are kept by name; a test
// issues, denies or fails them.
type fakeCerts struct {
	mu      sync.Mutex
	n       int
	reqs    map[string]*certificatesv1.PodCertificateRequest
	asked   []podspec.PodCertificateRequest
	bundles map[string]string // by name
	signers map[string]string // by signer name
}

func newFakeCerts() *fakeCerts {
	return &fakeCerts{reqs: map[string]*certificatesv1.PodCertificateRequest{}, bundles: map[string]string{}, signers: map[string]string{}}
}

func (f *fakeCerts) CreatePodCertificateRequest(_ context.Context, r podspec.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.asked = append(f.asked, r)
	name := fmt.Sprintf("req-%d", f.n)
	pcr := &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: name}}
	f.reqs[name] = pcr
	return pcr, []byte("KEY-" + name + "\n"), nil
}

func (f *fakeCerts) PodCertificateRequest(_ context.Context, ns, name string) (*certificatesv1.PodCertificateRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.reqs[name]; ok {
		return r.DeepCopy(), nil
	}
	return nil, errdefs.Wrap(errdefs.ErrNotFound, errors.New("not found"))
}

func (f *fakeCerts) TrustAnchorsByName(_ context.Context, name string, allowMissing bool) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.bundles[name]; ok {
		return []byte(b), nil
	}
	if allowMissing {
		return []byte{}, nil
	}
	return nil, errdefs.Wrap(errdefs.ErrNotFound, errors.New("ClusterTrustBundle "+name+" not found"))
}

func (f *fakeCerts) TrustAnchorsBySigner(_ context.Context, signer string, _ *metav1.LabelSelector, allowMissing bool) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.signers[signer]; ok {
		return []byte(b), nil
	}
	if allowMissing {
		return []byte{}, nil
	}
	return nil, errdefs.Wrap(errdefs.ErrNotFound, errors.New("no bundle of "+signer))
}

// issue gives request name a chain (with text between and headers in its
// blocks, which the node drops) valid from now to now+life, to be renewed
// at now+refresh.
func (f *fakeCerts) issue(name string, now time.Time, refresh, life time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.reqs[name]
	r.Status.CertificateChain = "junk before\n" + string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"h": "v"}, Bytes: []byte("leaf-" + name)})) +
		"between\n" + string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("intermediate")}))
	r.Status.BeginRefreshAt = &metav1.Time{Time: now.Add(refresh)}
	r.Status.NotBefore = &metav1.Time{Time: now}
	r.Status.NotAfter = &metav1.Time{Time: now.Add(life)}
	r.Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue, Reason: "Issued"}}
}

func (f *fakeCerts) condition(name, typ, reason, msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs[name].Status.Conditions = []metav1.Condition{{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: msg}}
}

func (f *fakeCerts) created() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// wantChain is the chain issue writes, as the node projects it.
func wantChain(name string) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("leaf-" + name)})) +
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("intermediate")}))
}

type recorded struct{ typ, reason, msg string }

type fakeRecorder struct {
	mu     sync.Mutex
	events []recorded
}

func (r *fakeRecorder) Eventf(_ runtime.Object, typ, reason, format string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, recorded{typ, reason, fmt.Sprintf(format, args...)})
}

func (r *fakeRecorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.events...)
}

func certProjection() *v1.PodCertificateProjection {
	return &v1.PodCertificateProjection{SignerName: "example.com/test", KeyType: "ECDSAP256",
		CredentialBundlePath: "credentialbundle.pem", KeyPath: "tls.key", CertificateChainPath: "tls.crt",
		UserAnnotations: map[string]string{"example.com/team": "a"}}
}

func certVolume(pc *v1.PodCertificateProjection) v1.Volume {
	return v1.Volume{Name: "certs", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{{PodCertificate: pc}}}}}
}

func noJitter(t *testing.T) {
	old := refreshJitter
	refreshJitter = func() time.Duration { return 0 }
	t.Cleanup(func() { refreshJitter = old })
}

func TestPodCertificateIssueAndRefresh(t *testing.T) {
	noJitter(t)
	certs, rec := newFakeCerts(), &fakeRecorder{}
	pod := testPod(certVolume(certProjection()))
	pod.Spec.ServiceAccountName = "sa1"
	pc := certProjection()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var st certState

	// First: a request, and the pod waits for its signer.
	_, _, _, err := podCertificate(context.Background(), certs, rec, pod, pc, &st, now)
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), `waiting for signer "example.com/test" to issue PodCertificateRequest ns1/req-1`) {
		t.Fatalf("before issue: %v", err)
	}
	if got := certs.asked[0]; got.ServiceAccount != "sa1" || got.PodUID != "uid-1" || got.KeyType != "ECDSAP256" || got.UserAnnotations["example.com/team"] != "a" {
		t.Fatalf("request %+v", got)
	}
	// Asked again while pending: no second request.
	if _, _, _, err = podCertificate(context.Background(), certs, rec, pod, pc, &st, now.Add(time.Second)); err == nil || certs.created() != 1 {
		t.Fatalf("pending: err %v, %d requests", err, certs.created())
	}

	// Issued: key and chain, the next look at beginRefreshAt.
	certs.issue("req-1", now, 30*time.Minute, time.Hour)
	now = now.Add(2 * time.Second)
	key, chain, again, err := podCertificate(context.Background(), certs, rec, pod, pc, &st, now)
	if err != nil {
		t.Fatal(err)
	}
	if string(key) != "KEY-req-1\n" || string(chain) != wantChain("req-1") {
		t.Fatalf("key %q chain %q", key, chain)
	}
	if want := 30*time.Minute - 2*time.Second; again != want {
		t.Fatalf("next look in %v, want %v (beginRefreshAt - now)", again, want)
	}

	// At beginRefreshAt: a new request, the old credentials stay meanwhile.
	now = now.Add(again)
	key, chain, again, err = podCertificate(context.Background(), certs, rec, pod, pc, &st, now)
	if err != nil || string(key) != "KEY-req-1\n" || string(chain) != wantChain("req-1") || certs.created() != 2 || again != pendingRecheck {
		t.Fatalf("renewal: err %v key %q chain %q, %d requests, again %v", err, key, chain, certs.created(), again)
	}
	certs.issue("req-2", now, 40*time.Minute, time.Hour)
	key, chain, again, err = podCertificate(context.Background(), certs, rec, pod, pc, &st, now)
	if err != nil || string(key) != "KEY-req-2\n" || string(chain) != wantChain("req-2") || again != 40*time.Minute {
		t.Fatalf("renewed: err %v key %q chain %q again %v", err, key, chain, again)
	}
	if ev := rec.all(); len(ev) != 0 {
		t.Fatalf("events %v, want none", ev)
	}

	// A renewal never issued: overdue 10 minutes after beginRefreshAt,
	// expired after notAfter, each said once; the old credentials stay.
	now = now.Add(40 * time.Minute)
	if _, _, _, err = podCertificate(context.Background(), certs, rec, pod, pc, &st, now); err != nil {
		t.Fatal(err)
	}
	for _, step := range []time.Duration{11 * time.Minute, 10 * time.Minute, time.Minute} {
		now = now.Add(step)
		if key, _, _, err = podCertificate(context.Background(), certs, rec, pod, pc, &st, now); err != nil || string(key) != "KEY-req-2\n" {
			t.Fatalf("late: key %q err %v", key, err)
		}
	}
	got := rec.all()
	if len(got) != 2 || got[0].reason != "CertificateOverdueForRefresh" || got[1].reason != "CertificateExpired" || got[1].typ != v1.EventTypeWarning {
		t.Fatalf("events %v", got)
	}
}

func TestPodCertificateDeniedAndFailed(t *testing.T) {
	for _, typ := range []string{certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed} {
		t.Run(typ, func(t *testing.T) {
			certs, rec := newFakeCerts(), &fakeRecorder{}
			pod, pc, now := testPod(), certProjection(), time.Now()
			var st certState
			_, _, _, _ = podCertificate(context.Background(), certs, rec, pod, pc, &st, now)
			certs.condition("req-1", typ, "UnsupportedKeyType", "try ED25519")
			for range 2 { // permanent: no new request, one event
				_, _, _, err := podCertificate(context.Background(), certs, rec, pod, pc, &st, now)
				if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), `PodCertificateRequest ns1/req-1`) ||
					!strings.Contains(err.Error(), `reason="UnsupportedKeyType", message="try ED25519"`) {
					t.Fatalf("err %v", err)
				}
			}
			if certs.created() != 1 {
				t.Fatalf("%d requests after a %s, want 1", certs.created(), typ)
			}
			if ev := rec.all(); len(ev) != 1 || ev[0].reason != typ || ev[0].typ != v1.EventTypeWarning {
				t.Fatalf("events %v", ev)
			}
		})
	}
}

func TestPodCertificateAbandonsAVanishedRequest(t *testing.T) {
	certs := newFakeCerts()
	pod, pc, now := testPod(), certProjection(), time.Now()
	var st certState
	_, _, _, _ = podCertificate(context.Background(), certs, nil, pod, pc, &st, now)
	certs.mu.Lock()
	delete(certs.reqs, "req-1")
	certs.mu.Unlock()
	// Not seen for less than 10 minutes: the watch may lag; wait.
	_, _, _, _ = podCertificate(context.Background(), certs, nil, pod, pc, &st, now.Add(9*time.Minute))
	if certs.created() != 1 {
		t.Fatalf("%d requests within 10 minutes, want 1", certs.created())
	}
	_, _, _, err := podCertificate(context.Background(), certs, nil, pod, pc, &st, now.Add(11*time.Minute))
	if certs.created() != 2 || !strings.Contains(fmt.Sprint(err), "req-2") {
		t.Fatalf("%d requests after 11 minutes (err %v), want a new one", certs.created(), err)
	}
}

func TestPodCertificateBadInput(t *testing.T) {
	tests := []struct {
		name string
		edit func(*v1.PodCertificateProjection)
		pod  func(*v1.Pod)
		want string
	}{
		{name: "unknown key type", edit: func(p *v1.PodCertificateProjection) { p.KeyType = "DSA1024" }, want: `unknown keyType "DSA1024"`},
		{name: "too short", edit: func(p *v1.PodCertificateProjection) { p.MaxExpirationSeconds = ptr(int32(600)) }, want: "maxExpirationSeconds 600 is less than 3600"},
		{name: "too long", edit: func(p *v1.PodCertificateProjection) { p.MaxExpirationSeconds = ptr(int32(maxCertExpiration + 1)) }, want: "more than 7862400"},
		{name: "kubernetes.io signer over a day", edit: func(p *v1.PodCertificateProjection) {
			p.SignerName, p.MaxExpirationSeconds = "kubernetes.io/kube-apiserver-client-pod", ptr(int32(2*86400))
		}, want: "more than 86400"},
		{name: "no signer", edit: func(p *v1.PodCertificateProjection) { p.SignerName = "" }, want: "signerName is required"},
		{name: "no path", edit: func(p *v1.PodCertificateProjection) {
			p.CredentialBundlePath, p.KeyPath, p.CertificateChainPath = "", "", ""
		}, want: "none of credentialBundlePath"},
		{name: "static pod", pod: func(p *v1.Pod) { p.Annotations = map[string]string{"kubernetes.io/config.source": "file"} }, want: "static pod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc, pod, certs := certProjection(), testPod(), newFakeCerts()
			if tt.edit != nil {
				tt.edit(pc)
			}
			if tt.pod != nil {
				tt.pod(pod)
			}
			var st certState
			_, _, _, err := podCertificate(context.Background(), certs, nil, pod, pc, &st, time.Now())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
			if certs.created() != 0 {
				t.Fatalf("a request was made for bad input")
			}
		})
	}
	var st certState
	if _, _, _, err := podCertificate(context.Background(), nil, nil, testPod(), certProjection(), &st, time.Now()); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("without the API: %v", err)
	}
}

// TestPodCertificateVolume runs the VolumeActor: the pod's setup fails
// until the signer issues, a change of the request sets it up at once, and
// the files are laid out as upstream's (bundle = key then chain, 0644, or
// 0600 with an fsGroup).
func TestPodCertificateVolume(t *testing.T) {
	noJitter(t)
	certs, rec := newFakeCerts(), &fakeRecorder{}
	h := newHarnessWith(t, true, Config{Certs: certs, Recorder: rec})
	pod := testPod(certVolume(certProjection()))
	r := h.ensure(t, pod)
	if r.Reason != "FailedMount" || !strings.Contains(r.Message, "waiting for signer") {
		t.Fatalf("before issue: %+v", r)
	}
	certs.issue("req-1", h.clk.Now(), 30*time.Minute, time.Hour)
	h.sys.Root.Send(h.pid, &messages.CredentialsChanged{UID: pod.UID})
	var dir string
	actortest.Eventually(t, "the volume set up once issued", func() bool {
		r = h.ensure(t, pod)
		dir = r.Paths["certs"]
		return r.Reason == "" && dir != ""
	})
	for name, want := range map[string]string{"credentialbundle.pem": "KEY-req-1\n" + wantChain("req-1"), "tls.key": "KEY-req-1\n", "tls.crt": wantChain("req-1")} {
		got := look(t, filepath.Join(dir, name))
		if got.content != want || got.mode != "-rw-r--r--" {
			t.Errorf("%s: %q %s, want %q -rw-r--r--", name, got.content, got.mode, want)
		}
	}
	if certs.created() != 1 {
		t.Fatalf("%d requests", certs.created())
	}
	// At beginRefreshAt a renewal; issued, it reaches the files.
	h.clk.Step(30 * time.Minute)
	actortest.Eventually(t, "a renewal asked", func() bool { return certs.created() == 2 })
	certs.issue("req-2", h.clk.Now(), 30*time.Minute, time.Hour)
	h.sys.Root.Send(h.pid, &messages.CredentialsChanged{UID: pod.UID})
	actortest.Eventually(t, "the renewed credentials written", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "credentialbundle.pem"))
		return string(b) == "KEY-req-2\n"+wantChain("req-2")
	})
}

// TestClusterTrustBundleVolume: by name and by signer, optional ones empty,
// a change rewrites the file.
func TestClusterTrustBundleVolume(t *testing.T) {
	certs := newFakeCerts()
	certs.bundles["b1"] = "PEM-1"
	certs.signers["example.com/s"] = "PEM-S"
	h := newHarnessWith(t, true, Config{Certs: certs})
	yes := true
	pod := testPod(v1.Volume{Name: "trust", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr("b1"), Path: "by-name.pem"}},
		{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{SignerName: ptr("example.com/s"), Path: "by-signer.pem",
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}},
		{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr("nope"), Optional: &yes, Path: "optional.pem"}},
	}}}})
	r := h.ensure(t, pod)
	if r.Reason != "" {
		t.Fatal(r.Message)
	}
	dir := r.Paths["trust"]
	for name, want := range map[string]string{"by-name.pem": "PEM-1", "by-signer.pem": "PEM-S", "optional.pem": ""} {
		if got := look(t, filepath.Join(dir, name)); got.content != want {
			t.Errorf("%s = %q, want %q", name, got.content, want)
		}
	}
	certs.mu.Lock()
	certs.bundles["b1"] = "PEM-2"
	certs.mu.Unlock()
	h.sys.Root.Send(h.pid, &messages.CredentialsChanged{TrustBundles: true})
	actortest.Eventually(t, "the changed bundle written", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "by-name.pem"))
		return string(b) == "PEM-2"
	})
	// A bundle that is required and missing fails the setup clearly.
	missing := testPod(v1.Volume{Name: "trust", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr("nope"), Path: "x.pem"}}}}}})
	missing.UID = "uid-2"
	if r := h.ensure(t, missing); r.Reason != "FailedMount" || !strings.Contains(r.Message, "ClusterTrustBundle nope not found") {
		t.Fatalf("missing bundle: %+v", r)
	}
}

// selfSigned is a CA for cleanChain's round trip.
func selfSigned(t *testing.T) []byte {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestCleanChainKeepsCertificatesOnly(t *testing.T) {
	der := selfSigned(t)
	in := "comment\n" + string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"x": "y"}, Bytes: der})) + "trailer"
	out := cleanChain([]byte(in))
	b, rest := pem.Decode(out)
	if b == nil || len(b.Headers) != 0 || len(rest) != 0 {
		t.Fatalf("cleaned %q", out)
	}
	if _, err := x509.ParseCertificate(b.Bytes); err != nil {
		t.Fatal(err)
	}
}
