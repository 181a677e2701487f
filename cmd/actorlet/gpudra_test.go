package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/actors/devices"
	"github.com/actorlet/actorlet/adapters/host"
	"github.com/actorlet/actorlet/adapters/nvml"
	"github.com/actorlet/actorlet/internal/testenv"
)

// TestGPUDRADriver runs the agent's GPU DRA driver as the agent wires it
// (the DevicesActor on a mock DGX H100, its checkpoint file, the driver's
// sockets) and talks to it as the kubelet does: the registration service
// in <root-dir>/plugins_registry, then NodePrepareResources and
// NodeUnprepareResources at the endpoint it names; across a restart of
// the actor on its checkpoint, and with a GPU an Xid made unhealthy.
func TestGPUDRADriver(t *testing.T) {
	root := t.TempDir()
	devRoot := filepath.Join(root, "dev")
	if err := makeStandIns(devRoot, 2); err != nil {
		t.Fatal(err)
	}
	gpus, err := nvml.Open("mock:dgxh100?count=2", nvml.Options{DevRoot: devRoot, EventWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gpus.Close() })
	infos, err := gpus.GPUInfos()
	if err != nil {
		t.Fatal(err)
	}
	claim := func(name, dev string) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
			Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
				Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: gpuDriverName, Pool: "n1", Device: dev}}}}}}
	}
	cs := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}},
		claim("a", "gpu-0"), claim("b", "gpu-0"), claim("c", "gpu-1"))

	o := defaultOptions()
	o.RootDir, o.CDISpecDir, o.GPUAllocation = root, filepath.Join(root, "cdi"), gpuAllocDRA
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := newGPUDRA(o, "n1", gpus, cs, quiet)
	if err != nil {
		t.Fatal(err)
	}
	sys := actor.NewActorSystem()
	cfg := devices.Config{Providers: []devices.Provider{gpus}, Clock: clock.RealClock{}, SamplePeriod: -1, DRA: d.config(),
		Store: host.FileStore{Path: filepath.Join(root, devicePluginsDir, checkpointName)}}
	spawn := func() *actor.PID {
		pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(devices.New(cfg, quiet)), "devices")
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	pid := spawn()
	d.start(sys, pid)
	t.Cleanup(func() { d.stop(); _ = sys.Root.StopFuture(pid).Wait() })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	slice := func(ok func(*resourceapi.ResourceSlice) bool) {
		t.Helper()
		testenv.WaitFor(t, 30*time.Second, "the node's slice", func() (bool, error) {
			s, err := cs.ResourceV1().ResourceSlices().Get(ctx, "n1-gpu.nvidia.com", metav1.GetOptions{})
			return err == nil && ok(s), err
		})
	}
	slice(func(s *resourceapi.ResourceSlice) bool { return len(s.Spec.Devices) == 2 })

	reg := registerapi.NewRegistrationClient(dialUnix(t, filepath.Join(root, "plugins_registry", "gpu.nvidia.com-reg.sock")))
	info, err := reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != registerapi.DRAPlugin || info.Name != gpuDriverName || info.Endpoint != filepath.Join(root, "plugins", gpuDriverName, "dra.sock") {
		t.Fatalf("plugin info %+v", info)
	}
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	dra := drapb.NewDRAPluginClient(dialUnix(t, info.Endpoint))
	prepare := func(name string) *drapb.NodePrepareResourceResponse {
		t.Helper()
		r, err := dra.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{{Namespace: "ns", Name: name, Uid: "uid-" + name}}})
		if err != nil {
			t.Fatal(err)
		}
		return r.Claims["uid-"+name]
	}
	unprepare := func(name string) {
		t.Helper()
		r, err := dra.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{{Namespace: "ns", Name: name, Uid: "uid-" + name}}})
		if err != nil || r.Claims["uid-"+name].GetError() != "" {
			t.Fatalf("unprepare %s: %v %v", name, err, r)
		}
	}

	a := prepare("a")
	if a.GetError() != "" || len(a.Devices) != 1 || a.Devices[0].DeviceName != "gpu-0" ||
		len(a.Devices[0].CdiDeviceIds) != 1 || a.Devices[0].CdiDeviceIds[0] != "k8s.gpu.nvidia.com/claim=uid-a-gpu-0" {
		t.Fatalf("claim a: %+v", a)
	}
	spec := filepath.Join(o.CDISpecDir, "k8s.gpu.nvidia.com_claim_uid-a.json")
	b, err := os.ReadFile(spec)
	if err != nil || !strings.Contains(string(b), "NVIDIA_VISIBLE_DEVICES="+infos[0].UUID) || !strings.Contains(string(b), `"/dev/nvidia0"`) {
		t.Fatalf("CDI spec of claim a: %v\n%s", err, b)
	}
	if again := prepare("a"); again.GetError() != "" || again.Devices[0].CdiDeviceIds[0] != a.Devices[0].CdiDeviceIds[0] {
		t.Fatalf("claim a again: %+v", again)
	}
	if e := prepare("b").GetError(); !strings.Contains(e, "device in use") {
		t.Fatalf("claim b of gpu-0 held by a: %q", e)
	}

	// The actor restarts on its checkpoint: a stays prepared, gpu-0 held.
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	pid = spawn()
	if e := prepare("b").GetError(); !strings.Contains(e, "device in use") {
		t.Fatalf("after the restart, claim b of gpu-0: %q", e)
	}
	unprepare("a")
	if _, err := os.Stat(spec); !os.IsNotExist(err) {
		t.Fatalf("claim a's spec after unprepare: %v", err)
	}
	if e := prepare("b").GetError(); e != "" {
		t.Fatalf("claim b after a was unprepared: %q", e)
	}

	// An Xid on gpu-1: tainted in the slice, its claim refused.
	if err := gpus.InjectXid(infos[1].UUID, 79); err != nil {
		t.Fatal(err)
	}
	slice(func(s *resourceapi.ResourceSlice) bool {
		return len(s.Spec.Devices) == 2 && len(s.Spec.Devices[1].Taints) == 1
	})
	if e := prepare("c").GetError(); !strings.Contains(e, "device unhealthy") {
		t.Fatalf("claim c of the unhealthy gpu-1: %q", e)
	}
}

func dialUnix(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
