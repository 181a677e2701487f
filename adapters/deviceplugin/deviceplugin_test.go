package deviceplugin_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/actorlet/actorlet/actors/devices"
	"github.com/actorlet/actorlet/adapters/deviceplugin"
	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

// The DevicesActor takes a dialled plugin as one of its Providers.
var _ devices.Provider = (*deviceplugin.Plugin)(nil)

var quiet = slog.New(slog.DiscardHandler)

// waitFor is how long a test waits for something that should happen at once.
const waitFor = 10 * time.Second

// kubelet is a registration server on a fresh dir and what it sent.
type kubelet struct {
	dir  string
	reg  *deviceplugin.Registration
	sent chan *messages.DevicePluginRegistered
}

// startKubelet serves a Registration on a fresh dir until the end of the
// test.
func startKubelet(t *testing.T) *kubelet {
	t.Helper()
	k := &kubelet{dir: tempDir(t), sent: make(chan *messages.DevicePluginRegistered, 16)}
	k.reg = deviceplugin.NewRegistration(k.dir, func(m *messages.DevicePluginRegistered) { k.sent <- m }, quiet)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := k.reg.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(k.reg.Stop)
	return k
}

// registered returns the message a registration sent (Register is
// synchronous: it was sent before Register returned).
func (k *kubelet) registered(t *testing.T) *messages.DevicePluginRegistered {
	t.Helper()
	select {
	case m := <-k.sent:
		return m
	default:
		t.Fatal("the registration sent no DevicePluginRegistered")
		return nil
	}
}

// recv waits for a value from ch.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

func TestRegisterSendsPluginRegistered(t *testing.T) {
	tests := []struct {
		name                string
		opts                *pluginapi.DevicePluginOptions
		preStart, preferred bool
	}{
		{name: "no options"},
		{name: "empty options", opts: &pluginapi.DevicePluginOptions{}},
		{name: "pre-start", opts: &pluginapi.DevicePluginOptions{PreStartRequired: true}, preStart: true},
		{name: "preferred allocation", opts: &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, preferred: true},
		{name: "both", opts: &pluginapi.DevicePluginOptions{PreStartRequired: true, GetPreferredAllocationAvailable: true}, preStart: true, preferred: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := startKubelet(t)
			p := startPlugin(t, k.dir, "vendor.sock", "example.com/widget", tt.opts)
			if err := p.register(context.Background(), k.reg.SocketPath()); err != nil {
				t.Fatalf("Register: %v", err)
			}
			want := &messages.DevicePluginRegistered{
				ResourceName:                    "example.com/widget",
				Endpoint:                        filepath.Join(k.dir, "vendor.sock"),
				PreStartRequired:                tt.preStart,
				GetPreferredAllocationAvailable: tt.preferred,
			}
			if got := k.registered(t); !reflect.DeepEqual(got, want) {
				t.Errorf("sent %+v, want %+v", got, want)
			}
		})
	}
}

