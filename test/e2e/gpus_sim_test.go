package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// devicesView is GET /devices.
type devicesView struct {
	Capacity    map[string]int64    `json:"capacity"`
	Allocatable map[string]int64    `json:"allocatable"`
	Healthy     map[string][]string `json:"healthy"`
	Labels      map[string]string   `json:"labels"`
	Pods        []struct {
		Name       string                         `json:"name"`
		Containers map[string]map[string][]string `json:"containers"`
	} `json:"pods"`
}

func (a *agent) devices() (devicesView, error) {
	var v devicesView
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/devices", a.roPort))
	if err != nil {
		return v, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return v, fmt.Errorf("/devices: %d %s", resp.StatusCode, b)
	}
	return v, json.NewDecoder(resp.Body).Decode(&v)
}

// gpusOf is what /devices says pod holds.
func (v devicesView) gpusOf(pod string) []string {
	for _, p := range v.Pods {
		if p.Name == pod {
			var out []string
			for _, c := range p.Containers {
				out = append(out, c["nvidia.com/gpu"]...)
			}
			sort.Strings(out)
			return out
		}
	}
	return nil
}

// containerLog reads a container's log through the node API.
func (a *agent) containerLog(pod, container string) string {
	a.t.Helper()
	resp, err := a.mainClient().Get(a.mainURL("/containerLogs/default/" + pod + "/" + container))
	if err != nil {
		a.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// gpuPod asks for n GPUs and prints the GPUs it was given.
func gpuPod(name string, n int) string {
	return busyboxPod(name, `command: ["sh", "-c", "echo gpus=$NVIDIA_VISIBLE_DEVICES; sleep infinity"]`,
		fmt.Sprintf("resources: {limits: {nvidia.com/gpu: %d}}", n))
}

func rejectedWith(reason string) func(*v1.Pod) bool {
	return func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed && p.Status.Reason == reason }
}

// podResources dials the pod resources API of the agent.
func podResources(t *testing.T, root string) podresourcesapi.PodResourcesListerClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(root, "pod-resources", "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return podresourcesapi.NewPodResourcesListerClient(conn)
}

// Simulated GPUs (go-nvml's DGX H100 server, 4 of its 8 GPUs): the node
// shows them with GPU feature discovery's labels; pods get distinct GPUs
// through the env and the device list; one that asks for more than is free
// is OutOfnvidia.com/gpu; the pod resources API lists who holds what; a
// kill -9 of actorlet neither loses nor double-allocates a GPU (the
// checkpoint); a deleted pod's GPUs go to the next pod.
func TestE2ESimGPUsAllocatedAndCheckpointed(t *testing.T) {
	root, endpoint, _ := simProcess(t)
	dir := t.TempDir()
	writeManifest(t, dir, "pods.yaml", manifests(gpuPod("one", 1), gpuPod("three", 3)))
	a := startAgent(t, agentOpts{endpoint: endpoint, rootDir: root, manifestDir: dir, extra: []string{"--gpus", "mock:dgxh100?count=4"}})
	a.waitPod(time.Minute, "one-e2e-node", "Running", isRunning)
	a.waitPod(time.Minute, "three-e2e-node", "Running", isRunning)

	v, err := a.devices()
	if err != nil {
		t.Fatal(err)
	}
	if v.Capacity["nvidia.com/gpu"] != 4 || v.Allocatable["nvidia.com/gpu"] != 4 ||
		v.Labels["nvidia.com/gpu.product"] != "NVIDIA-H100-80GB-HBM3" || v.Labels["nvidia.com/gpu.count"] != "4" {
		t.Fatalf("/devices: %+v", v)
	}
	one, three := v.gpusOf("one-e2e-node"), v.gpusOf("three-e2e-node")
	all := append(slices.Clone(one), three...)
	sort.Strings(all)
	if len(one) != 1 || len(three) != 3 || len(slices.Compact(all)) != 4 {
		t.Fatalf("allocations one=%v three=%v: want 1 and 3 distinct GPUs", one, three)
	}
	for pod, want := range map[string][]string{"one-e2e-node": one, "three-e2e-node": three} {
		got := a.containerLog(pod, "app")
		for _, id := range want {
			if !strings.Contains(got, id) {
				t.Errorf("%s printed %q: NVIDIA_VISIBLE_DEVICES lacks %s", pod, got, id)
			}
		}
	}

	// All four are taken: a fifth pod is refused as upstream refuses an
	// extended resource.
	writeManifest(t, dir, "more.yaml", gpuPod("more", 1))
	p := a.waitPod(time.Minute, "more-e2e-node", "Failed with OutOfnvidia.com/gpu", rejectedWith("OutOfnvidia.com/gpu"))
	if p.Status.Message != "Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 4, capacity: 4" {
		t.Errorf("message %q", p.Status.Message)
	}
	if err := os.Remove(filepath.Join(dir, "more.yaml")); err != nil {
		t.Fatal(err)
	}

	// The pod resources API says the same.
	pr := podResources(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := pr.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string][]string{}
	for _, p := range list.PodResources {
		for _, c := range p.Containers {
			for _, d := range c.Devices {
				seen[p.Name] = append(seen[p.Name], d.DeviceIds...)
			}
		}
	}
	if len(seen["one-e2e-node"]) != 1 || len(seen["three-e2e-node"]) != 3 {
		t.Fatalf("pod resources List: %v", seen)
	}
	alloc, err := pr.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{})
	if err != nil || len(alloc.Devices) != 1 || len(alloc.Devices[0].DeviceIds) != 4 {
		t.Fatalf("GetAllocatableResources: %v, %v", alloc, err)
	}

	// kill -9: the containers keep running in the sim; the restarted
	// actorlet adopts them with the same GPUs and gives none twice.
	a.kill9()
	a.start()
	a.waitPod(time.Minute, "one-e2e-node", "Running after the restart", isRunning)
	a.waitPod(time.Minute, "three-e2e-node", "Running after the restart", isRunning)
	v, err = a.devices()
	if err != nil {
		t.Fatal(err)
	}
	if got := v.gpusOf("one-e2e-node"); !slices.Equal(got, one) {
		t.Errorf("after kill -9, one holds %v, had %v", got, one)
	}
	if got := v.gpusOf("three-e2e-node"); !slices.Equal(got, three) {
		t.Errorf("after kill -9, three holds %v, had %v", got, three)
	}
	writeManifest(t, dir, "again.yaml", gpuPod("again", 1))
	a.waitPod(time.Minute, "again-e2e-node", "Failed with OutOfnvidia.com/gpu after the restart", rejectedWith("OutOfnvidia.com/gpu"))
	if err := os.Remove(filepath.Join(dir, "again.yaml")); err != nil {
		t.Fatal(err)
	}

	// The three GPUs of a deleted pod go to the next pod.
	writeManifest(t, dir, "pods.yaml", gpuPod("one", 1))
	testenv.WaitFor(t, time.Minute, "three's GPUs released", func() (bool, error) {
		v, err := a.devices()
		if err != nil {
			return false, err
		}
		return len(v.gpusOf("three-e2e-node")) == 0, fmt.Errorf("pods %+v", v.Pods)
	})
	writeManifest(t, dir, "next.yaml", gpuPod("next", 3))
	a.waitPod(time.Minute, "next-e2e-node", "Running with three's GPUs", isRunning)
	v, err = a.devices()
	if err != nil {
		t.Fatal(err)
	}
	if got := v.gpusOf("next-e2e-node"); !slices.Equal(got, three) {
		t.Errorf("next holds %v, want three's %v", got, three)
	}
}

