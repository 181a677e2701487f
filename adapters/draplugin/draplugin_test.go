package draplugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/actorlet/actorlet/adapters/nvml"
)

const driver = "gpu.nvidia.com"

func openMock(t *testing.T) (*nvml.GPUs, []nvml.GPUInfo, string) {
	t.Helper()
	dev := t.TempDir()
	for _, n := range []string{"nvidia0", "nvidia1", "nvidiactl"} {
		if err := os.WriteFile(filepath.Join(dev, n), nil, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	g, err := nvml.Open("mock:dgxh100?count=2", nvml.Options{DevRoot: dev})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	infos, err := g.GPUInfos()
	if err != nil {
		t.Fatal(err)
	}
	return g, infos, dev
}

// TestGPUDeviceAttributes: a mock DGX H100's GPUs as NVIDIA's DRA driver
// publishes them.
func TestGPUDeviceAttributes(t *testing.T) {
	_, infos, _ := openMock(t)
	if len(infos) != 2 {
		t.Fatalf("%d GPUs, want 2", len(infos))
	}
	d := GPUDevice(infos[1], true)
	want := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"type":                  {StringValue: ptr.To("gpu")},
		"uuid":                  {StringValue: ptr.To(infos[1].UUID)},
		"index":                 {IntValue: ptr.To(int64(1))},
		"minor":                 {IntValue: ptr.To(int64(1))},
		"productName":           {StringValue: ptr.To("NVIDIA H100 80GB HBM3")},
		"brand":                 {StringValue: ptr.To("Nvidia")},
		"architecture":          {StringValue: ptr.To("Hopper")},
		"pcieBusID":             {StringValue: ptr.To("0000:43:00.0")},
		"cudaComputeCapability": {VersionValue: ptr.To("9.0.0")},
		"driverVersion":         {VersionValue: ptr.To("550.54.15")},
		"cudaDriverVersion":     {VersionValue: ptr.To("12.4.0")},
	}
	if d.Name != "gpu-1" || !reflect.DeepEqual(d.Attributes, want) {
		t.Errorf("device %s attributes %v, want gpu-1 %v", d.Name, d.Attributes, want)
	}
	if mem := d.Capacity["memory"].Value; mem.Cmp(*resource.NewQuantity(int64(infos[1].MemoryBytes), resource.BinarySI)) != 0 || infos[1].MemoryBytes < 79<<30 {
		t.Errorf("memory capacity %s (%d bytes from NVML)", mem.String(), infos[1].MemoryBytes)
	}
	for in, out := range map[string]string{"9.0": "9.0.0", "550.54.15": "550.54.15", "12": "12.0.0", "08.1": "8.1.0", "": "", "1.2.3.4": "", "r550": ""} {
		if got := semver(in); got != out {
			t.Errorf("semver(%q) = %q, want %q", in, got, out)
		}
	}
}

// TestPublisher writes the node's slice, owned by the Node, and updates it
// with the pool's generation raised when a GPU turns unhealthy (tainted).
func TestPublisher(t *testing.T) {
	_, infos, _ := openMock(t)
	cs := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}})
	p := NewPublisher(cs, driver, "n1", nil, nil)
	t.Cleanup(p.Close)
	p.Set([]SliceDevice{GPUDevice(infos[0], true), GPUDevice(infos[1], true)})
	s := waitSlice(t, cs, func(s *resourceapi.ResourceSlice) bool { return len(s.Spec.Devices) == 2 })
	if s.Name != "n1-gpu.nvidia.com" || s.Spec.Driver != driver || ptr.Deref(s.Spec.NodeName, "") != "n1" ||
		s.Spec.Pool.Name != "n1" || s.Spec.Pool.Generation != 1 || s.Spec.Pool.ResourceSliceCount != 1 {
		t.Fatalf("slice %s spec %+v", s.Name, s.Spec)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "node-uid" || s.OwnerReferences[0].Kind != "Node" {
		t.Fatalf("owner %+v, want the Node", s.OwnerReferences)
	}
	sick := GPUDevice(infos[1], false)
	sick.Why = "Xid 79 (GPU has fallen off the bus)"
	p.Set([]SliceDevice{GPUDevice(infos[0], true), sick})
	s = waitSlice(t, cs, func(s *resourceapi.ResourceSlice) bool { return s.Spec.Pool.Generation == 2 })
	if len(s.Spec.Devices[0].Taints) != 0 {
		t.Errorf("healthy gpu-0 tainted: %v", s.Spec.Devices[0].Taints)
	}
	want := []resourceapi.DeviceTaint{{Key: UnhealthyTaintKey, Value: "Xid_79_GPU_has_fallen_off_the_bus", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	if !reflect.DeepEqual(s.Spec.Devices[1].Taints, want) {
		t.Errorf("gpu-1 taints %v, want %v", s.Spec.Devices[1].Taints, want)
	}
	// Deleted by someone else (the node's DRA manager at its start): written again.
	if err := cs.ResourceV1().ResourceSlices().Delete(context.Background(), s.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s = waitSlice(t, cs, func(s *resourceapi.ResourceSlice) bool { return len(s.Spec.Devices) == 2 })
	if len(s.Spec.Devices[1].Taints) != 1 {
		t.Errorf("written again without the taint: %+v", s.Spec.Devices[1])
	}
}

func waitSlice(t *testing.T, cs *fake.Clientset, ok func(*resourceapi.ResourceSlice) bool) *resourceapi.ResourceSlice {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := cs.ResourceV1().ResourceSlices().Get(context.Background(), "n1-gpu.nvidia.com", metav1.GetOptions{})
		if err == nil && ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("slice not as wanted: %v %+v", err, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cdiPreparer prepares as the DevicesActor does, without the actor: CDI
// IDs by claim and device, the spec written by the CDIWriter.
type cdiPreparer struct {
	w        *CDIWriter
	mu       sync.Mutex
	prepared map[string]bool
}

func (p *cdiPreparer) Prepare(_ context.Context, claims []Claim) (map[string]Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]Result{}
	for _, c := range claims {
		devs := make([]Device, len(c.Devices))
		for i, d := range c.Devices {
			d.CDIDevices = []string{p.w.Kind + "=" + c.UID + "-" + d.Name}
			devs[i] = d
		}
		if err := p.w.Write(c.UID, devs); err != nil {
			out[c.UID] = Result{Err: err}
			continue
		}
		p.prepared[c.UID] = true
		out[c.UID] = Result{Devices: devs}
	}
	return out, nil
}

func (p *cdiPreparer) Unprepare(_ context.Context, claims []Claim) (map[string]error, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]error{}
	for _, c := range claims {
		delete(p.prepared, c.UID)
		out[c.UID] = p.w.Remove(c.UID)
	}
	return out, nil
}

func allocatedClaim(name, uid string, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
		Status:     resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}},
	}
}