func TestRegisterRefusesBadRequests(t *testing.T) {
	tests := []struct {
		name     string
		edit     func(*pluginapi.RegisterRequest)
		wantCode codes.Code
		wantMsg  string
	}{
		{name: "unsupported version", edit: func(r *pluginapi.RegisterRequest) { r.Version = "v1alpha" },
			wantCode: codes.InvalidArgument, wantMsg: `requested API version "v1alpha" is not supported by kubelet`},
		{name: "no version", edit: func(r *pluginapi.RegisterRequest) { r.Version = "" },
			wantCode: codes.InvalidArgument, wantMsg: `requested API version "" is not supported`},
		{name: "native resource", edit: func(r *pluginapi.RegisterRequest) { r.ResourceName = "cpu" },
			wantCode: codes.InvalidArgument, wantMsg: `the ResourceName "cpu" is invalid: an extended resource needs a domain prefix`},
		{name: "kubernetes.io namespace", edit: func(r *pluginapi.RegisterRequest) { r.ResourceName = "kubernetes.io/x" },
			wantCode: codes.InvalidArgument, wantMsg: `the ResourceName "kubernetes.io/x" is invalid: the kubernetes.io/ namespace is reserved`},
		{name: "quota prefix", edit: func(r *pluginapi.RegisterRequest) { r.ResourceName = "requests.example.com/x" },
			wantCode: codes.InvalidArgument, wantMsg: "the requests. prefix is reserved for quota"},
		{name: "not a qualified name", edit: func(r *pluginapi.RegisterRequest) { r.ResourceName = "example.com/a widget" },
			wantCode: codes.InvalidArgument, wantMsg: `the ResourceName "example.com/a widget" is invalid`},
		{name: "no resource name", edit: func(r *pluginapi.RegisterRequest) { r.ResourceName = "" },
			wantCode: codes.InvalidArgument, wantMsg: `the ResourceName "" is invalid: it is empty`},
		{name: "endpoint in a subdir", edit: func(r *pluginapi.RegisterRequest) { r.Endpoint = "sub/vendor.sock" },
			wantCode: codes.InvalidArgument, wantMsg: `the Endpoint "sub/vendor.sock" is invalid: it must be a file name in the device plugins dir, without "/"`},
		{name: "endpoint outside the dir", edit: func(r *pluginapi.RegisterRequest) { r.Endpoint = "../vendor.sock" },
			wantCode: codes.InvalidArgument, wantMsg: `the Endpoint "../vendor.sock" is invalid`},
		{name: "endpoint dot dot", edit: func(r *pluginapi.RegisterRequest) { r.Endpoint = ".." },
			wantCode: codes.InvalidArgument, wantMsg: `without ".."`},
		{name: "absolute endpoint", edit: func(r *pluginapi.RegisterRequest) { r.Endpoint = "/tmp/vendor.sock" },
			wantCode: codes.InvalidArgument, wantMsg: `without "/"`},
		{name: "no endpoint", edit: func(r *pluginapi.RegisterRequest) { r.Endpoint = "" },
			wantCode: codes.InvalidArgument, wantMsg: `the Endpoint "" is invalid: it is empty`},
		{name: "the kubelet socket", edit: func(r *pluginapi.RegisterRequest) { r.Endpoint = "kubelet.sock" },
			wantCode: codes.InvalidArgument, wantMsg: "the kubelet's own registration socket"},
		{name: "endpoint not served", edit: func(r *pluginapi.RegisterRequest) { r.Endpoint = "missing.sock" },
			wantCode: codes.FailedPrecondition, wantMsg: `the Endpoint "missing.sock": the plugin must serve its socket before it registers`},
		{name: "endpoint not a socket", edit: func(r *pluginapi.RegisterRequest) { r.Endpoint = "plain-file" },
			wantCode: codes.FailedPrecondition, wantMsg: "is not a socket"},
	}
	k := startKubelet(t)
	startPlugin(t, k.dir, "vendor.sock", "example.com/widget", nil)
	if err := os.WriteFile(filepath.Join(k.dir, "plain-file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "vendor.sock", ResourceName: "example.com/widget"}
			tt.edit(req)
			err := register(context.Background(), k.reg.SocketPath(), req)
			if err == nil {
				t.Fatal("Register accepted the request")
			}
			st, _ := status.FromError(err)
			if st.Code() != tt.wantCode || !strings.Contains(st.Message(), tt.wantMsg) {
				t.Errorf("Register: %v (code %v); want code %v and a message with %q", err, st.Code(), tt.wantCode, tt.wantMsg)
			}
			select {
			case m := <-k.sent:
				t.Errorf("a refused registration was sent on: %+v", m)
			default:
			}
		})
	}
}

