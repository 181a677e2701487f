package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/actorlet/actorlet/internal/testenv"
)

// The built-in GPUs through DRA (--gpu-allocation=dra), on go-nvml's mock
// DGX H100 and the sim runtime, against the real control plane and
// kube-scheduler: the node's ResourceSlice of driver gpu.nvidia.com with
// the GPUs' attributes and no nvidia.com/gpu capacity; then a pod whose
// claim (a DeviceClass selecting the driver) is allocated by the
// scheduler, prepared by the agent's DRA manager through the driver's
// gRPC, and whose container sees NVIDIA_VISIBLE_DEVICES=<the GPU's UUID>
// and the GPU's device node through the claim's CDI spec; the claim is
// unprepared (its CDI spec gone) after the pod is deleted.

const gpuDriver = "gpu.nvidia.com"

// startDRAGPUNode runs the node with two mock H100s served through DRA;
// the claims' CDI specs go to a dir the sim runtime resolves CDI devices
// in. It returns the CDI dir.
func startDRAGPUNode(t *testing.T, c *cluster, name string) (*agent, string) {
	t.Helper()
	root := t.TempDir()
	cdiDir := filepath.Join(root, "cdi")
	a := c.startNode(t, name, agentOpts{rootDir: root, endpoint: "sim://?cdi-spec-dirs=" + cdiDir,
		extra: []string{"--gpus", "mock:dgxh100?count=2", "--gpu-allocation=dra", "--cdi-spec-dir", cdiDir}})
	return a, cdiDir
}

func nodeSlice(t *testing.T, c *cluster, node string, ok func(*resourceapi.ResourceSlice) error) *resourceapi.ResourceSlice {
	t.Helper()
	var got *resourceapi.ResourceSlice
	testenv.WaitFor(t, time.Minute, "the node's ResourceSlice of "+gpuDriver, func() (bool, error) {
		l, err := c.cs.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, err
		}
		for i := range l.Items {
			if s := &l.Items[i]; s.Spec.Driver == gpuDriver {
				got = s
				err := ok(s)
				return err == nil, err
			}
		}
		return false, fmt.Errorf("%d slices, none of %s", len(l.Items), gpuDriver)
	})
	return got
}

func TestE2EClusterGPUDRASlice(t *testing.T) {
	c := newCluster(t)
	const name = "e2e-gpudra-slice"
	a, _ := startDRAGPUNode(t, c, name)
	s := nodeSlice(t, c, name, func(s *resourceapi.ResourceSlice) error {
		if len(s.Spec.Devices) != 2 {
			return fmt.Errorf("%d devices", len(s.Spec.Devices))
		}
		return nil
	})
	if s.Spec.Pool.Name != name || s.Spec.Pool.ResourceSliceCount != 1 || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Node" {
		t.Errorf("slice pool %+v owners %+v", s.Spec.Pool, s.OwnerReferences)
	}
	uuids := map[string]bool{}
	for i, d := range s.Spec.Devices {
		if d.Name != fmt.Sprintf("gpu-%d", i) {
			t.Errorf("device %d named %q", i, d.Name)
		}
		for attr, want := range map[resourceapi.QualifiedName]string{"type": "gpu", "productName": "NVIDIA H100 80GB HBM3", "brand": "Nvidia", "architecture": "Hopper"} {
			if got := ptr.Deref(d.Attributes[attr].StringValue, ""); got != want {
				t.Errorf("%s: %s=%q, want %q", d.Name, attr, got, want)
			}
		}
		if v := ptr.Deref(d.Attributes["cudaComputeCapability"].VersionValue, ""); v != "9.0.0" {
			t.Errorf("%s: cudaComputeCapability %q", d.Name, v)
		}
		if ptr.Deref(d.Attributes["index"].IntValue, -1) != int64(i) {
			t.Errorf("%s: index %v", d.Name, d.Attributes["index"])
		}
		uuids[ptr.Deref(d.Attributes["uuid"].StringValue, "")] = true
		if m := d.Capacity["memory"].Value; m.Value() < 79<<30 {
			t.Errorf("%s: memory %s", d.Name, m.String())
		}
	}
	if len(uuids) != 2 || uuids[""] {
		t.Errorf("UUIDs %v", uuids)
	}
	// The node does not offer the GPUs as an extended resource, and the
	// driver registered through the plugin registry as any driver.
	n := c.waitNodeReady(t, name, v1.ConditionTrue, time.Minute)
	if _, ok := n.Status.Capacity["nvidia.com/gpu"]; ok {
		t.Errorf("capacity %v: nvidia.com/gpu with --gpu-allocation=dra", n.Status.Capacity)
	}
	if _, err := os.Stat(filepath.Join(a.rootDir, "plugins_registry", gpuDriver+"-reg.sock")); err != nil {
		t.Errorf("registration socket: %v", err)
	}
}

