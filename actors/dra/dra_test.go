package dra_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/actors/dra"
	draadapter "github.com/actorlet/actorlet/adapters/dra"
	"github.com/actorlet/actorlet/adapters/host"
	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

// env is a ClaimsActor with the real registration watcher and checkpoint
// file in a short temp root dir (unix socket paths are short).
type env struct {
	t       *testing.T
	root    string
	sys     *actor.ActorSystem
	pid     *actor.PID
	claims  *fakeClaims
	store   host.FileStore
	replies chan any
	probe   *actor.PID
	stopW   func()
	timeout time.Duration
	wiper   *fakeWiper
	clk     clock.WithDelayedExecution
	log     *slog.Logger // nil: slog's default
}

func newEnv(t *testing.T) *env {
	t.Helper()
	root, err := os.MkdirTemp("", "dra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	e := &env{t: t, root: root, sys: actor.NewActorSystem(), claims: &fakeClaims{},
		store: host.FileStore{Path: filepath.Join(root, "dra_manager_state")}, replies: make(chan any, 100), timeout: 2 * time.Second, wiper: &fakeWiper{}, clk: clock.RealClock{}}
	e.probe = e.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.ClaimsPrepared, *messages.ClaimsHealth, *messages.ClaimsUnprepared:
			e.replies <- m
		}
	}))
	t.Cleanup(func() {
		if e.pid != nil {
			_ = e.sys.Root.StopFuture(e.pid).Wait() // closes the drivers' connections
		}
		e.sys.Shutdown()
	})
	return e
}

// start spawns the actor and its registration watcher (as the agent does
// at start).
func (e *env) start() {
	e.t.Helper()
	e.pid = e.sys.Root.Spawn(actor.PropsFromProducer(dra.New(dra.Config{
		Dialer: testDialer{timeout: e.timeout}, Claims: e.claims, Store: e.store, Clock: e.clk,
		HealthRetry: 50 * time.Millisecond, Wiper: e.wiper, WipeDelay: 300 * time.Millisecond, RetryBackoff: actorkit.Backoff{Base: 20 * time.Millisecond, Cap: 100 * time.Millisecond},
	}, e.log), actor.WithReceiverMiddleware(actortest.Barrier())))
	w := draadapter.NewWatcher(filepath.Join(e.root, draadapter.RegistryDir),
		func(m *messages.DRADriverRegistered) { e.sys.Root.Send(e.pid, m) },
		func(m *messages.DRADriverDeregistered) { e.sys.Root.Send(e.pid, m) }, nil)
	w.Rescan = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	e.stopW = func() { cancel(); <-done }
	e.t.Cleanup(e.stopW)
}

// restart stops the actor and the watcher and starts them anew (a
// restarted agent: drivers register again, the checkpoint is read).
func (e *env) restart() {
	e.t.Helper()
	e.stopW()
	if err := e.sys.Root.StopFuture(e.pid).Wait(); err != nil {
		e.t.Fatal(err)
	}
	e.start()
}

func (e *env) prepare(p *v1.Pod) *messages.ClaimsPrepared {
	e.t.Helper()
	e.sys.Root.Send(e.pid, &messages.PrepareClaims{Pod: p, ReplyTo: e.probe})
	for {
		select {
		case m := <-e.replies:
			if r, ok := m.(*messages.ClaimsPrepared); ok && r.UID == p.UID {
				return r
			}
		case <-time.After(20 * time.Second):
			e.t.Fatalf("no ClaimsPrepared for %s", p.Name)
		}
	}
}

// unprepare sends UnprepareClaims and waits for ClaimsUnprepared.
func (e *env) unprepare(uid types.UID) {
	e.t.Helper()
	e.sys.Root.Send(e.pid, &messages.UnprepareClaims{UID: uid, ReplyTo: e.probe})
	for {
		select {
		case m := <-e.replies:
			if r, ok := m.(*messages.ClaimsUnprepared); ok && r.UID == uid {
				return
			}
		case <-time.After(20 * time.Second):
			e.t.Fatalf("no ClaimsUnprepared for %s", uid)
		}
	}
}

func (e *env) health() *messages.ClaimsHealth {
	e.t.Helper()
	for {
		select {
		case m := <-e.replies:
			if h, ok := m.(*messages.ClaimsHealth); ok {
				return h
			}
		case <-time.After(20 * time.Second):
			e.t.Fatal("no ClaimsHealth")
		}
	}
}

