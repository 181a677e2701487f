package e2e

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/adapters/nvml"
)

// The real-GPU check (README "GPUs"): on a machine with the NVIDIA driver
// and at least one GPU, actorlet (--gpus nvml, pods on the simulated
// runtime, so no container runtime is needed) finds the GPUs with their
// UUIDs, a pod asking for all of them gets them, and a second pod asking
// for one is refused. It skips only where NVML reports no library or no
// GPU, and says so; CI has neither.
//
//	go test -run 'TestRealGPU|TestE2ERealGPU' -v ./adapters/nvml/ ./test/e2e/
func TestE2ERealGPU(t *testing.T) {
	g, err := nvml.Open("nvml", nvml.Options{})
	if errors.Is(err, nvml.ErrNoLibrary) || errors.Is(err, nvml.ErrNoDevices) {
		t.Skipf("no NVIDIA GPU on this machine: %v", err)
	}
	if err != nil {
		t.Fatalf("NVML: %v", err)
	}
	n := g.Count()
	_ = g.Close()
	dir := t.TempDir()
	writeManifest(t, dir, "all.yaml", gpuPod("all", n))
	a := startAgent(t, agentOpts{manifestDir: dir, extra: []string{"--gpus", "nvml"}})
	a.waitPod(2*time.Minute, "all-e2e-node", "Running with every GPU", isRunning)
	v, err := a.devices()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("GPUs: %v", v.Healthy["nvidia.com/gpu"])
	t.Logf("labels: %v", v.Labels)
	got := v.gpusOf("all-e2e-node")
	if int64(len(got)) != v.Capacity["nvidia.com/gpu"] || len(got) != n {
		t.Fatalf("the pod holds %v; capacity %d, NVML found %d", got, v.Capacity["nvidia.com/gpu"], n)
	}
	log := a.containerLog("all-e2e-node", "app")
	t.Logf("the pod printed: %s", strings.TrimSpace(log))
	for _, id := range got {
		if !strings.HasPrefix(id, "GPU-") || !strings.Contains(log, id) {
			t.Errorf("GPU %s: not a UUID, or not in the pod's NVIDIA_VISIBLE_DEVICES (%q)", id, log)
		}
	}
	writeManifest(t, dir, "one-more.yaml", gpuPod("one-more", 1))
	p := a.waitPod(time.Minute, "one-more-e2e-node", "Failed with OutOfnvidia.com/gpu", rejectedWith("OutOfnvidia.com/gpu"))
	t.Logf("second pod: %s: %s", p.Status.Reason, p.Status.Message)
}

// Twelve pods pushed at once, one GPU each, on eight simulated GPUs:
// exactly eight run, each with its own GPU, and four are refused.
func TestE2ESimGPUsConcurrentStarts(t *testing.T) {
	a := startAgent(t, agentOpts{extra: []string{"--gpus", "mock:dgxh100"}})
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.postPod(t, gpuPod(fmt.Sprintf("p%d", i), 1))
		}()
	}
	wg.Wait()
	running, refused := 0, 0
	for i := range 12 {
		p := a.waitPod(time.Minute, fmt.Sprintf("p%d-e2e-node", i), "Running or refused", func(p *v1.Pod) bool {
			return isRunning(p) || rejectedWith("OutOfnvidia.com/gpu")(p)
		})
		if isRunning(p) {
			running++
		} else {
			refused++
		}
	}
	v, err := a.devices()
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]string{}
	for _, p := range v.Pods {
		for _, id := range v.gpusOf(p.Name) {
			if other, ok := held[id]; ok {
				t.Errorf("GPU %s given to %s and %s", id, other, p.Name)
			}
			held[id] = p.Name
		}
	}
	if running != 8 || refused != 4 || len(held) != 8 {
		t.Fatalf("%d running, %d refused, %d GPUs held: want 8, 4, 8", running, refused, len(held))
	}
}
