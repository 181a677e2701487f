package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actorlet/actorlet/internal/testenv"
)

// On containerd, a pod asking for simulated GPUs gets them as NVIDIA's
// device plugin gives them: NVIDIA_VISIBLE_DEVICES with the GPUs' UUIDs
// and the device nodes /dev/nvidia<N>, /dev/nvidiactl, /dev/nvidia-uvm and
// /dev/nvidia-uvm-tools in the container. The host nodes are stand-ins
// actorlet makes for simulated GPUs under <root-dir>/mock-gpus/dev
// (character devices with /dev/null's numbers, 1:3): runc creates them in
// the container from the CRI config's device list, so what the container
// lists is what the CRI was asked for.
func TestE2EContainerdGPUs(t *testing.T) {
	dir := t.TempDir()
	a, image := startContainerdAgent(t, dir, "--gpus", "mock:dgxh100?count=2")
	writeManifest(t, dir, "gpu.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: cuda
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: `+image+`
    command: ["sh", "-c", "echo gpus=$NVIDIA_VISIBLE_DEVICES; ls -l /dev/nvidia0 /dev/nvidia1 /dev/nvidiactl /dev/nvidia-uvm /dev/nvidia-uvm-tools; sleep 3600"]
    resources:
      limits: {nvidia.com/gpu: 2}
`)
	p := a.waitPod(2*time.Minute, "cuda-e2e-node", "Running", isRunning)
	defer cleanupPods(t, a, dir, string(p.UID))
	v, err := a.devices()
	if err != nil {
		t.Fatal(err)
	}
	gpus := v.gpusOf("cuda-e2e-node")
	if len(gpus) != 2 {
		t.Fatalf("the pod holds %v, want 2 GPUs", gpus)
	}
	var log string
	testenv.WaitFor(t, time.Minute, "the container's listing", func() (bool, error) {
		log = a.containerLog("cuda-e2e-node", "app")
		return strings.Contains(log, "nvidia-uvm-tools"), fmt.Errorf("log %q", log)
	})
	for _, id := range gpus {
		if !strings.Contains(log, id) {
			t.Errorf("NVIDIA_VISIBLE_DEVICES lacks %s: %q", id, log)
		}
	}
	for _, dev := range []string{"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"} {
		found := false
		for _, line := range strings.Split(log, "\n") {
			// busybox ls -l of a character device: "crw-rw-rw-    1 root root 1,   3 ... /dev/nvidia0"
			if strings.HasPrefix(line, "c") && strings.HasSuffix(strings.TrimSpace(line), dev) {
				found = true
			}
		}
		if !found {
			t.Errorf("no character device %s in the container:\n%s", dev, log)
		}
	}
}
