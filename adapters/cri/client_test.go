package cri

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/actorlet/actorlet/errdefs"
)

// fakeServer serves k8s.io/cri-api's in-process fakes over gRPC (the part of
// k8s.io/cri-client/pkg/fake that these tests need).
type fakeServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer
	rt  *critest.FakeRuntimeService
	img *critest.FakeImageService
}

func (f *fakeServer) Version(ctx context.Context, r *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return f.rt.Version(ctx, r.Version)
}

func (f *fakeServer) Status(ctx context.Context, r *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return f.rt.Status(ctx, r.Verbose)
}

func (f *fakeServer) RunPodSandbox(ctx context.Context, r *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	id, err := f.rt.RunPodSandbox(ctx, r.Config, r.RuntimeHandler)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

func (f *fakeServer) StopPodSandbox(ctx context.Context, r *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	return &runtimeapi.StopPodSandboxResponse{}, f.rt.StopPodSandbox(ctx, r.PodSandboxId)
}

func (f *fakeServer) RemovePodSandbox(ctx context.Context, r *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	return &runtimeapi.RemovePodSandboxResponse{}, f.rt.RemovePodSandbox(ctx, r.PodSandboxId)
}

func (f *fakeServer) PodSandboxStatus(ctx context.Context, r *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	return f.rt.PodSandboxStatus(ctx, r.PodSandboxId, r.Verbose)
}

func (f *fakeServer) ListPodSandbox(ctx context.Context, r *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	items, err := f.rt.ListPodSandbox(ctx, r.Filter)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxResponse{Items: items}, nil
}

func (f *fakeServer) CreateContainer(ctx context.Context, r *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	id, err := f.rt.CreateContainer(ctx, r.PodSandboxId, r.Config, r.SandboxConfig)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

func (f *fakeServer) StartContainer(ctx context.Context, r *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	return &runtimeapi.StartContainerResponse{}, f.rt.StartContainer(ctx, r.ContainerId)
}

func (f *fakeServer) StopContainer(ctx context.Context, r *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	return &runtimeapi.StopContainerResponse{}, f.rt.StopContainer(ctx, r.ContainerId, r.Timeout)
}

func (f *fakeServer) RemoveContainer(ctx context.Context, r *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	return &runtimeapi.RemoveContainerResponse{}, f.rt.RemoveContainer(ctx, r.ContainerId)
}

func (f *fakeServer) ListContainers(ctx context.Context, r *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	cs, err := f.rt.ListContainers(ctx, r.Filter)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListContainersResponse{Containers: cs}, nil
}

func (f *fakeServer) ContainerStatus(ctx context.Context, r *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	return f.rt.ContainerStatus(ctx, r.ContainerId, r.Verbose)
}

func (f *fakeServer) ExecSync(ctx context.Context, r *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	out, errOut, err := f.rt.ExecSync(ctx, r.ContainerId, r.Cmd, time.Duration(r.Timeout)*time.Second)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ExecSyncResponse{Stdout: out, Stderr: errOut}, nil
}

func (f *fakeServer) ImageStatus(ctx context.Context, r *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	return f.img.ImageStatus(ctx, r.Image, r.Verbose)
}

func (f *fakeServer) PullImage(ctx context.Context, r *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref, err := f.img.PullImage(ctx, r.Image, r.Auth, r.SandboxConfig)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PullImageResponse{ImageRef: ref}, nil
}

func (f *fakeServer) ListImages(ctx context.Context, r *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	imgs, err := f.img.ListImages(ctx, r.Filter)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListImagesResponse{Images: imgs}, nil
}

func (f *fakeServer) RemoveImage(ctx context.Context, r *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	return &runtimeapi.RemoveImageResponse{}, f.img.RemoveImage(ctx, r.Image)
}

type observed struct {
	op  string
	err error
}

type recorder struct {
	mu  sync.Mutex
	ops []observed
}

func (r *recorder) observe(op string, d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, observed{op, err})
}

func (r *recorder) last() observed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ops[len(r.ops)-1]
}

// startFake serves fresh fakes on a unix socket and returns a connected client.
func startFake(t *testing.T, endpoint func(sock string) string) (*Client, *fakeServer, *recorder) {
	t.Helper()
	fs := &fakeServer{rt: critest.NewFakeRuntimeService(), img: critest.NewFakeImageService()}
	c, rec := serve(t, endpoint, func(srv *grpc.Server) {
		runtimeapi.RegisterRuntimeServiceServer(srv, fs)
		runtimeapi.RegisterImageServiceServer(srv, fs)
	})
	return c, fs, rec
}

// serve serves what register registers, with the server options opts, on
// a unix socket and returns a client connected to endpoint(socket) and
// what the client observed.
func serve(t testing.TB, endpoint func(sock string) string, register func(*grpc.Server), opts ...grpc.ServerOption) (*Client, *recorder) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "cri.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	rec := &recorder{}
	c, err := Dial(context.Background(), endpoint(sock), 5*time.Second, WithObserver(rec.observe))
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, rec
}