// A critical Xid on a simulated GPU (POST /devices/fault) makes it
// unhealthy: allocatable drops, the pod holding it gets a DeviceUnhealthy
// event, the gauges say so, and no pod is given it again.
func TestE2ESimGPUHealth(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "pods.yaml", gpuPod("holder", 1))
	a := startAgent(t, agentOpts{manifestDir: dir, extra: []string{"--gpus", "mock:dgxh100?count=2", "--device-metrics-period", "1s", "--v", "4"}})
	a.waitPod(time.Minute, "holder-e2e-node", "Running", isRunning)
	v, err := a.devices()
	if err != nil {
		t.Fatal(err)
	}
	held := v.gpusOf("holder-e2e-node")
	if len(held) != 1 {
		t.Fatalf("holder holds %v", held)
	}
	resp, err := a.mainClient().Post(a.mainURL("/devices/fault?device="+held[0]+"&xid=79"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("inject: %d %s", resp.StatusCode, b)
	}
	testenv.WaitFor(t, time.Minute, "allocatable 1 after the Xid", func() (bool, error) {
		v, err := a.devices()
		if err != nil {
			return false, err
		}
		return v.Allocatable["nvidia.com/gpu"] == 1 && v.Capacity["nvidia.com/gpu"] == 2, fmt.Errorf("%+v", v)
	})
	testenv.WaitFor(t, time.Minute, "a DeviceUnhealthy event on the holder", func() (bool, error) {
		return a.logContains("reason=DeviceUnhealthy"), fmt.Errorf("no event in the log (standalone: events are logged at debug)")
	})
	testenv.WaitFor(t, time.Minute, "the gauges", func() (bool, error) {
		m := a.metrics()
		return strings.Contains(m, `actorlet_devices{resource="nvidia.com/gpu",state="allocatable"} 1`) &&
			strings.Contains(m, `DCGM_FI_DEV_XID_ERRORS{UUID="`+held[0]+`",container="app",namespace="default",pod="holder-e2e-node",resource="nvidia.com/gpu"} 79`), fmt.Errorf("metrics")
	})
	// As upstream, the holder's request still counts against the healthy
	// GPUs left (allocatable 1, used 1): a new pod is refused ...
	writeManifest(t, dir, "b.yaml", gpuPod("b", 1))
	a.waitPod(time.Minute, "b-e2e-node", "Failed with OutOfnvidia.com/gpu", rejectedWith("OutOfnvidia.com/gpu"))
	// ... until the holder goes: then the healthy GPU, never the unhealthy
	// one, goes to the next pod, and the one after gets none.
	if err := os.Remove(filepath.Join(dir, "pods.yaml")); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "the holder's GPU released", func() (bool, error) {
		v, err := a.devices()
		if err != nil {
			return false, err
		}
		return len(v.gpusOf("holder-e2e-node")) == 0, fmt.Errorf("pods %+v", v.Pods)
	})
	writeManifest(t, dir, "c.yaml", gpuPod("c", 1))
	a.waitPod(time.Minute, "c-e2e-node", "Running", isRunning)
	v, err = a.devices()
	if err != nil {
		t.Fatal(err)
	}
	if got := v.gpusOf("c-e2e-node"); len(got) != 1 || got[0] == held[0] {
		t.Fatalf("c got %v; the unhealthy GPU is %s", got, held[0])
	}
	writeManifest(t, dir, "d.yaml", gpuPod("d", 1))
	a.waitPod(time.Minute, "d-e2e-node", "Failed with OutOfnvidia.com/gpu", rejectedWith("OutOfnvidia.com/gpu"))
}

