package podresources_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	api "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/actorlet/actorlet/adapters/podresources"
	"github.com/actorlet/actorlet/messages"
)

var quiet = slog.New(slog.DiscardHandler)

// fakeSource is a Source with fixed answers and injectable errors; it
// records the UIDs Devices was asked for.
type fakeSource struct {
	pods        []*v1.Pod
	devices     []messages.PodDevices
	allocatable map[v1.ResourceName][]string
	podsErr     error
	devicesErr  error
	allocErr    error

	mu       sync.Mutex
	askedFor []types.UID
}

var _ podresources.Source = (*fakeSource)(nil)

func (f *fakeSource) Pods(context.Context) ([]*v1.Pod, error) { return f.pods, f.podsErr }

func (f *fakeSource) Devices(_ context.Context, uid types.UID) ([]messages.PodDevices, error) {
	f.mu.Lock()
	f.askedFor = append(f.askedFor, uid)
	f.mu.Unlock()
	if f.devicesErr != nil {
		return nil, f.devicesErr
	}
	if uid == "" {
		return f.devices, nil
	}
	var out []messages.PodDevices
	for _, pd := range f.devices {
		if pd.UID == uid {
			out = append(out, pd)
		}
	}
	return out, nil
}

func (f *fakeSource) Allocatable(context.Context) (map[v1.ResourceName][]string, error) {
	return f.allocatable, f.allocErr
}

func (f *fakeSource) asked() []types.UID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]types.UID(nil), f.askedFor...)
}

// tempDir is a short temporary dir (unix socket paths are limited to about
// 107 bytes; t.TempDir() can be longer), removed at the end of the test.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// serve starts a server for src under a fresh root dir and returns a client
// of its socket.
func serve(t *testing.T, src podresources.Source, opts ...podresources.Option) api.PodResourcesListerClient {
	t.Helper()
	s := podresources.New(podresources.SocketPath(tempDir(t)), src, quiet, opts...)
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Stop)
	return client(t, s.SocketPath())
}

// client is a pod resources client of the socket, as a node tool has.
func client(t *testing.T, socket string) api.PodResourcesListerClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return api.NewPodResourcesListerClient(conn)
}

func pod(ns, name, uid string, phase v1.PodPhase, init []v1.Container, ctrs ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)},
		Spec:       v1.PodSpec{InitContainers: init},
		Status:     v1.PodStatus{Phase: phase},
	}
	for _, c := range ctrs {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c})
	}
	return p
}

var always = v1.ContainerRestartPolicyAlways

// node is a node with a GPU pod (a sidecar with a widget, a plain init
// container, two containers), a pod without devices and two terminal pods.
func node() *fakeSource {
	return &fakeSource{
		pods: []*v1.Pod{
			pod("default", "gpu-pod", "uid-gpu", v1.PodRunning, []v1.Container{
				{Name: "setup"},
				{Name: "sidecar", RestartPolicy: &always},
			}, "main", "helper"),
			pod("kube-system", "plain", "uid-plain", v1.PodPending, nil, "app"),
			pod("default", "done", "uid-done", v1.PodSucceeded, nil, "job"),
			pod("default", "crashed", "uid-crashed", v1.PodFailed, nil, "job"),
		},
		devices: []messages.PodDevices{
			{UID: "uid-gpu", Namespace: "default", Name: "gpu-pod", Containers: map[string]map[v1.ResourceName][]string{
				"main":    {"nvidia.com/gpu": {"GPU-b", "GPU-a"}, "example.com/widget": {"w-2"}},
				"sidecar": {"example.com/widget": {"w-1"}},
				"setup":   {"nvidia.com/gpu": {"GPU-c"}},
			}},
			{UID: "uid-done", Namespace: "default", Name: "done", Containers: map[string]map[v1.ResourceName][]string{
				"job": {"nvidia.com/gpu": {"GPU-d"}},
			}},
		},
		allocatable: map[v1.ResourceName][]string{
			"nvidia.com/gpu":     {"GPU-a", "GPU-b", "GPU-c", "GPU-d"},
			"example.com/widget": {"w-1", "w-2", "w-3"},
			"example.com/none":   nil,
		},
	}
}