// RemovePod stops and removes container cid (stop timeout in seconds), then
// stops and removes sandbox podID, failing t at the first error. Exported
// for the tests of package cri_test too.
func RemovePod(ctx context.Context, t *testing.T, c *Client, podID, cid string, timeout int64) {
	t.Helper()
	if err := c.StopContainer(ctx, cid, timeout); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	if err := c.RemoveContainer(ctx, cid); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	if err := c.StopPodSandbox(ctx, podID); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	if err := c.RemovePodSandbox(ctx, podID); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
}

func unixURL(sock string) string { return "unix://" + sock }

func podConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: name + "-uid"},
		Labels:   map[string]string{"io.kubernetes.pod.uid": name + "-uid"},
	}
}

func TestClientLifecycle(t *testing.T) {
	c, fs, rec := startFake(t, unixURL)
	ctx := context.Background()

	v, err := c.Version(ctx)
	if err != nil || v.RuntimeName != critest.FakeRuntimeName {
		t.Fatalf("Version = %v, %v", v, err)
	}
	fs.rt.FakeStatus = &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{{Type: runtimeapi.RuntimeReady, Status: true}}}
	st, err := c.Status(ctx)
	if err != nil || len(st.Conditions) != 1 || !st.Conditions[0].Status {
		t.Fatalf("Status = %v, %v", st, err)
	}

	pod := podConfig("web")
	podID, err := c.RunPodSandbox(ctx, pod, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	if o := rec.last(); o.op != "run_podsandbox" || o.err != nil {
		t.Errorf("observer saw %+v, want run_podsandbox without error", o)
	}
	ps, err := c.PodSandboxStatus(ctx, podID)
	if err != nil || ps.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("PodSandboxStatus = %v, %v", ps, err)
	}
	ctrCfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "httpd"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
	}
	cid, err := c.CreateContainer(ctx, podID, ctrCfg, pod)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := c.StartContainer(ctx, cid); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	cs, err := c.ContainerStatus(ctx, cid)
	if err != nil || cs.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("ContainerStatus = %v, %v", cs, err)
	}
	if _, _, code, err := c.ExecSync(ctx, cid, []string{"true"}, time.Second); err != nil || code != 0 {
		t.Fatalf("ExecSync = %d, %v", code, err)
	}
	list, err := c.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: podID})
	if err != nil || len(list) != 1 || list[0].Id != cid {
		t.Fatalf("ListContainers = %v, %v", list, err)
	}
	RemovePod(ctx, t, c, podID, cid, 1)
	pods, err := c.ListPodSandbox(ctx, nil)
	if err != nil || len(pods) != 0 {
		t.Fatalf("ListPodSandbox after removal = %v, %v", pods, err)
	}
	ctrs, err := c.ListContainers(ctx, nil)
	if err != nil || len(ctrs) != 0 {
		t.Fatalf("ListContainers after removal = %v, %v", ctrs, err)
	}
}

func TestClientImages(t *testing.T) {
	c, _, rec := startFake(t, func(sock string) string { return sock }) // bare path
	ctx := context.Background()

	img, err := c.ImageStatus(ctx, "busybox:1.36")
	if err != nil || img != nil {
		t.Fatalf("ImageStatus of absent image = %v, %v; want nil, nil", img, err)
	}
	ref, err := c.PullImage(ctx, "busybox:1.36", nil)
	if err != nil || ref == "" {
		t.Fatalf("PullImage = %q, %v", ref, err)
	}
	if o := rec.last(); o.op != "pull_image" {
		t.Errorf("observer saw %q, want pull_image", o.op)
	}
	img, err = c.ImageStatus(ctx, "busybox:1.36")
	if err != nil || img == nil {
		t.Fatalf("ImageStatus after pull = %v, %v", img, err)
	}
	imgs, err := c.ListImages(ctx)
	if err != nil || len(imgs) != 1 {
		t.Fatalf("ListImages = %v, %v", imgs, err)
	}
	if err := c.RemoveImage(ctx, "busybox:1.36"); err != nil {
		t.Fatalf("RemoveImage: %v", err)
	}
	if imgs, _ := c.ListImages(ctx); len(imgs) != 0 {
		t.Fatalf("ListImages after removal = %v", imgs)
	}
}

