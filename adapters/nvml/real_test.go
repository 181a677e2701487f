package nvml_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/actorlet/actorlet/adapters/nvml"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// TestRealGPU is the check someone with an NVIDIA GPU runs:
//
//	go test -run TestRealGPU -v ./adapters/nvml/
//
// It skips only where NVML reports no library or no GPU.
func TestRealGPU(t *testing.T) {
	g, err := nvml.Open("nvml", nvml.Options{EventWait: 200 * time.Millisecond})
	if errors.Is(err, nvml.ErrNoLibrary) || errors.Is(err, nvml.ErrNoDevices) {
		t.Skipf("no NVIDIA GPU on this machine: %v", err)
	}
	if err != nil {
		t.Fatalf("Open(nvml): %v", err)
	}
	defer func() {
		if err := g.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()

	list := firstList(t, g)
	if len(list) == 0 || len(list) != g.Count() {
		t.Fatalf("Watch's first list: %v, want the %d GPUs found", list, g.Count())
	}
	for i, d := range list {
		t.Logf("GPU %d: %s health %s topology %v", i, d.ID, d.Health, d.Topology)
		if !uuidForm.MatchString(d.ID) {
			t.Errorf("GPU %d UUID %q is not of the GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx form", i, d.ID)
		}
		if d.Health != pluginapi.Healthy {
			t.Errorf("GPU %d is %s at start", i, d.Health)
		}
	}
	labels, annotations := g.Describe()
	t.Logf("labels: %v", labels)
	t.Logf("annotations: %v", annotations)
	for _, k := range []string{"nvidia.com/gpu.product", "nvidia.com/gpu.memory", "nvidia.com/gpu.family", "nvidia.com/gpu.compute.major"} {
		if labels[k] == "" {
			t.Errorf("label %s missing", k)
		}
	}
	if len(annotations) != len(list) {
		t.Errorf("%d annotations for %d GPUs", len(annotations), len(list))
	}

	resp, err := g.Allocate(context.Background(), []string{list[0].ID})
	if err != nil {
		t.Fatalf("Allocate(%s): %v", list[0].ID, err)
	}
	t.Logf("Allocate(%s): envs %v", list[0].ID, resp.Envs)
	for _, d := range resp.Devices {
		t.Logf("  device %s <- %s (%s)", d.ContainerPath, d.HostPath, d.Permissions)
		if _, err := os.Stat(d.HostPath); err != nil {
			t.Errorf("device node %s: %v", d.HostPath, err)
		}
	}
	if resp.Envs["NVIDIA_VISIBLE_DEVICES"] != list[0].ID || len(resp.Devices) == 0 {
		t.Errorf("Allocate: envs %v devices %d, want NVIDIA_VISIBLE_DEVICES=%s and its device nodes", resp.Envs, len(resp.Devices), list[0].ID)
	}

	sample, err := g.Sample(context.Background())
	if err != nil {
		t.Fatalf("Sample: %v", err)
	}
	t.Logf("sample: %v", sample)
	if _, ok := sample[list[0].ID]["DCGM_FI_DEV_FB_FREE"]; !ok {
		t.Errorf("Sample of %s has no DCGM_FI_DEV_FB_FREE: %v", list[0].ID, sample[list[0].ID])
	}
	if err := g.InjectXid(list[0].ID, 79); !errors.Is(err, nvml.ErrNotSimulated) {
		t.Errorf("InjectXid on a real GPU: %v, want ErrNotSimulated", err)
	}
}
