package deviceplugin_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// testPlugin is a small vendor device plugin: a DevicePluginServer on its
// own socket with devices whose health the test changes, registering itself
// on the kubelet's registration socket as a real plugin would.
type testPlugin struct {
	pluginapi.UnimplementedDevicePluginServer

	resource string
	socket   string // absolute path
	opts     *pluginapi.DevicePluginOptions
	srv      *grpc.Server

	mu        sync.Mutex
	devices   []*pluginapi.Device
	changed   chan struct{} // closed and replaced on every change
	allocated [][]string    // Allocate's device IDs, one entry per container request
	preferred []*pluginapi.ContainerPreferredAllocationRequest
	preStarts [][]string
	// misbehave: the plugin answers Allocate and GetPreferredAllocation
	// badly (no container response; a device that was not available).
	misbehave bool
}

var _ pluginapi.DevicePluginServer = (*testPlugin)(nil)

// tempDir is a short temporary dir (unix socket paths are limited to about
// 107 bytes; t.TempDir() can be longer), removed at the end of the test.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// startPlugin serves a test plugin for resource with three healthy devices
// (dev-1..dev-3) on dir/name until the end of the test.
func startPlugin(t *testing.T, dir, name, resource string, opts *pluginapi.DevicePluginOptions) *testPlugin {
	t.Helper()
	p := &testPlugin{
		resource: resource,
		socket:   filepath.Join(dir, name),
		opts:     opts,
		changed:  make(chan struct{}),
	}
	for i := 1; i <= 3; i++ {
		p.devices = append(p.devices, &pluginapi.Device{ID: fmt.Sprintf("dev-%d", i), Health: pluginapi.Healthy})
	}
	l, err := net.Listen("unix", p.socket)
	if err != nil {
		t.Fatalf("test plugin: listen: %v", err)
	}
	p.srv = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.srv, p)
	done := make(chan struct{})
	go func() { _ = p.srv.Serve(l); close(done) }()
	t.Cleanup(func() { p.stop(); <-done })
	return p
}

// stop stops the plugin's server (ending its ListAndWatch streams).
func (p *testPlugin) stop() { p.srv.Stop() }

// register calls Register on the kubelet socket as a vendor plugin does.
func (p *testPlugin) register(ctx context.Context, kubeletSock string) error {
	return register(ctx, kubeletSock, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     filepath.Base(p.socket),
		ResourceName: p.resource,
		Options:      p.opts,
	})
}

// register sends one registration request to the kubelet socket, waiting
// (5 s at most) for the socket to accept it as vendor plugins do.
func register(ctx context.Context, kubeletSock string, req *pluginapi.RegisterRequest) error {
	conn, err := grpc.NewClient("unix://"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, req, grpc.WaitForReady(true))
	return err
}

// setHealth changes one device's health and tells the ListAndWatch streams.
func (p *testPlugin) setHealth(id, health string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, d := range p.devices {
		if d.ID == id {
			p.devices[i] = &pluginapi.Device{ID: id, Health: health}
		}
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// setDevices replaces the device list and tells the ListAndWatch streams.
func (p *testPlugin) setDevices(devs []*pluginapi.Device) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.devices = devs
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *testPlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	if p.opts == nil {
		return &pluginapi.DevicePluginOptions{}, nil
	}
	return p.opts, nil
}

func (p *testPlugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		p.mu.Lock()
		devs := slices.Clone(p.devices)
		changed := p.changed
		p.mu.Unlock()
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		select {
		case <-s.Context().Done():
			return nil
		case <-changed:
		}
	}
}

func (p *testPlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := &pluginapi.AllocateResponse{}
	if p.misbehave {
		return resp, nil
	}
	for _, cr := range req.ContainerRequests {
		p.allocated = append(p.allocated, cr.DevicesIds)
		car := &pluginapi.ContainerAllocateResponse{
			Envs:        map[string]string{"TEST_VISIBLE_DEVICES": fmt.Sprint(cr.DevicesIds)},
			Annotations: map[string]string{"example.com/allocated": "yes"},
			Mounts:      []*pluginapi.Mount{{ContainerPath: "/usr/local/test", HostPath: "/opt/test", ReadOnly: true}},
		}
		for _, id := range cr.DevicesIds {
			car.Devices = append(car.Devices, &pluginapi.DeviceSpec{
				ContainerPath: "/dev/" + id, HostPath: "/dev/" + id, Permissions: "rw",
			})
		}
		resp.ContainerResponses = append(resp.ContainerResponses, car)
	}
	return resp, nil
}

// GetPreferredAllocation prefers the must-include devices, then the last
// available ones (a choice the kubelet would not make by itself).
func (p *testPlugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.ContainerRequests {
		p.preferred = append(p.preferred, cr)
		ids := slices.Clone(cr.MustIncludeDeviceIDs)
		for i := len(cr.AvailableDeviceIDs) - 1; i >= 0 && len(ids) < int(cr.AllocationSize); i-- {
			if id := cr.AvailableDeviceIDs[i]; !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		if p.misbehave {
			ids = []string{"dev-99"}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

func (p *testPlugin) PreStartContainer(_ context.Context, req *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.preStarts = append(p.preStarts, req.DevicesIds)
	return &pluginapi.PreStartContainerResponse{}, nil
}

// calls returns what the plugin was asked so far.
func (p *testPlugin) calls() (allocated [][]string, preferred int, preStarts [][]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.allocated), len(p.preferred), slices.Clone(p.preStarts)
}
