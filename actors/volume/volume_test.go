package volume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/adapters/volume"
	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

var quiet = slog.New(slog.DiscardHandler)

type fakeAPI struct {
	mu     sync.Mutex
	clk    *clocktesting.FakeClock
	tokens int
	cmGets int
	cms    map[string]*v1.ConfigMap
	secret map[string]*v1.Secret
}

var _ API = (*fakeAPI)(nil)

func (f *fakeAPI) CreateToken(_ context.Context, ns, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens++
	exp := metav1.NewTime(f.clk.Now().Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second))
	return &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{
		Token: ns + "/" + sa + "/" + string(rune('0'+f.tokens)), ExpirationTimestamp: exp}}, nil
}

func (f *fakeAPI) ConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmGets++
	if cm, ok := f.cms[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, errdefs.Wrap(errdefs.ErrNotFound, errors.New("configmap not found"))
}

func (f *fakeAPI) Secret(_ context.Context, ns, name string) (*v1.Secret, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.secret[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, errdefs.Wrap(errdefs.ErrNotFound, errors.New("secret not found"))
}

func (f *fakeAPI) tokenCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokens
}

// kubeAPIAccess is the volume the API server's admission adds to every pod.
func kubeAPIAccess() v1.Volume {
	exp := int64(3607)
	return v1.Volume{Name: "kube-api-access-x", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &exp}},
		{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"},
			Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
			{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
	}}}}
}

type harness struct {
	sys     *actor.ActorSystem
	pid     *actor.PID
	replies chan *messages.VolumesReady
	sink    *actor.PID
	dir     string
	clk     *clocktesting.FakeClock
	api     *fakeAPI
}

func newHarness(t *testing.T, withAPI bool) *harness {
	t.Helper()
	return newHarnessWith(t, withAPI, Config{})
}

// newHarnessWith starts a VolumeActor with cfg (PodsDir: a fresh
// directory) writing through the real files adapter.
func newHarnessWith(t *testing.T, withAPI bool, cfg Config) *harness {
	t.Helper()
	h := &harness{sys: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet })),
		replies: make(chan *messages.VolumesReady, 16), dir: t.TempDir(),
		clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	h.api = &fakeAPI{clk: h.clk, cms: map[string]*v1.ConfigMap{"ns1/kube-root-ca.crt": {Data: map[string]string{"ca.crt": "CA"}}}}
	var api API
	if withAPI {
		api = h.api
	}
	cfg.PodsDir = h.dir
	files := volume.New(quiet)
	// Before the temporary directory is removed (cleanups run last
	// first): what a test left mounted there (running as root, secret,
	// projected and downwardAPI volumes are tmpfs mounts) is unmounted.
	t.Cleanup(func() {
		entries, _ := os.ReadDir(h.dir)
		for _, e := range entries {
			if err := files.RemoveAll(filepath.Join(h.dir, e.Name(), "volumes")); err != nil {
				t.Errorf("clean up: %v", err)
			}
		}
	})
	h.pid = h.sys.Root.Spawn(actor.PropsFromProducer(New(files, api, cfg, h.clk, quiet)))
	h.sink = h.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.VolumesReady); ok {
			h.replies <- m
		}
	}))
	t.Cleanup(func() { h.sys.Root.Stop(h.pid) })
	return h
}

func (h *harness) ensure(t *testing.T, pod *v1.Pod) *messages.VolumesReady {
	t.Helper()
	h.sys.Root.Send(h.pid, &messages.EnsureVolumes{Pod: pod, ReplyTo: h.sink})
	select {
	case r := <-h.replies:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no VolumesReady")
		return nil
	}
}

func testPod(vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns1", UID: "uid-1"}, Spec: v1.PodSpec{Volumes: vols}}
}

