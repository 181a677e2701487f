package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// cdiPlugin is a device plugin that hands its one device to containers by
// CDI name only (no env, no device nodes, no mounts of its own): what the
// container gets is what the runtime makes of the CDI spec.
type cdiPlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	resource, cdiName string
}

func (p *cdiPlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *cdiPlugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: []*pluginapi.Device{{ID: "dev0", Health: pluginapi.Healthy}}}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

func (p *cdiPlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for range req.ContainerRequests {
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			CdiDevices: []*pluginapi.CDIDevice{{Name: p.cdiName}}})
	}
	return out, nil
}

// serveCDIPlugin serves p on the agent's device-plugin directory, registers
// it on the agent's kubelet.sock and waits until the node offers it.
func serveCDIPlugin(t *testing.T, a *agent, p *cdiPlugin) {
	t.Helper()
	sock := filepath.Join(a.rootDir, "device-plugins", "cdi-dev.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
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
		Version: pluginapi.Version, Endpoint: "cdi-dev.sock", ResourceName: p.resource}); err != nil {
		t.Fatalf("register: %v", err)
	}
	testenv.WaitFor(t, time.Minute, p.resource+" on the node", func() (bool, error) {
		v, err := a.devices()
		if err != nil {
			return false, err
		}
		return v.Allocatable[p.resource] == 1, fmt.Errorf("%+v", v)
	})
}

// cdiPod asks for one example.com/dev and prints what the CDI spec gives.
func cdiPod(image string) string {
	return `apiVersion: v1
kind: Pod
metadata:
  name: cdi
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: ` + image + `
    command: ["sh", "-c", "echo cdi-env=$ACTORLET_CDI_DEV; echo cdi-mount=$(cat /cdi/payload); sleep 3600"]
    resources:
      limits: {example.com/dev: 1}
`
}

// On containerd 2.x (CDI on), a device plugin that answers Allocate with a
// CDI name only gets the device into the container: actorlet passes the name
// in the CRI config's CDIDevices, and containerd applies the spec written to
// CDI_SPEC_DIR (an environment variable and a bind mount), which the
// container prints. The runtime's CRI Version is the pinned containerd.
func TestE2EContainerd2CDIDevice(t *testing.T) {
	env := testenv.ContainerdOnLine(t, 2, "alcdi2", "10.244.183.0/24")
	if env.CDISpecDir == "" {
		t.Fatalf("containerd line 2 printed no CDI_SPEC_DIR: %+v", env)
	}
	payload := filepath.Join(t.TempDir(), "payload")
	if err := os.WriteFile(payload, []byte("from-the-cdi-spec\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A spec of the kind example.com/dev, as a DRA driver or device plugin
	// writes it (cdiVersion 0.6.0: containerd 2.4 reads up to 1.1.0).
	spec := filepath.Join(env.CDISpecDir, "actorlet-e2e-example.com-dev.json")
	if err := os.WriteFile(spec, []byte(`{"cdiVersion": "0.6.0", "kind": "example.com/dev", "devices": [{"name": "dev0",
 "containerEdits": {"env": ["ACTORLET_CDI_DEV=dev0"],
  "mounts": [{"hostPath": "`+payload+`", "containerPath": "/cdi/payload", "options": ["ro", "bind"]}]}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(spec) })

	dir := t.TempDir()
	a := startAgent(t, agentOpts{endpoint: env.Endpoint, manifestDir: dir, extra: []string{"--gpus", "none"}})
	v, err := a.runtime().Version(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := pinnedContainerd2(t); v.RuntimeName != "containerd" || v.RuntimeVersion != want {
		t.Errorf("CRI Version: %s %s, want containerd %s", v.RuntimeName, v.RuntimeVersion, want)
	}
	serveCDIPlugin(t, a, &cdiPlugin{resource: "example.com/dev", cdiName: "example.com/dev=dev0"})
	writeManifest(t, dir, "cdi.yaml", cdiPod(env.BusyboxImage))
	p := a.waitPod(2*time.Minute, "cdi-e2e-node", "Running", isRunning)
	defer cleanupPods(t, a, dir, string(p.UID))
	testenv.WaitFor(t, time.Minute, "the container's output", func() (bool, error) {
		log := a.containerLog("cdi-e2e-node", "app")
		return strings.Contains(log, "cdi-env=dev0\n") && strings.Contains(log, "cdi-mount=from-the-cdi-spec\n"),
			fmt.Errorf("log %q", log)
	})
}

// On Debian's containerd 1.6 (no CDI: it drops CDIDevices without a word),
// actorlet knows from the runtime's Version that it cannot inject CDI
// devices and does not create the container: it waits with
// CreateContainerConfigError naming the device and the reason, and the
// runtime holds no container of the pod.
func TestE2EContainerdCDIRefusedOn16(t *testing.T) {
	env := testenv.ContainerdOnLine(t, 1, "alcdi1", "10.244.184.0/24")
	dir := t.TempDir()
	a := startAgent(t, agentOpts{endpoint: env.Endpoint, manifestDir: dir, extra: []string{"--gpus", "none"}})
	serveCDIPlugin(t, a, &cdiPlugin{resource: "example.com/dev", cdiName: "example.com/dev=dev0"})
	writeManifest(t, dir, "cdi.yaml", cdiPod(env.BusyboxImage))
	p := a.waitPod(2*time.Minute, "cdi-e2e-node", "CreateContainerConfigError naming CDI", func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "CreateContainerConfigError" &&
			strings.Contains(w.Message, "example.com/dev=dev0") && strings.Contains(w.Message, "CDI needs containerd 1.7 or later")
	})
	defer cleanupPods(t, a, dir, string(p.UID))
	if cs := containersOf(t, a.runtime(), string(p.UID)); len(cs) != 0 {
		t.Errorf("the runtime holds %d containers of the pod, want none: %v", len(cs), cs)
	}
	if !a.logContains("cannot inject CDI devices") {
		t.Errorf("the agent did not name at start that its runtime cannot inject CDI devices:\n%s", a.logTail(20))
	}
}

// pinnedContainerd2 is the containerd version deploy/containerd2/go.mod pins.
func pinnedContainerd2(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "deploy", "containerd2", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "github.com/containerd/containerd/v2" {
			return f[1]
		}
	}
	t.Fatal("deploy/containerd2/go.mod pins no github.com/containerd/containerd/v2")
	return ""
}