func (e *env) checkpointClaims() string {
	e.t.Helper()
	b, err := os.ReadFile(e.store.Path)
	if err != nil && !os.IsNotExist(err) {
		e.t.Fatal(err)
	}
	return string(b)
}

func wantOK(t *testing.T, r *messages.ClaimsPrepared) {
	t.Helper()
	if r.Reason != "" {
		t.Fatalf("prepare failed: %s: %s", r.Reason, r.Message)
	}
}

func wantFailure(t *testing.T, r *messages.ClaimsPrepared, substr string) {
	t.Helper()
	if r.Reason != messages.ReasonFailedPrepareDynamicResources || !strings.Contains(r.Message, substr) {
		t.Fatalf("answer %q %q, want %s with %q", r.Reason, r.Message, messages.ReasonFailedPrepareDynamicResources, substr)
	}
}

// registered starts a fake driver and waits until the kubelet side told
// it it is registered.
func (e *env) registered(name string) *fakeDriver {
	e.t.Helper()
	d := newFakeDriver(e.t, e.root, name)
	d.serve(e.t)
	if s := d.waitRegistered(e.t); !s.PluginRegistered {
		e.t.Fatalf("driver %s refused: %s", name, s.Error)
	}
	return d
}

func TestPrepareGivesCDIDevicesPerContainerAndUnprepares(t *testing.T) {
	e := newEnv(t)
	e.start()
	d := e.registered("gpu.example.com")
	p := podWith("p1", "gpu", "c1")
	e.claims.put(claim("c1", d.name, []string{"gpu", "nic"}, p))
	d.devices["c1"] = []*drapb.Device{
		{RequestNames: []string{"gpu"}, PoolName: "node1", DeviceName: "dev-c1-0", CdiDeviceIds: []string{"example.com/gpu=gpu0"}},
		{RequestNames: []string{"nic"}, PoolName: "node1", DeviceName: "dev-c1-1", CdiDeviceIds: []string{"example.com/nic=nic0"}},
	}
	r := e.prepare(p)
	wantOK(t, r)
	if got := r.Containers["app"]; !slices.Equal(got, []string{"example.com/gpu=gpu0"}) {
		t.Fatalf("app's CDI devices %v, want only the gpu request's", got)
	}
	if _, ok := r.Containers["sidecar"]; ok {
		t.Fatalf("sidecar uses no claim, got %v", r.Containers["sidecar"])
	}
	if !strings.Contains(e.checkpointClaims(), `"prepared":true`) {
		t.Fatalf("checkpoint after prepare: %s", e.checkpointClaims())
	}
	// Asked again (a restarted PodActor): the same answer, no new call.
	wantOK(t, e.prepare(p))
	if n, _ := d.calls(); n != 1 {
		t.Fatalf("NodePrepareResources called %d times, want 1", n)
	}
	e.sys.Root.Send(e.pid, &messages.UnprepareClaims{UID: p.UID})
	actortest.Eventually(t, "NodeUnprepareResources", func() bool { _, u := d.calls(); return u == 1 })
	actortest.Eventually(t, "checkpoint without the claim", func() bool { return !strings.Contains(e.checkpointClaims(), "uid-c1") })
}

func TestPrepareWholeClaimAndExtendedResourceClaim(t *testing.T) {
	e := newEnv(t)
	e.start()
	d := e.registered("gpu.example.com")
	p := podWith("p1", "", "c1")
	p.Spec.Containers[1].Resources.Requests = v1.ResourceList{"example.com/gpu": resource.MustParse("1")}
	p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "p1-extended",
		RequestMappings: []v1.ContainerExtendedResourceRequest{{ContainerName: "sidecar", ResourceName: "example.com/gpu", RequestName: "container-1-request-0"}}}
	e.claims.put(claim("c1", d.name, []string{"a", "b"}, p))
	e.claims.put(claim("p1-extended", d.name, []string{"container-1-request-0"}, p))
	d.devices["c1"] = []*drapb.Device{
		{RequestNames: []string{"a"}, PoolName: "node1", DeviceName: "dev-c1-0", CdiDeviceIds: []string{"example.com/gpu=a"}},
		{RequestNames: []string{"b"}, PoolName: "node1", DeviceName: "dev-c1-1", CdiDeviceIds: []string{"example.com/gpu=b"}},
	}
	d.devices["p1-extended"] = []*drapb.Device{{RequestNames: []string{"container-1-request-0"}, PoolName: "node1", DeviceName: "x", CdiDeviceIds: []string{"example.com/gpu=x"}}}
	r := e.prepare(p)
	wantOK(t, r)
	if got := r.Containers["app"]; !slices.Equal(got, []string{"example.com/gpu=a", "example.com/gpu=b"}) {
		t.Fatalf("app (whole claim) got %v", got)
	}
	if got := r.Containers["sidecar"]; !slices.Equal(got, []string{"example.com/gpu=x"}) {
		t.Fatalf("sidecar (DRA-backed extended resource) got %v", got)
	}
}