func TestProjectedKubeAPIAccessVolume(t *testing.T) {
	h := newHarness(t, true)
	r := h.ensure(t, testPod(kubeAPIAccess(), v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}))
	if r.Reason != "" {
		t.Fatalf("setup failed: %s", r.Message)
	}
	dir := r.Paths["kube-api-access-x"]
	for name, want := range map[string]string{"token": "ns1/default/1", "ca.crt": "CA", "namespace": "ns1"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q (%v), want %q", name, b, err, want)
		}
	}
	if st, err := os.Stat(r.Paths["scratch"]); err != nil || !st.IsDir() {
		t.Errorf("emptyDir %s: %v", r.Paths["scratch"], err)
	}
	// A second ask answers from what is set up: no new token.
	h.ensure(t, testPod(kubeAPIAccess()))
	if n := h.api.tokenCount(); n != 1 {
		t.Fatalf("%d token requests, want 1", n)
	}
	// The ConfigMap is read again every minute; the token is not asked for
	// again before 80 % of its life.
	h.clk.Step(61 * time.Second)
	// Read again, and the refresh handled: its next timer is armed.
	actortest.Eventually(t, "the ConfigMap read again and the next refresh armed", func() bool {
		h.api.mu.Lock()
		gets := h.api.cmGets
		h.api.mu.Unlock()
		return gets >= 2 && h.clk.HasWaiters()
	})
	if n := h.api.tokenCount(); n != 1 {
		t.Fatalf("%d token requests after a ConfigMap resync, want 1", n)
	}
	// At 80 % of the token's life it is refreshed and rewritten.
	h.clk.Step(3607*time.Second*8/10 - 61*time.Second)
	actortest.EventuallyDetail(t, "the token refreshed", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "token"))
		return string(b) == "ns1/default/2"
	}, func() string { b, _ := os.ReadFile(filepath.Join(dir, "token")); return "token " + string(b) })
	// Tear down removes the pod's volume directories.
	h.sys.Root.Send(h.pid, &messages.TearDownVolumes{UID: "uid-1"})
	actortest.Eventually(t, "the volumes removed", func() bool {
		if _, err := os.Stat(filepath.Join(h.dir, "uid-1")); err != nil {
			return false
		}
		_, err := os.Stat(filepath.Join(h.dir, "uid-1", "volumes"))
		return os.IsNotExist(err)
	})
}

func TestVolumeErrorsAreClear(t *testing.T) {
	tests := []struct {
		name    string
		withAPI bool
		vol     v1.Volume
		want    string
	}{
		{name: "unsupported type", withAPI: true, vol: v1.Volume{Name: "nfs", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "x", Path: "/"}}}, want: "not supported"},
		{name: "token without API", vol: kubeAPIAccess(), want: "cluster mode"},
		{name: "resourceFieldRef of a container the pod lacks", vol: v1.Volume{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
			Items: []v1.DownwardAPIVolumeFile{{Path: "cpu", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "nope", Resource: "limits.cpu"}}}}}},
			want: `no container "nope"`},
		{name: "hugepages emptyDir", vol: v1.Volume{Name: "huge", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumHugePages}}},
			want: "not supported"},
		{name: "missing configmap", withAPI: true, vol: v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}}}}, want: "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.withAPI)
			r := h.ensure(t, testPod(tt.vol))
			if r.Reason != "FailedMount" || !contains(r.Message, tt.want) || !contains(r.Message, tt.vol.Name) {
				t.Fatalf("reply %+v, want FailedMount naming %q and %q", r, tt.vol.Name, tt.want)
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// A pod's labels change after its volumes are set up: a Refresh rewrites
// its downward API file, as the upstream "should update labels on
// modification" specs check from inside the container.
func TestRefreshRewritesDownwardAPIFiles(t *testing.T) {
	h := newHarness(t, false)
	labels := v1.Volume{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		Items: []v1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}}
	pod := testPod(labels)
	pod.Labels = map[string]string{"key1": "value1"}
	r := h.ensure(t, pod)
	if r.Reason != "" {
		t.Fatalf("setup failed: %s: %s", r.Reason, r.Message)
	}
	file := filepath.Join(r.Paths["podinfo"], "labels")
	read := func() string {
		b, err := os.ReadFile(file)
		if err != nil {
			return "error: " + err.Error()
		}
		return string(b)
	}
	if got := read(); got != `key1="value1"` {
		t.Fatalf("labels file = %q", got)
	}
	updated := pod.DeepCopy()
	updated.Labels = map[string]string{"key1": "value2", "key3": "value3"}
	h.sys.Root.Send(h.pid, &messages.EnsureVolumes{Pod: updated, Refresh: true})
	actortest.Eventually(t, "labels file rewritten", func() bool {
		return read() == "key1=\"value2\"\nkey3=\"value3\""
	})
}

