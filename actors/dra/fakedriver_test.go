package dra_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/actorlet/actorlet/actors/dra"
	draadapter "github.com/actorlet/actorlet/adapters/dra"
)

// fakeDriver is a DRA driver over real unix sockets: the registration
// service on <root>/plugins_registry/<name>-reg.sock and the DRA v1 and
// health v1 services on <root>/plugins/<name>/dra.sock.
type fakeDriver struct {
	drapb.UnimplementedDRAPluginServer
	drahealthv1.UnimplementedDRAResourceHealthServer

	name, regSock, endpoint string
	pluginType              string
	services                []string
	reg, srv                *grpc.Server

	mu          sync.Mutex
	prepares    [][]string // claim names of each NodePrepareResources
	unprepares  [][]string
	claimErr    string        // answered per claim when set
	callErr     error         // answered for the call when set
	block       chan struct{} // NodePrepareResources waits on it when set
	devices     map[string][]*drapb.Device
	registered  []*registerapi.RegistrationStatus
	health      chan *drahealthv1.NodeWatchResourcesResponse
	statusCalls chan *registerapi.RegistrationStatus
}

func newFakeDriver(t *testing.T, root, name string) *fakeDriver {
	t.Helper()
	d := &fakeDriver{
		name: name, pluginType: registerapi.DRAPlugin,
		services:    []string{drapb.DRAPluginService, drahealthv1.DRAResourceHealthService},
		devices:     map[string][]*drapb.Device{},
		health:      make(chan *drahealthv1.NodeWatchResourcesResponse, 10),
		statusCalls: make(chan *registerapi.RegistrationStatus, 10),
	}
	dir := filepath.Join(root, "plugins", name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	d.endpoint = filepath.Join(dir, "dra.sock")
	d.regSock = filepath.Join(root, draadapter.RegistryDir, name+"-reg.sock")
	return d
}

// serve starts the DRA service, then the registration socket.
func (d *fakeDriver) serve(t *testing.T) {
	t.Helper()
	d.srv = grpc.NewServer()
	drapb.RegisterDRAPluginServer(d.srv, d)
	drahealthv1.RegisterDRAResourceHealthServer(d.srv, d)
	listen(t, d.srv, d.endpoint)
	d.reg = grpc.NewServer()
	registerapi.RegisterRegistrationServer(d.reg, regServer{d: d})
	listen(t, d.reg, d.regSock)
	t.Cleanup(d.stop)
}

func (d *fakeDriver) stop() {
	if d.reg != nil {
		d.reg.Stop()
		_ = os.Remove(d.regSock)
	}
	if d.srv != nil {
		d.srv.Stop()
	}
}

func listen(t *testing.T, s *grpc.Server, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(l) }()
}

type regServer struct {
	registerapi.UnimplementedRegistrationServer
	d *fakeDriver
}

func (r regServer) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: r.d.pluginType, Name: r.d.name, Endpoint: r.d.endpoint, SupportedVersions: r.d.services}, nil
}

func (r regServer) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.d.mu.Lock()
	r.d.registered = append(r.d.registered, s)
	r.d.mu.Unlock()
	r.d.statusCalls <- s
	return &registerapi.RegistrationStatusResponse{}, nil
}

// waitRegistered waits for the kubelet's NotifyRegistrationStatus.
func (d *fakeDriver) waitRegistered(t *testing.T) *registerapi.RegistrationStatus {
	t.Helper()
	select {
	case s := <-d.statusCalls:
		return s
	case <-time.After(20 * time.Second):
		t.Fatalf("driver %s: no NotifyRegistrationStatus", d.name)
		return nil
	}
}

func names(claims []*drapb.Claim) []string {
	var out []string
	for _, c := range claims {
		out = append(out, c.Name)
	}
	return out
}