func TestPrepareErrorsLeaveNothingPrepared(t *testing.T) {
	e := newEnv(t)
	e.timeout = 300 * time.Millisecond
	e.start()

	// A driver that is not registered: nothing recorded, nothing to undo.
	p := podWith("p1", "", "c1")
	e.claims.put(claim("c1", "absent.example.com", []string{"r"}, p))
	wantFailure(t, e.prepare(p), "DRA driver absent.example.com is not registered")
	if strings.Contains(e.checkpointClaims(), "uid-c1") {
		t.Fatalf("a claim of an unregistered driver was recorded: %s", e.checkpointClaims())
	}

	d := e.registered("gpu.example.com")
	// A claim not reserved for the pod.
	p2 := podWith("p2", "", "c2")
	e.claims.put(claim("c2", d.name, []string{"r"}))
	wantFailure(t, e.prepare(p2), "is not allowed to use ResourceClaim c2")
	// A claim not in the API server.
	p3 := podWith("p3", "", "missing")
	wantFailure(t, e.prepare(p3), "fetch ResourceClaim missing")
	// A template claim not created yet.
	p4 := podWith("p4", "", "c4")
	tmpl := "tmpl"
	p4.Spec.ResourceClaims[0] = v1.PodResourceClaim{Name: "c4", ResourceClaimTemplateName: &tmpl}
	wantFailure(t, e.prepare(p4), "ResourceClaim not created yet")
	if n, _ := d.calls(); n != 0 {
		t.Fatalf("the driver was called %d times for claims that cannot be used", n)
	}

	// An error answer, then a timeout: the pod waits; deleted while it
	// waits, what the driver may have done is undone.
	p5 := podWith("p5", "", "c5")
	e.claims.put(claim("c5", d.name, []string{"r"}, p5))
	d.mu.Lock()
	d.claimErr = "device busy"
	d.mu.Unlock()
	wantFailure(t, e.prepare(p5), "NodePrepareResources failed for ResourceClaim c5: device busy")
	d.mu.Lock()
	d.claimErr, d.block = "", make(chan struct{})
	d.mu.Unlock()
	wantFailure(t, e.prepare(p5), "DeadlineExceeded")
	e.sys.Root.Send(e.pid, &messages.UnprepareClaims{UID: p5.UID})
	actortest.Eventually(t, "unprepare of the claim whose prepare failed", func() bool { _, u := d.calls(); return u == 1 })
	actortest.Eventually(t, "checkpoint empty", func() bool { return !strings.Contains(e.checkpointClaims(), "uid-c5") })

	// The driver recovers: another pod's claim prepares.
	d.mu.Lock()
	close(d.block)
	d.block = nil
	d.mu.Unlock()
	p6 := podWith("p6", "", "c6")
	e.claims.put(claim("c6", d.name, []string{"r"}, p6))
	wantOK(t, e.prepare(p6))
}