// metrics reads the read-only /metrics ("" when it does not answer).
func (a *agent) metrics() string {
	b, _ := a.readMetrics()
	return string(b)
}

// readMetrics reads the read-only /metrics.
func (a *agent) readMetrics() ([]byte, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", a.roPort))
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	return io.ReadAll(resp.Body)
}

// widgetPlugin is a vendor's device plugin as written against the kubelet
// API: two widgets, registered on the kubelet's socket.
type widgetPlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	mu       sync.Mutex
	allocs   [][]string
	prestart int
}

func (p *widgetPlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{PreStartRequired: true}, nil
}

func (p *widgetPlugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: []*pluginapi.Device{
		{ID: "w0", Health: pluginapi.Healthy}, {ID: "w1", Health: pluginapi.Healthy}}}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

func (p *widgetPlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range req.ContainerRequests {
		p.allocs = append(p.allocs, c.DevicesIds)
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"WIDGETS": strings.Join(c.DevicesIds, ",")}})
	}
	return out, nil
}

func (p *widgetPlugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prestart++
	return &pluginapi.PreStartContainerResponse{}, nil
}

// A vendor device plugin registers on <root-dir>/device-plugins/kubelet.sock
// beside the built-in GPUs: its resource joins the node's, a pod asking
// for it gets what the plugin's Allocate answers (after PreStartContainer,
// which the plugin asked for), and a pod asking for more is refused.
func TestE2ESimDevicePlugin(t *testing.T) {
	a := startAgent(t, agentOpts{extra: []string{"--gpus", "none"}})
	sock := filepath.Join(a.rootDir, "device-plugins", "widget.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	plugin := &widgetPlugin{}
	pluginapi.RegisterDevicePluginServer(srv, plugin)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient("unix://"+filepath.Join(a.rootDir, "device-plugins", "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: "widget.sock", ResourceName: "example.com/widget",
		Options: &pluginapi.DevicePluginOptions{PreStartRequired: true}}); err != nil {
		t.Fatalf("register: %v", err)
	}
	testenv.WaitFor(t, time.Minute, "the widgets on the node", func() (bool, error) {
		v, err := a.devices()
		if err != nil {
			return false, err
		}
		return v.Allocatable["example.com/widget"] == 2, fmt.Errorf("%+v", v)
	})
	_, body := a.postPod(t, busyboxPod("w", `command: ["sh", "-c", "echo widgets=$WIDGETS; sleep infinity"]`,
		"resources: {limits: {example.com/widget: 2}}"))
	a.waitPod(time.Minute, "w-e2e-node", "Running: "+body, isRunning)
	if got := a.containerLog("w-e2e-node", "app"); !strings.Contains(got, "widgets=w0,w1") && !strings.Contains(got, "widgets=w1,w0") {
		t.Errorf("the container printed %q: want the plugin's WIDGETS", got)
	}
	plugin.mu.Lock()
	allocs, prestart := len(plugin.allocs), plugin.prestart
	plugin.mu.Unlock()
	if allocs != 1 || prestart != 1 {
		t.Errorf("plugin saw %d Allocate and %d PreStartContainer calls, want 1 and 1", allocs, prestart)
	}
	a.postPod(t, busyboxPod("w2", sleepForever, "resources: {limits: {example.com/widget: 1}}"))
	a.waitPod(time.Minute, "w2-e2e-node", "Failed with OutOfexample.com/widget", rejectedWith("OutOfexample.com/widget"))
}