func (d *fakeDriver) NodePrepareResources(ctx context.Context, req *drapb.NodePrepareResourcesRequest) (*drapb.NodePrepareResourcesResponse, error) {
	d.mu.Lock()
	d.prepares = append(d.prepares, names(req.Claims))
	block, callErr, claimErr := d.block, d.callErr, d.claimErr
	d.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if callErr != nil {
		return nil, callErr
	}
	resp := &drapb.NodePrepareResourcesResponse{Claims: map[string]*drapb.NodePrepareResourceResponse{}}
	for _, c := range req.Claims {
		if claimErr != "" {
			resp.Claims[c.Uid] = &drapb.NodePrepareResourceResponse{Error: claimErr}
			continue
		}
		d.mu.Lock()
		resp.Claims[c.Uid] = &drapb.NodePrepareResourceResponse{Devices: d.devices[c.Name]}
		d.mu.Unlock()
	}
	return resp, nil
}

func (d *fakeDriver) NodeUnprepareResources(_ context.Context, req *drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error) {
	d.mu.Lock()
	d.unprepares = append(d.unprepares, names(req.Claims))
	d.mu.Unlock()
	resp := &drapb.NodeUnprepareResourcesResponse{Claims: map[string]*drapb.NodeUnprepareResourceResponse{}}
	for _, c := range req.Claims {
		resp.Claims[c.Uid] = &drapb.NodeUnprepareResourceResponse{}
	}
	return resp, nil
}

func (d *fakeDriver) NodeWatchResources(_ *drahealthv1.NodeWatchResourcesRequest, s drahealthv1.DRAResourceHealth_NodeWatchResourcesServer) error {
	for {
		select {
		case <-s.Context().Done():
			return nil
		case r := <-d.health:
			if err := s.Send(r); err != nil {
				return err
			}
		}
	}
}

func (d *fakeDriver) calls() (prepares, unprepares int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.prepares), len(d.unprepares)
}

// testDialer dials with adapters/dra and a short call timeout.
type testDialer struct{ timeout time.Duration }

func (d testDialer) Dial(driver, endpoint string, services []string, connected func(bool)) (dra.Driver, error) {
	c, err := draadapter.Dial(driver, endpoint, services, d.timeout, nil, connected)
	if err != nil {
		return nil, err
	}
	return healthMapped{c}, nil
}

type healthMapped struct{ *draadapter.Client }

func (h healthMapped) WatchHealth(ctx context.Context, report func(*drahealthv1.NodeWatchResourcesResponse)) error {
	err := h.Client.WatchHealth(ctx, report)
	if errors.Is(err, draadapter.ErrNoHealth) {
		return dra.ErrNoHealth
	}
	return err
}

// fakeClaims is the API server's ResourceClaims (a map).
type fakeClaims struct {
	mu     sync.Mutex
	claims map[string]*resourceapi.ResourceClaim
}

func (f *fakeClaims) put(c *resourceapi.ResourceClaim) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.claims == nil {
		f.claims = map[string]*resourceapi.ResourceClaim{}
	}
	f.claims[c.Namespace+"/"+c.Name] = c
}

func (f *fakeClaims) GetClaim(_ context.Context, ns, name string) (*resourceapi.ResourceClaim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.claims[ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, name)
	}
	return c.DeepCopy(), nil
}

// claim is an allocated claim of driver's devices (one per request),
// reserved for the pods.
func claim(name, driver string, requests []string, pods ...*v1.Pod) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)}}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for i, r := range requests {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: r, Driver: driver, Pool: "node1", Device: fmt.Sprintf("dev-%s-%d", name, i)})
	}
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
	}
	return c
}

// podWith is a pod whose container "app" uses the claims (by pod claim
// name = claim name), request req of each when not empty.
func podWith(name string, req string, claims ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("pod-" + name)}}
	c := v1.Container{Name: "app", Image: "busybox"}
	for _, cl := range claims {
		n := cl
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: cl, ResourceClaimName: &n})
		c.Resources.Claims = append(c.Resources.Claims, v1.ResourceClaim{Name: cl, Request: req})
	}
	p.Spec.Containers = []v1.Container{c, {Name: "sidecar", Image: "busybox"}}
	return p
}

// fakeWiper records the slice deletions asked for.
type fakeWiper struct {
	mu      sync.Mutex
	drivers []string
}

func (w *fakeWiper) WipeSlices(_ context.Context, driver string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drivers = append(w.drivers, driver)
	return nil
}

func (w *fakeWiper) wiped() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.drivers...)
}