func TestValidateResourceName(t *testing.T) {
	tests := []struct {
		name   string
		valid  bool
		reason string
	}{
		{name: "nvidia.com/gpu", valid: true},
		{name: "example.com/foo-bar_baz.1", valid: true},
		{name: "vendor.example/x", valid: true},
		{name: "memory", reason: "domain prefix"},
		{name: "kubernetes.io/gpu", reason: "kubernetes.io/ namespace"},
		{name: "foo.kubernetes.io/gpu", reason: "kubernetes.io/ namespace"},
		{name: "requests.example.com/gpu", reason: "requests. prefix"},
		{name: "example.com/", reason: "is invalid"},
		{name: "example.com/-gpu", reason: "is invalid"},
		{name: "Example_com/gpu", reason: "is invalid"},
		{name: "example.com/gpu/extra", reason: "is invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := deviceplugin.ValidateResourceName(tt.name)
			switch {
			case tt.valid && err != nil:
				t.Errorf("refused: %v", err)
			case !tt.valid && err == nil:
				t.Error("accepted")
			case !tt.valid && !strings.Contains(err.Error(), tt.reason):
				t.Errorf("refused with %q, want the reason %q", err, tt.reason)
			}
		})
	}
}

func TestRegistrationSocket(t *testing.T) {
	t.Run("makes the dir", func(t *testing.T) {
		dir := filepath.Join(tempDir(t), "device-plugins")
		reg := deviceplugin.NewRegistration(dir, func(*messages.DevicePluginRegistered) {}, quiet)
		if err := reg.Start(context.Background()); err != nil {
			t.Fatalf("Start: %v", err)
		}
		defer reg.Stop()
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o750 {
			t.Errorf("dir mode %v, want 0750", fi.Mode().Perm())
		}
		if reg.SocketPath() != filepath.Join(dir, "kubelet.sock") {
			t.Errorf("SocketPath %q, want %q", reg.SocketPath(), filepath.Join(dir, "kubelet.sock"))
		}
	})
	t.Run("replaces a stale socket", func(t *testing.T) {
		dir := tempDir(t)
		stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "kubelet.sock"), Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		stale.SetUnlinkOnClose(false)
		_ = stale.Close()
		sent := make(chan *messages.DevicePluginRegistered, 1)
		reg := deviceplugin.NewRegistration(dir, func(m *messages.DevicePluginRegistered) { sent <- m }, quiet)
		if err := reg.Start(context.Background()); err != nil {
			t.Fatalf("Start over a stale socket: %v", err)
		}
		defer reg.Stop()
		p := startPlugin(t, dir, "vendor.sock", "example.com/widget", nil)
		if err := p.register(context.Background(), reg.SocketPath()); err != nil {
			t.Fatalf("Register: %v", err)
		}
		if m := recv(t, sent, "the registration"); m.ResourceName != "example.com/widget" {
			t.Errorf("sent %+v", m)
		}
	})
	t.Run("removes the sockets of earlier plugins", func(t *testing.T) {
		dir := tempDir(t)
		// A plugin of the earlier kubelet still listens; the checkpoint and
		// a dir are not sockets and stay.
		old := startPlugin(t, dir, "old-plugin.sock", "example.com/widget", nil)
		if err := os.WriteFile(filepath.Join(dir, "kubelet_internal_checkpoint"), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, "sub"), 0o750); err != nil {
			t.Fatal(err)
		}
		reg := deviceplugin.NewRegistration(dir, func(*messages.DevicePluginRegistered) {}, quiet)
		if err := reg.Start(context.Background()); err != nil {
			t.Fatalf("Start: %v", err)
		}
		defer reg.Stop()
		if _, err := os.Stat(old.socket); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the old plugin's socket is still there (%v): it would not know to register again", err)
		}
		for _, keep := range []string{"kubelet_internal_checkpoint", "sub"} {
			if _, err := os.Stat(filepath.Join(dir, keep)); err != nil {
				t.Errorf("%s was removed: %v", keep, err)
			}
		}
	})
	t.Run("refuses a file that is not a socket", func(t *testing.T) {
		dir := tempDir(t)
		if err := os.WriteFile(filepath.Join(dir, "kubelet.sock"), []byte("data"), 0o600); err != nil {
			t.Fatal(err)
		}
		reg := deviceplugin.NewRegistration(dir, func(*messages.DevicePluginRegistered) {}, quiet)
		err := reg.Start(context.Background())
		if err == nil {
			reg.Stop()
			t.Fatal("Start served over a regular file")
		}
		if !strings.Contains(err.Error(), "is not a socket") {
			t.Errorf("Start: %v, want it to say the file is not a socket", err)
		}
	})
	t.Run("start twice", func(t *testing.T) {
		reg := deviceplugin.NewRegistration(tempDir(t), func(*messages.DevicePluginRegistered) {}, quiet)
		if err := reg.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer reg.Stop()
		if err := reg.Start(context.Background()); err == nil {
			t.Error("a second Start succeeded")
		}
	})
	t.Run("stop, then start again", func(t *testing.T) {
		dir := tempDir(t)
		sent := make(chan *messages.DevicePluginRegistered, 1)
		reg := deviceplugin.NewRegistration(dir, func(m *messages.DevicePluginRegistered) { sent <- m }, quiet)
		if err := reg.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		reg.Stop()
		reg.Stop()
		if _, err := os.Stat(reg.SocketPath()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the socket is still there after Stop (%v)", err)
		}
		if err := reg.Start(context.Background()); err != nil {
			t.Fatalf("Start after Stop: %v", err)
		}
		defer reg.Stop()
		p := startPlugin(t, dir, "vendor.sock", "example.com/widget", nil)
		if err := p.register(context.Background(), reg.SocketPath()); err != nil {
			t.Fatalf("Register after a restart: %v", err)
		}
		recv(t, sent, "the registration")
	})
	t.Run("serve ends with its context", func(t *testing.T) {
		dir := tempDir(t)
		reg := deviceplugin.NewRegistration(dir, func(*messages.DevicePluginRegistered) {}, quiet)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- reg.Serve(ctx) }()
		// Serve removes the sockets in dir before it listens: the plugin
		// starts once the registration socket is there.
		actortest.Eventually(t, "the registration socket", func() bool {
			_, err := os.Stat(reg.SocketPath())
			return err == nil
		})
		p := startPlugin(t, dir, "vendor.sock", "example.com/widget", nil)
		if err := p.register(ctx, reg.SocketPath()); err != nil {
			t.Fatalf("Register while Serve runs: %v", err)
		}
		cancel()
		if err := recv(t, done, "Serve to return"); err != nil {
			t.Errorf("Serve: %v, want nil once its context ended", err)
		}
		if _, err := os.Stat(reg.SocketPath()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the socket is still there after Serve returned (%v)", err)
		}
	})
	t.Run("no send function", func(t *testing.T) {
		reg := deviceplugin.NewRegistration(tempDir(t), nil, quiet)
		if err := reg.Start(context.Background()); err == nil {
			reg.Stop()
			t.Error("Start without a send function succeeded")
		}
	})
}