// gatedFiles is a Files whose WriteAtomic waits for the test: it records
// the writes and removals in their order.
type gatedFiles struct {
	started chan string   // a write began (its dir)
	release chan struct{} // closed: writes go on
	mu      sync.Mutex
	events  []string
}

var _ Files = (*gatedFiles)(nil)

func (g *gatedFiles) record(e string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.events = append(g.events, e)
}

func (g *gatedFiles) seen() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.events...)
}

func (g *gatedFiles) HostPath(string, v1.HostPathType) error     { return nil }
func (g *gatedFiles) EmptyDir(string, bool, int64, *int64) error { return nil }
func (g *gatedFiles) RemoveAll(dir string) error                 { g.record("remove " + dir); return nil }
func (g *gatedFiles) WriteAtomic(dir string, _ map[string]podspec.VolumeFile, _ *int64, memory bool, _ int64) error {
	g.started <- dir
	<-g.release
	g.record(fmt.Sprintf("write %s memory=%v", dir, memory))
	return nil
}

// A pod torn down while its volumes are being set up: the teardown waits
// for that setup, so that nothing is written (or mounted) into what the
// teardown removed; the pod's waiter gets no answer (the pod is gone).
func TestTearDownWaitsForTheSetupInFlight(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	files := &gatedFiles{started: make(chan string, 1), release: make(chan struct{})}
	pods := t.TempDir()
	pid := sys.Root.Spawn(actor.PropsFromProducer(New(files, nil, Config{PodsDir: pods}, clk, quiet)))
	t.Cleanup(func() { sys.Root.Stop(pid) })
	replies := make(chan *messages.VolumesReady, 4)
	sink := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.VolumesReady); ok {
			replies <- m
		}
	}))
	pod := testPod(v1.Volume{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		Items: []v1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}})
	sys.Root.Send(pid, &messages.EnsureVolumes{Pod: pod, ReplyTo: sink})
	var dir string
	select {
	case dir = <-files.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no setup began")
	}
	sys.Root.Send(pid, &messages.TearDownVolumes{UID: pod.UID})
	// A pod without volumes asked after the teardown: its answer says
	// the teardown was handled.
	other := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns1", UID: "uid-2"}}
	sys.Root.Send(pid, &messages.EnsureVolumes{Pod: other, ReplyTo: sink})
	select {
	case r := <-replies:
		if r.UID != other.UID {
			t.Fatalf("answer for %s while its setup is held", r.UID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer for the pod without volumes")
	}
	if got := files.seen(); len(got) != 0 {
		t.Fatalf("before the setup in flight returned: %q, want nothing removed", got)
	}
	close(files.release)
	volumes := filepath.Join(pods, string(pod.UID), "volumes")
	want := []string{"write " + dir + " memory=true", "remove " + volumes}
	actortest.EventuallyDetail(t, "the setup, then the teardown", func() bool {
		return slices.Equal(files.seen(), want)
	}, func() string { return fmt.Sprintf("%q, want %q", files.seen(), want) })
	select {
	case r := <-replies:
		t.Errorf("the pod gone was answered: %+v", r)
	default:
	}
}