// gpuClaimObjects are what docs/GPUS.md tells users to write: a
// DeviceClass of the driver and a ResourceClaimTemplate of one GPU.
func gpuClaimObjects(t *testing.T, c *cluster, class, ns string) {
	t.Helper()
	ctx := context.Background()
	dc := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.nvidia.com"`}}},
	}}
	if _, err := c.cs.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.cs.ResourceV1().DeviceClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "one-gpu", Namespace: ns}, Spec: resourceapi.ResourceClaimTemplateSpec{
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class},
		}}}},
	}}
	if _, err := c.cs.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.cs.ResourceV1().ResourceClaimTemplates(ns).Delete(context.Background(), "one-gpu", metav1.DeleteOptions{})
	})
}

// TestE2EClusterGPUDRAClaim needs the node side of DRA (the agent's DRA
// manager, actors/dra) to prepare the pod's claim.
func TestE2EClusterGPUDRAClaim(t *testing.T) {
	c := newCluster(t)
	const name = "e2e-gpudra-claim"
	_, cdiDir := startDRAGPUNode(t, c, name)
	s := nodeSlice(t, c, name, func(s *resourceapi.ResourceSlice) error {
		if len(s.Spec.Devices) != 2 {
			return fmt.Errorf("%d devices", len(s.Spec.Devices))
		}
		return nil
	})
	uuidOf := map[string]string{}
	for _, d := range s.Spec.Devices {
		uuidOf[d.Name] = ptr.Deref(d.Attributes["uuid"].StringValue, "")
	}
	gpuClaimObjects(t, c, "gpu.nvidia.com", "default")

	ctx := context.Background()
	p := apiPod("cuda-dra", "", simImage, "sh", "-c",
		`echo "visible=$NVIDIA_VISIBLE_DEVICES"; for n in /dev/nvidia0 /dev/nvidia1 /dev/nvidiactl; do test -e $n && echo "node=$n"; done; sleep infinity`)
	p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": name}
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	if _, err := c.cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.cs.CoreV1().Pods("default").Delete(context.Background(), "cuda-dra", metav1.DeleteOptions{})
	})
	got := c.waitPod(t, "default", "cuda-dra", "scheduled with its claim and Running", 2*time.Minute, isRunning)
	if len(got.Status.ResourceClaimStatuses) != 1 || got.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("claim statuses %+v", got.Status.ResourceClaimStatuses)
	}
	claimName := *got.Status.ResourceClaimStatuses[0].ResourceClaimName
	claim, err := c.cs.ResourceV1().ResourceClaims("default").Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := claim.Status.Allocation.Devices.Results
	if len(res) != 1 || res[0].Driver != gpuDriver || res[0].Pool != name {
		t.Fatalf("allocation %+v", res)
	}
	uuid, dev := uuidOf[res[0].Device], strings.TrimPrefix(res[0].Device, "gpu-")

	var logs string
	testenv.WaitFor(t, time.Minute, "the container's view of its GPU", func() (bool, error) {
		out, err := c.cs.CoreV1().Pods("default").GetLogs("cuda-dra", &v1.PodLogOptions{}).DoRaw(ctx)
		logs = string(out)
		return err == nil && strings.Contains(logs, "node=/dev/nvidiactl"), fmt.Errorf("logs %q: %v", logs, err)
	})
	want := "visible=" + uuid + "\nnode=/dev/nvidia" + dev + "\nnode=/dev/nvidiactl\n"
	if logs != want {
		t.Errorf("container sees %q, want %q", logs, want)
	}
	spec := filepath.Join(cdiDir, "k8s.gpu.nvidia.com_claim_"+string(claim.UID)+".json")
	if _, err := os.Stat(spec); err != nil {
		t.Fatalf("the claim's CDI spec: %v", err)
	}

	zero := int64(0)
	if err := c.cs.CoreV1().Pods("default").Delete(ctx, "cuda-dra", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "the claim unprepared (its CDI spec removed)", func() (bool, error) {
		_, err := os.Stat(spec)
		return os.IsNotExist(err), err
	})
}