// watched is one update a Watch made.
type watched struct {
	devices []*pluginapi.Device
	why     string
}

// dialRegistered registers p on k and dials it as the DevicesActor would,
// from the message the registration sent.
func dialRegistered(t *testing.T, k *kubelet, p *testPlugin) *deviceplugin.Plugin {
	t.Helper()
	if err := p.register(context.Background(), k.reg.SocketPath()); err != nil {
		t.Fatalf("Register: %v", err)
	}
	m := k.registered(t)
	plugin, err := deviceplugin.Dial(context.Background(), m.ResourceName, m.Endpoint, m.PreStartRequired, m.GetPreferredAllocationAvailable, quiet)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = plugin.Close() })
	if plugin.ResourceName() != p.resource {
		t.Errorf("ResourceName %q, want %q", plugin.ResourceName(), p.resource)
	}
	return plugin
}

// watch runs plugin.Watch until ctx ends; the updates and its result come on
// the channels.
func watch(ctx context.Context, plugin *deviceplugin.Plugin) (<-chan watched, <-chan error) {
	updates := make(chan watched, 16)
	done := make(chan error, 1)
	go func() {
		done <- plugin.Watch(ctx, func(devs []*pluginapi.Device, why string) { updates <- watched{devs, why} })
	}()
	return updates, done
}