func TestSharedClaimUnpreparedWithTheLastPod(t *testing.T) {
	e := newEnv(t)
	e.start()
	d := e.registered("gpu.example.com")
	a, b := podWith("a", "", "shared"), podWith("b", "", "shared")
	e.claims.put(claim("shared", d.name, []string{"r"}, a, b))
	d.devices["shared"] = []*drapb.Device{{RequestNames: []string{"r"}, PoolName: "node1", DeviceName: "dev", CdiDeviceIds: []string{"example.com/gpu=s"}}}
	wantOK(t, e.prepare(a))
	rb := e.prepare(b)
	wantOK(t, rb)
	if !slices.Equal(rb.Containers["app"], []string{"example.com/gpu=s"}) {
		t.Fatalf("second pod got %v", rb.Containers)
	}
	if n, _ := d.calls(); n != 1 {
		t.Fatalf("shared claim prepared %d times, want 1", n)
	}
	e.unprepare(a.UID)
	if strings.Contains(e.checkpointClaims(), string(a.UID)) {
		t.Fatalf("pod a still in the checkpoint: %s", e.checkpointClaims())
	}
	if _, u := d.calls(); u != 0 {
		t.Fatalf("claim unprepared while pod b uses it")
	}
	e.unprepare(b.UID)
	if _, u := d.calls(); u != 1 {
		t.Fatalf("answered before the last pod's claim was unprepared (%d calls)", u)
	}
	// A pod without prepared claims is answered at once.
	e.unprepare("never-prepared")
}

func TestRestartNeitherPreparesAgainNorLeaks(t *testing.T) {
	e := newEnv(t)
	e.start()
	d := e.registered("gpu.example.com")
	kept, gone := podWith("kept", "", "c1"), podWith("gone", "", "c2")
	e.claims.put(claim("c1", d.name, []string{"r"}, kept))
	e.claims.put(claim("c2", d.name, []string{"r"}, gone))
	d.devices["c1"] = []*drapb.Device{{RequestNames: []string{"r"}, PoolName: "node1", DeviceName: "dev", CdiDeviceIds: []string{"example.com/gpu=k"}}}
	wantOK(t, e.prepare(kept))
	wantOK(t, e.prepare(gone))

	// The agent dies; the driver re-registers with the new one.
	d.stop()
	e.restart()
	d2 := e.registered("gpu.example.com")
	r := e.prepare(kept)
	wantOK(t, r)
	if !slices.Equal(r.Containers["app"], []string{"example.com/gpu=k"}) {
		t.Fatalf("after restart got %v", r.Containers)
	}
	if n, _ := d2.calls(); n != 0 {
		t.Fatalf("a prepared claim was prepared again after the restart (%d calls)", n)
	}
	// The node's view: "gone" no longer exists.
	e.sys.Root.Send(e.pid, &messages.PodsKnown{UIDs: map[types.UID]bool{kept.UID: true}})
	actortest.Eventually(t, "the claim of the pod gone unprepared", func() bool {
		d2.mu.Lock()
		defer d2.mu.Unlock()
		return len(d2.unprepares) == 1 && slices.Equal(d2.unprepares[0], []string{"c2"})
	})
}