func result(req, pool, dev string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: req, Driver: driver, Pool: pool, Device: dev}
}

// TestServerOverSocket talks to the driver as the kubelet does: the
// registration service on the socket in the registry dir, then the DRA
// v1 service at the endpoint it names.
func TestServerOverSocket(t *testing.T) {
	g, infos, devRoot := openMock(t)
	root := t.TempDir()
	cdiDir := filepath.Join(root, "cdi")
	unalloc := allocatedClaim("unalloc", "u-unalloc")
	unalloc.Status.Allocation = nil
	cs := fake.NewClientset(
		allocatedClaim("one", "u-one", result("gpu", "n1", "gpu-1")),
		allocatedClaim("unknown", "u-unknown", result("gpu", "n1", "gpu-9")),
		allocatedClaim("elsewhere", "u-elsewhere", result("gpu", "n2", "gpu-0")),
		allocatedClaim("recreated", "u-new", result("gpu", "n1", "gpu-0")),
		unalloc,
	)
	byName := map[string]string{}
	for _, i := range infos {
		byName[i.Name] = i.UUID
	}
	w := &CDIWriter{Dir: cdiDir, Kind: "k8s.gpu.nvidia.com/claim", Node: g.GPUNode, Control: g.ControlNodes}
	srv := New(Config{
		Driver: driver, NodeName: "n1",
		PluginDir: filepath.Join(root, "plugins", driver), RegistryDir: filepath.Join(root, "plugins_registry"),
		Claims: func(ctx context.Context, ns, name string) (*resourceapi.ResourceClaim, error) {
			return cs.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Resolve:  func(d string) (string, bool) { id, ok := byName[d]; return id, ok },
		Preparer: &cdiPreparer{w: w, prepared: map[string]bool{}},
	})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	entries, err := os.ReadDir(filepath.Join(root, "plugins_registry"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("registry dir: %v %v", entries, err)
	}
	reg := registerapi.NewRegistrationClient(dial(t, filepath.Join(root, "plugins_registry", entries[0].Name())))
	info, err := reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != registerapi.DRAPlugin || info.Name != driver || !reflect.DeepEqual(info.SupportedVersions, []string{drapb.DRAPluginService, drapbv1beta1.DRAPluginService}) {
		t.Fatalf("plugin info %+v", info)
	}
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := srv.Registered(); !ok {
		t.Error("registration status not kept")
	}

	dra := drapb.NewDRAPluginClient(dial(t, info.Endpoint))
	claim := func(name, uid string) *drapb.Claim { return &drapb.Claim{Namespace: "ns", Name: name, Uid: uid} }
	resp, err := dra.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{
		claim("one", "u-one"), claim("unknown", "u-unknown"), claim("elsewhere", "u-elsewhere"),
		claim("recreated", "u-old"), claim("unalloc", "u-unalloc"), claim("gone", "u-gone"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	wantDev := []*drapb.Device{{RequestNames: []string{"gpu"}, PoolName: "n1", DeviceName: "gpu-1", CdiDeviceIds: []string{"k8s.gpu.nvidia.com/claim=u-one-gpu-1"}}}
	if got := resp.Claims["u-one"]; got.GetError() != "" || len(got.GetDevices()) != 1 || !reflect.DeepEqual(got.Devices[0].CdiDeviceIds, wantDev[0].CdiDeviceIds) ||
		got.Devices[0].DeviceName != "gpu-1" || got.Devices[0].PoolName != "n1" || !reflect.DeepEqual(got.Devices[0].RequestNames, []string{"gpu"}) {
		t.Fatalf("claim one: %+v", got)
	}
	for uid, want := range map[string]string{"u-unknown": "unknown device", "u-elsewhere": "not this node's", "u-old": "recreated",
		"u-unalloc": "not allocated", "u-gone": "not found"} {
		if e := resp.Claims[uid].GetError(); !strings.Contains(e, want) {
			t.Errorf("claim %s: error %q, want it to say %q", uid, e, want)
		}
	}

	// The spec: the GPU's node, NVIDIA_VISIBLE_DEVICES, the control node.
	var spec CDISpec
	b, err := os.ReadFile(w.SpecPath("u-one"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	wantSpec := CDISpec{Version: "0.5.0", Kind: "k8s.gpu.nvidia.com/claim",
		Devices: []CDIDevice{{Name: "u-one-gpu-1", ContainerEdits: CDIEdits{DeviceNodes: []CDIDeviceNode{{Path: "/dev/nvidia1", HostPath: filepath.Join(devRoot, "nvidia1"), Permissions: "rw"}}}}},
		ContainerEdits: &CDIEdits{Env: []string{"NVIDIA_VISIBLE_DEVICES=" + infos[1].UUID},
			DeviceNodes: []CDIDeviceNode{{Path: "/dev/nvidiactl", HostPath: filepath.Join(devRoot, "nvidiactl"), Permissions: "rw"}}}}
	if !reflect.DeepEqual(spec, wantSpec) {
		t.Fatalf("CDI spec %+v, want %+v", spec, wantSpec)
	}

	// The v1beta1 service answers the same (a kubelet that speaks only it).
	old := drapbv1beta1.NewDRAPluginClient(dial(t, info.Endpoint))
	oldResp, err := old.NodePrepareResources(ctx, &drapbv1beta1.NodePrepareResourcesRequest{Claims: []*drapbv1beta1.Claim{{Namespace: "ns", Name: "one", Uid: "u-one"}}})
	if err != nil || oldResp.Claims["u-one"].GetError() != "" || len(oldResp.Claims["u-one"].GetDevices()) != 1 ||
		!reflect.DeepEqual(oldResp.Claims["u-one"].Devices[0].CdiDeviceIds, wantDev[0].CdiDeviceIds) {
		t.Fatalf("v1beta1 prepare: %v %+v", err, oldResp)
	}
	un, err := dra.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{claim("one", "u-one")}})
	if err != nil || un.Claims["u-one"].GetError() != "" {
		t.Fatalf("unprepare: %v %+v", err, un)
	}
	if _, err := os.Stat(w.SpecPath("u-one")); !os.IsNotExist(err) {
		t.Fatalf("spec after unprepare: %v", err)
	}
	srv.Stop()
	if _, err := os.Stat(srv.RegistrationSocket()); !os.IsNotExist(err) {
		t.Errorf("registration socket left after Stop: %v", err)
	}
}

func dial(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