// health is a device list as "ID=Health" strings.
func health(devs []*pluginapi.Device) []string {
	out := make([]string, 0, len(devs))
	for _, d := range devs {
		out = append(out, d.ID+"="+d.Health)
	}
	return out
}

func TestWatchSeesDevicesAndHealthChanges(t *testing.T) {
	k := startKubelet(t)
	p := startPlugin(t, k.dir, "vendor.sock", "example.com/widget", nil)
	plugin := dialRegistered(t, k, p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	updates, done := watch(ctx, plugin)

	steps := []struct {
		name    string
		change  func()
		want    []string
		wantWhy string
	}{
		{name: "the first list", change: func() {},
			want: []string{"dev-1=Healthy", "dev-2=Healthy", "dev-3=Healthy"}},
		{name: "a device turns unhealthy", change: func() { p.setHealth("dev-2", pluginapi.Unhealthy) },
			want:    []string{"dev-1=Healthy", "dev-2=Unhealthy", "dev-3=Healthy"},
			wantWhy: "dev-2: Healthy -> Unhealthy"},
		{name: "devices come and go; bad entries are dropped", change: func() {
			p.setDevices([]*pluginapi.Device{
				{ID: "dev-1", Health: pluginapi.Healthy},
				{ID: "dev-2", Health: pluginapi.Healthy},
				{ID: "", Health: pluginapi.Healthy},
				{ID: "dev-1", Health: pluginapi.Unhealthy},
				{ID: "dev-4", Health: "on fire"},
			})
		},
			want:    []string{"dev-1=Healthy", "dev-2=Healthy", "dev-4=Unhealthy"},
			wantWhy: "dev-2: Unhealthy -> Healthy; dev-3: removed; dev-4: added (Unhealthy)"},
	}
	for _, st := range steps {
		st.change()
		u := recv(t, updates, st.name)
		if got := health(u.devices); !reflect.DeepEqual(got, st.want) || u.why != st.wantWhy {
			t.Errorf("%s: update %v why %q, want %v why %q", st.name, got, u.why, st.want, st.wantWhy)
		}
	}
	cancel()
	if err := recv(t, done, "Watch to return"); err != nil {
		t.Errorf("Watch: %v, want nil once its context ended", err)
	}
}

func TestWatchFailsWhenThePluginGoes(t *testing.T) {
	k := startKubelet(t)
	p := startPlugin(t, k.dir, "vendor.sock", "example.com/widget", nil)
	plugin := dialRegistered(t, k, p)
	updates, done := watch(context.Background(), plugin)
	recv(t, updates, "the first list")
	p.stop()
	if err := recv(t, done, "Watch to return"); err == nil {
		t.Error("Watch returned nil when the plugin went away, want an error")
	}
}

func TestAllocateReturnsThePluginsAnswer(t *testing.T) {
	k := startKubelet(t)
	p := startPlugin(t, k.dir, "vendor.sock", "example.com/widget", nil)
	plugin := dialRegistered(t, k, p)

	got, err := plugin.Allocate(context.Background(), []string{"dev-1", "dev-3"})
	if err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	want := &pluginapi.ContainerAllocateResponse{
		Envs:        map[string]string{"TEST_VISIBLE_DEVICES": "[dev-1 dev-3]"},
		Annotations: map[string]string{"example.com/allocated": "yes"},
		Mounts:      []*pluginapi.Mount{{ContainerPath: "/usr/local/test", HostPath: "/opt/test", ReadOnly: true}},
		Devices: []*pluginapi.DeviceSpec{
			{ContainerPath: "/dev/dev-1", HostPath: "/dev/dev-1", Permissions: "rw"},
			{ContainerPath: "/dev/dev-3", HostPath: "/dev/dev-3", Permissions: "rw"},
		},
	}
	if !proto.Equal(got, want) {
		t.Errorf("Allocate: %v, want %v", got, want)
	}
	if allocated, _, _ := p.calls(); !reflect.DeepEqual(allocated, [][]string{{"dev-1", "dev-3"}}) {
		t.Errorf("the plugin was asked for %v, want one container with [dev-1 dev-3]", allocated)
	}
}

func TestBadPluginAnswersAreErrors(t *testing.T) {
	k := startKubelet(t)
	p := startPlugin(t, k.dir, "vendor.sock", "example.com/widget",
		&pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true})
	p.mu.Lock()
	p.misbehave = true
	p.mu.Unlock()
	plugin := dialRegistered(t, k, p)
	ctx := context.Background()

	tests := []struct {
		name    string
		call    func() error
		wantMsg string
	}{
		{name: "Allocate without a container response", wantMsg: "answered 0 container responses",
			call: func() error { _, err := plugin.Allocate(ctx, []string{"dev-1"}); return err }},
		{name: "Allocate of nothing", wantMsg: "no device IDs",
			call: func() error { _, err := plugin.Allocate(ctx, nil); return err }},
		{name: "a preferred device that is not available", wantMsg: `preferred "dev-99", which is not available`,
			call: func() error {
				_, err := plugin.PreferredAllocation(ctx, []string{"dev-1", "dev-2"}, nil, 1)
				return err
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("got %v, want an error with %q", err, tt.wantMsg)
			}
		})
	}
}