func TestClientErrors(t *testing.T) {
	c, fs, rec := startFake(t, unixURL)
	ctx := context.Background()

	t.Run("fake's plain not-found message", func(t *testing.T) {
		_, err := c.PodSandboxStatus(ctx, "nope")
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("PodSandboxStatus(nope) = %v, want ErrNotFound", err)
		}
		if want := "pod sandbox status nope: "; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
			t.Errorf("message %q does not start with %q", err, want)
		}
		if o := rec.last(); o.op != "podsandbox_status" || !errors.Is(o.err, errdefs.ErrNotFound) {
			t.Errorf("observer saw %+v", o)
		}
	})
	t.Run("injected code", func(t *testing.T) {
		fs.rt.InjectError("StartContainer", status.Error(codes.FailedPrecondition, "container is not created"))
		err := c.StartContainer(ctx, "abc")
		if !errors.Is(err, errdefs.ErrFailedPrecondition) {
			t.Fatalf("StartContainer = %v, want ErrFailedPrecondition", err)
		}
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("status.Code(%v) = %v", err, status.Code(err))
		}
	})
	t.Run("containerd name reservation", func(t *testing.T) {
		fs.rt.InjectError("CreateContainer", status.Error(codes.Unknown,
			`failed to reserve container name "c_p_default_u_0": name "c_p_default_u_0" is reserved for "0123"`))
		_, err := c.CreateContainer(ctx, "p", &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}}, podConfig("p"))
		if !errors.Is(err, errdefs.ErrAlreadyExists) {
			t.Fatalf("CreateContainer = %v, want ErrAlreadyExists", err)
		}
	})
	t.Run("unimplemented", func(t *testing.T) {
		fs.img.InjectError("ListImages", status.Error(codes.Unimplemented, "no"))
		if _, err := c.ListImages(ctx); !errors.Is(err, errdefs.ErrUnimplemented) {
			t.Fatalf("ListImages = %v, want ErrUnimplemented", err)
		}
	})
	t.Run("caller deadline", func(t *testing.T) {
		dctx, cancel := context.WithTimeout(ctx, time.Nanosecond)
		defer cancel()
		<-dctx.Done()
		if _, err := c.ListContainers(dctx, nil); !errors.Is(err, errdefs.ErrDeadlineExceeded) {
			t.Fatalf("ListContainers with expired ctx = %v, want ErrDeadlineExceeded", err)
		}
	})
	t.Run("empty exec command", func(t *testing.T) {
		if _, _, _, err := c.ExecSync(ctx, "abc", nil, 0); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("ExecSync(nil) = %v, want ErrInvalidArgument", err)
		}
	})
}

func TestDialErrors(t *testing.T) {
	tests := []struct {
		name     string
		endpoint string
		want     error
	}{
		{name: "tcp scheme", endpoint: "tcp://127.0.0.1:1234", want: errdefs.ErrInvalidArgument},
		{name: "relative path", endpoint: "run/containerd.sock", want: errdefs.ErrInvalidArgument},
		{name: "empty", endpoint: "", want: errdefs.ErrInvalidArgument},
		{name: "no listener", endpoint: "unix://" + filepath.Join(t.TempDir(), "none.sock"), want: errdefs.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Dial(context.Background(), tt.endpoint, time.Second)
			if err == nil {
				_ = c.Close()
				t.Fatalf("Dial(%q) succeeded", tt.endpoint)
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Dial(%q) = %v, want %v", tt.endpoint, err, tt.want)
			}
		})
	}
}

func TestSocketPath(t *testing.T) {
	tests := []struct {
		name, endpoint, want string
	}{
		{name: "unix url", endpoint: "unix:///run/containerd/containerd.sock", want: "/run/containerd/containerd.sock"},
		{name: "unix short", endpoint: "unix:/run/crio/crio.sock", want: "/run/crio/crio.sock"},
		{name: "bare path", endpoint: "/tmp/x/../cri.sock", want: "/tmp/cri.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := socketPath(tt.endpoint)
			if err != nil || got != tt.want {
				t.Fatalf("socketPath(%q) = %q, %v; want %q", tt.endpoint, got, err, tt.want)
			}
		})
	}
}

// RuntimeConfig answers the runtime's cgroup driver, or nil without an
// error where the runtime does not serve the call (containerd 1.6).
func TestClientRuntimeConfig(t *testing.T) {
	c, _, _ := startFake(t, unixURL)
	linux, err := c.RuntimeConfig(context.Background())
	if err != nil {
		t.Fatalf("RuntimeConfig: %v", err)
	}
	t.Logf("the fake runtime's answer: %v", linux)
}

// countingListener counts the connections the runtime accepted.
type countingListener struct {
	net.Listener
	n atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// The client spreads its calls over one connection per core, up to
// maxConns: one HTTP/2 connection serializes every call through its writer
// (docs/BENCHMARKS.md "What serializes").
func TestClientConnectionsPerCore(t *testing.T) {
	tests := []struct {
		name  string
		procs int
		want  int32
	}{
		{name: "one core keeps one connection", procs: 1, want: 1},
		{name: "two cores", procs: 2, want: 2},
		{name: "capped", procs: 16, want: maxConns},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(tt.procs))
			sock := filepath.Join(t.TempDir(), "cri.sock")
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			cl := &countingListener{Listener: l}
			srv := grpc.NewServer()
			runtimeapi.RegisterRuntimeServiceServer(srv, &fakeServer{rt: critest.NewFakeRuntimeService()})
			go func() { _ = srv.Serve(cl) }()
			defer srv.Stop()
			c, err := Dial(context.Background(), unixURL(sock), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			for range 2 * tt.procs {
				if _, err := c.Version(context.Background()); err != nil {
					t.Fatalf("Version: %v", err)
				}
			}
			if got := cl.n.Load(); got != tt.want {
				t.Fatalf("the runtime accepted %d connections, want %d", got, tt.want)
			}
		})
	}
}