// gpuPod is the GPU pod as the API shows it.
func gpuPod() *api.PodResources {
	return &api.PodResources{Name: "gpu-pod", Namespace: "default", Containers: []*api.ContainerResources{
		{Name: "sidecar", Devices: []*api.ContainerDevices{{ResourceName: "example.com/widget", DeviceIds: []string{"w-1"}}}},
		{Name: "main", Devices: []*api.ContainerDevices{
			{ResourceName: "example.com/widget", DeviceIds: []string{"w-2"}},
			{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-b", "GPU-a"}},
		}},
		{Name: "helper"},
	}}
}

func TestList(t *testing.T) {
	c := serve(t, node())
	got, err := c.List(context.Background(), &api.ListPodResourcesRequest{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	want := &api.ListPodResourcesResponse{PodResources: []*api.PodResources{
		gpuPod(),
		{Name: "plain", Namespace: "kube-system", Containers: []*api.ContainerResources{{Name: "app"}}},
	}}
	if !proto.Equal(got, want) {
		t.Errorf("List:\n got %v\nwant %v", got, want)
	}
}

func TestGet(t *testing.T) {
	replaced := node()
	// The pod was deleted and created again under the same name: the old
	// one is terminal, the new one has its own devices.
	replaced.pods = append([]*v1.Pod{pod("default", "gpu-pod", "uid-old", v1.PodFailed, nil, "main")}, replaced.pods...)
	replaced.devices = append(replaced.devices, messages.PodDevices{UID: "uid-old", Containers: map[string]map[v1.ResourceName][]string{
		"main": {"nvidia.com/gpu": {"GPU-z"}},
	}})

	tests := []struct {
		name      string
		src       *fakeSource
		namespace string
		pod       string
		want      *api.PodResources
		wantCode  codes.Code
		wantMsg   string
		wantAsked []types.UID
	}{
		{name: "a pod with devices", src: node(), namespace: "default", pod: "gpu-pod",
			want: gpuPod(), wantAsked: []types.UID{"uid-gpu"}},
		{name: "a pod without devices", src: node(), namespace: "kube-system", pod: "plain",
			want:      &api.PodResources{Name: "plain", Namespace: "kube-system", Containers: []*api.ContainerResources{{Name: "app"}}},
			wantAsked: []types.UID{"uid-plain"}},
		{name: "the new pod of a name", src: replaced, namespace: "default", pod: "gpu-pod",
			want: gpuPod(), wantAsked: []types.UID{"uid-gpu"}},
		{name: "no such pod", src: node(), namespace: "default", pod: "nope",
			wantCode: codes.NotFound, wantMsg: "pod nope in namespace default not found"},
		{name: "another namespace", src: node(), namespace: "other", pod: "gpu-pod",
			wantCode: codes.NotFound, wantMsg: "pod gpu-pod in namespace other not found"},
		{name: "no name", src: node(), namespace: "default",
			wantCode: codes.InvalidArgument, wantMsg: "pod name is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := serve(t, tt.src)
			got, err := c.Get(context.Background(), &api.GetPodResourcesRequest{PodNamespace: tt.namespace, PodName: tt.pod})
			if tt.want == nil {
				st, _ := status.FromError(err)
				if st.Code() != tt.wantCode || st.Message() != tt.wantMsg {
					t.Errorf("Get: %v, want code %v %q", err, tt.wantCode, tt.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if !proto.Equal(got.GetPodResources(), tt.want) {
				t.Errorf("Get:\n got %v\nwant %v", got.GetPodResources(), tt.want)
			}
			if asked := tt.src.asked(); len(asked) != len(tt.wantAsked) || asked[0] != tt.wantAsked[0] {
				t.Errorf("the source was asked for the devices of %v, want %v", asked, tt.wantAsked)
			}
		})
	}
}

func TestGetAllocatableResources(t *testing.T) {
	c := serve(t, node())
	got, err := c.GetAllocatableResources(context.Background(), &api.AllocatableResourcesRequest{})
	if err != nil {
		t.Fatalf("GetAllocatableResources: %v", err)
	}
	want := &api.AllocatableResourcesResponse{Devices: []*api.ContainerDevices{
		{ResourceName: "example.com/widget", DeviceIds: []string{"w-1", "w-2", "w-3"}},
		{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-a", "GPU-b", "GPU-c", "GPU-d"}},
	}}
	if !proto.Equal(got, want) {
		t.Errorf("GetAllocatableResources:\n got %v\nwant %v", got, want)
	}
}

func TestSourceErrors(t *testing.T) {
	broken := errors.New("devices actor did not answer")
	tests := []struct {
		name     string
		edit     func(*fakeSource)
		call     func(api.PodResourcesListerClient) error
		wantCode codes.Code
		wantMsg  string
	}{
		{name: "List without pods", edit: func(f *fakeSource) { f.podsErr = broken },
			call: func(c api.PodResourcesListerClient) error {
				_, err := c.List(context.Background(), &api.ListPodResourcesRequest{})
				return err
			},
			wantCode: codes.Unavailable, wantMsg: "pod resources: pods: devices actor did not answer"},
		{name: "List without devices", edit: func(f *fakeSource) { f.devicesErr = broken },
			call: func(c api.PodResourcesListerClient) error {
				_, err := c.List(context.Background(), &api.ListPodResourcesRequest{})
				return err
			},
			wantCode: codes.Unavailable, wantMsg: "pod resources: devices: devices actor did not answer"},
		{name: "Get without devices", edit: func(f *fakeSource) { f.devicesErr = broken },
			call: func(c api.PodResourcesListerClient) error {
				_, err := c.Get(context.Background(), &api.GetPodResourcesRequest{PodNamespace: "default", PodName: "gpu-pod"})
				return err
			},
			wantCode: codes.Unavailable, wantMsg: "pod resources: devices: devices actor did not answer"},
		{name: "allocatable fails with a status", edit: func(f *fakeSource) { f.allocErr = status.Error(codes.DeadlineExceeded, "no answer in 5s") },
			call: func(c api.PodResourcesListerClient) error {
				_, err := c.GetAllocatableResources(context.Background(), &api.AllocatableResourcesRequest{})
				return err
			},
			wantCode: codes.DeadlineExceeded, wantMsg: "no answer in 5s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := node()
			tt.edit(src)
			err := tt.call(serve(t, src))
			st, _ := status.FromError(err)
			if st.Code() != tt.wantCode || st.Message() != tt.wantMsg {
				t.Errorf("got %v, want code %v %q", err, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

func TestRateLimit(t *testing.T) {
	// No refill and bursts of 2: two requests pass, the third is refused.
	c := serve(t, node(), podresources.WithRateLimit(0, 2))
	for i := range 2 {
		if _, err := c.List(context.Background(), &api.ListPodResourcesRequest{}); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	_, err := c.GetAllocatableResources(context.Background(), &api.AllocatableResourcesRequest{})
	if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted || st.Message() != "rejected by rate limit" {
		t.Errorf("a request over the limit: %v, want ResourceExhausted \"rejected by rate limit\"", err)
	}
}

func TestSocket(t *testing.T) {
	t.Run("upstream's path and a new dir", func(t *testing.T) {
		root := tempDir(t)
		want := filepath.Join(root, "pod-resources", "kubelet.sock")
		if got := podresources.SocketPath(root); got != want {
			t.Fatalf("SocketPath %q, want %q", got, want)
		}
		s := podresources.New(want, node(), quiet)
		if err := s.Start(context.Background()); err != nil {
			t.Fatalf("Start: %v", err)
		}
		defer s.Stop()
		fi, err := os.Stat(filepath.Dir(want))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o750 {
			t.Errorf("dir mode %v, want 0750", fi.Mode().Perm())
		}
		if _, err := client(t, want).List(context.Background(), &api.ListPodResourcesRequest{}); err != nil {
			t.Errorf("List: %v", err)
		}
	})
	t.Run("replaces a stale socket", func(t *testing.T) {
		sock := filepath.Join(tempDir(t), "kubelet.sock")
		stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		stale.SetUnlinkOnClose(false)
		_ = stale.Close()
		s := podresources.New(sock, node(), quiet)
		if err := s.Start(context.Background()); err != nil {
			t.Fatalf("Start over a stale socket: %v", err)
		}
		defer s.Stop()
		if _, err := client(t, sock).List(context.Background(), &api.ListPodResourcesRequest{}); err != nil {
			t.Errorf("List: %v", err)
		}
	})
	t.Run("refuses a file that is not a socket", func(t *testing.T) {
		sock := filepath.Join(tempDir(t), "kubelet.sock")
		if err := os.WriteFile(sock, []byte("data"), 0o600); err != nil {
			t.Fatal(err)
		}
		s := podresources.New(sock, node(), quiet)
		err := s.Start(context.Background())
		if err == nil {
			s.Stop()
			t.Fatal("Start served over a regular file")
		}
		if !strings.Contains(err.Error(), "is not a socket") {
			t.Errorf("Start: %v, want it to say the file is not a socket", err)
		}
	})
	t.Run("stop removes the socket; start again", func(t *testing.T) {
		sock := filepath.Join(tempDir(t), "kubelet.sock")
		s := podresources.New(sock, node(), quiet)
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err == nil {
			t.Error("a second Start succeeded")
		}
		s.Stop()
		s.Stop()
		if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the socket is still there after Stop (%v)", err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatalf("Start after Stop: %v", err)
		}
		defer s.Stop()
		if _, err := client(t, sock).List(context.Background(), &api.ListPodResourcesRequest{}); err != nil {
			t.Errorf("List after a restart: %v", err)
		}
	})
	t.Run("serve ends with its context", func(t *testing.T) {
		sock := filepath.Join(tempDir(t), "kubelet.sock")
		s := podresources.New(sock, node(), quiet)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx) }()
		c := client(t, sock)
		// WaitForReady: the first List waits for Serve's socket.
		lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
		defer lcancel()
		if _, err := c.List(lctx, &api.ListPodResourcesRequest{}, grpc.WaitForReady(true)); err != nil {
			t.Fatalf("List while serving: %v", err)
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v, want nil once its context ended", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return after its context ended")
		}
	})
	t.Run("no source", func(t *testing.T) {
		s := podresources.New(filepath.Join(tempDir(t), "kubelet.sock"), nil, quiet)
		if err := s.Start(context.Background()); err == nil {
			s.Stop()
			t.Error("Start without a source succeeded")
		}
	})
}