func TestPreferredAllocationAndPreStartOnlyWhenRegistered(t *testing.T) {
	tests := []struct {
		name                string
		opts                *pluginapi.DevicePluginOptions
		preStart, preferred bool
	}{
		{name: "neither"},
		{name: "preferred allocation", opts: &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, preferred: true},
		{name: "pre-start", opts: &pluginapi.DevicePluginOptions{PreStartRequired: true}, preStart: true},
		{name: "both", opts: &pluginapi.DevicePluginOptions{PreStartRequired: true, GetPreferredAllocationAvailable: true}, preStart: true, preferred: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := startKubelet(t)
			p := startPlugin(t, k.dir, "vendor.sock", "example.com/widget", tt.opts)
			plugin := dialRegistered(t, k, p)
			ctx := context.Background()

			ids, err := plugin.PreferredAllocation(ctx, []string{"dev-1", "dev-2", "dev-3"}, []string{"dev-1"}, 2)
			if err != nil {
				t.Fatalf("PreferredAllocation: %v", err)
			}
			var want []string
			if tt.preferred {
				want = []string{"dev-1", "dev-3"} // the plugin's own choice
			}
			if !reflect.DeepEqual(ids, want) {
				t.Errorf("PreferredAllocation: %v, want %v", ids, want)
			}
			if err := plugin.PreStart(ctx, []string{"dev-2"}); err != nil {
				t.Fatalf("PreStart: %v", err)
			}

			_, preferred, preStarts := p.calls()
			if wantCalls := map[bool]int{true: 1}[tt.preferred]; preferred != wantCalls {
				t.Errorf("the plugin got %d GetPreferredAllocation calls, want %d", preferred, wantCalls)
			}
			var wantPreStarts [][]string
			if tt.preStart {
				wantPreStarts = [][]string{{"dev-2"}}
			}
			if !reflect.DeepEqual(preStarts, wantPreStarts) {
				t.Errorf("the plugin got PreStartContainer %v, want %v", preStarts, wantPreStarts)
			}
		})
	}
}

func TestDialFails(t *testing.T) {
	dir := tempDir(t)
	tests := []struct {
		name     string
		endpoint string
		wantMsg  string
	}{
		{name: "nothing listens", endpoint: filepath.Join(dir, "gone.sock"), wantMsg: "GetDevicePluginOptions"},
		{name: "relative endpoint", endpoint: "vendor.sock", wantMsg: "not an absolute path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := deviceplugin.Dial(context.Background(), "example.com/widget", tt.endpoint, false, false, quiet)
			if err == nil {
				_ = p.Close()
				t.Fatal("Dial succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Dial: %v, want an error with %q", err, tt.wantMsg)
			}
		})
	}
}