func TestCorruptCheckpointIsIgnored(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(e.store.Path, []byte(`{"version":1,"checksum":"sha256:00","data":{"claims":[]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	e.start()
	d := e.registered("gpu.example.com")
	p := podWith("p", "", "c")
	e.claims.put(claim("c", d.name, []string{"r"}, p))
	wantOK(t, e.prepare(p))
	if !strings.Contains(e.checkpointClaims(), `"prepared":true`) {
		t.Fatalf("checkpoint not rewritten: %s", e.checkpointClaims())
	}
}

func TestDriverGoneAndReplaced(t *testing.T) {
	e := newEnv(t)
	e.start()
	d := e.registered("gpu.example.com")
	d.stop() // removes its registration socket
	p := podWith("p", "", "c")
	e.claims.put(claim("c", d.name, []string{"r"}, p))
	actortest.Eventually(t, "driver deregistered", func() bool {
		return strings.Contains(e.prepare(p).Message, "is not registered")
	})
	// A new instance registers: it serves the claims.
	d2 := e.registered("gpu.example.com")
	wantOK(t, e.prepare(p))
	if n, _ := d2.calls(); n != 1 {
		t.Fatalf("new driver instance called %d times", n)
	}
}

func TestRegistrationRefusesOtherPluginsAndVersions(t *testing.T) {
	e := newEnv(t)
	e.start()
	csi := newFakeDriver(t, e.root, "csi.example.com")
	csi.pluginType = "CSIPlugin"
	csi.serve(t)
	if s := csi.waitRegistered(t); s.PluginRegistered || !strings.Contains(s.Error, "no handler registered for plugin type: CSIPlugin") {
		t.Fatalf("CSI plugin: %+v", s)
	}
	old := newFakeDriver(t, e.root, "old.example.com")
	old.services = []string{"v1alpha3.DRAPlugin"}
	old.serve(t)
	if s := old.waitRegistered(t); s.PluginRegistered || !strings.Contains(s.Error, "none of services supported by the plugin") {
		t.Fatalf("old driver: %+v", s)
	}
	beta := newFakeDriver(t, e.root, "beta.example.com")
	beta.services = []string{"v1beta1.DRAPlugin"}
	beta.serve(t)
	if s := beta.waitRegistered(t); !s.PluginRegistered {
		t.Fatalf("v1beta1 driver refused: %s", s.Error)
	}
}

func TestHealthReachesThePod(t *testing.T) {
	e := newEnv(t)
	e.start()
	d := e.registered("gpu.example.com")
	p := podWith("p", "gpu", "c1")
	e.claims.put(claim("c1", d.name, []string{"gpu"}, p))
	d.devices["c1"] = []*drapb.Device{{RequestNames: []string{"gpu"}, PoolName: "node1", DeviceName: "gpu0", CdiDeviceIds: []string{"example.com/gpu=gpu0"}}}
	wantOK(t, e.prepare(p))
	d.health <- &drahealthv1.NodeWatchResourcesResponse{Devices: []*drahealthv1.DeviceHealth{{
		Device: &drahealthv1.DeviceIdentifier{PoolName: "node1", DeviceName: "gpu0"},
		Health: drahealthv1.HealthStatus_UNHEALTHY, LastUpdatedTime: time.Now().Unix(), Message: "Xid 79"}}}
	// The first health after the prepare is Unknown (no report yet), as
	// upstream; then the driver's report.
	h := e.health()
	for len(h.Containers["app"]) == 1 && len(h.Containers["app"][0].Resources) == 1 && h.Containers["app"][0].Resources[0].Health == v1.ResourceHealthStatusUnknown {
		h = e.health()
	}
	st := h.Containers["app"]
	if h.UID != p.UID || len(st) != 1 || st[0].Name != "claim:c1/gpu" || len(st[0].Resources) != 1 {
		t.Fatalf("health %+v", h)
	}
	res := st[0].Resources[0]
	if res.ResourceID != "example.com/gpu=gpu0" || res.Health != v1.ResourceHealthStatusUnhealthy || res.Message == nil || *res.Message != "Xid 79" {
		t.Fatalf("resource health %+v", res)
	}
}

func TestSlicesWipedAsUpstream(t *testing.T) {
	e := newEnv(t)
	fc := clocktesting.NewFakeClock(time.Now())
	e.clk = fc
	var logs actortest.SyncBuffer
	e.log = slog.New(slog.NewTextHandler(io.MultiWriter(&logs, os.Stderr), nil))
	e.start()
	actortest.Eventually(t, "the node's slices wiped at start", func() bool { return slices.Equal(e.wiper.wiped(), []string{""}) })
	d := e.registered("gpu.example.com")
	p := podWith("p", "", "c")
	e.claims.put(claim("c", d.name, []string{"r"}, p))
	wantOK(t, e.prepare(p)) // connected
	// The driver dies without removing its registration socket: its
	// connection drops, and after the grace period its slices go.
	d.srv.Stop()
	// The actor arms the grace period in the handler that logs the
	// disconnection (other timers of the fake clock, such as the health
	// stream's retry, say nothing about it); Sync lets that handler end.
	actortest.Eventually(t, "the disconnection (or the deregistration) seen", func() bool {
		l := logs.String()
		return strings.Contains(l, "DRA driver disconnected") || strings.Contains(l, "msg=\"DRA driver deregistered\" actor=dra")
	})
	actortest.Sync(t, e.sys, e.pid)
	fc.Step(299 * time.Millisecond)
	actortest.Sync(t, e.sys, e.pid)
	if slices.Contains(e.wiper.wiped(), d.name) {
		t.Fatal("slices wiped before the grace period")
	}
	fc.Step(time.Millisecond)
	actortest.Eventually(t, "the dead driver's slices wiped", func() bool { return slices.Contains(e.wiper.wiped(), d.name) })
}
