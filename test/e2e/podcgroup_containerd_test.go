package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/internal/cgroupdir"
	"github.com/actorlet/actorlet/internal/testenv"
)

// TestE2EContainerdPodCgroupBurstable: on real containerd the agent makes
// a burstable pod's cgroup under its --cgroup-root, read straight from
// /sys/fs/cgroup: kubepods/burstable/pod<uid> with cpu.shares from the
// pod's CPU request (250m: 256 shares) and the container inside it; the
// cgroup is gone once the pod is deleted.
func TestE2EContainerdPodCgroupBurstable(t *testing.T) {
	dir := t.TempDir()
	// Image GC off: on a disk over 85% full it would remove the pause
	// image before the sandbox needs it (this test is about cgroups).
	a, image := startContainerdAgent(t, dir, "--image-gc-high-threshold", "100")
	if a.cgroupRoot == "" {
		t.Fatal("the agent on containerd got no --cgroup-root")
	}
	writeManifest(t, dir, "burst.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: burst
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: `+image+`
    command: ["sleep", "3600"]
    resources:
      requests: {cpu: 250m, memory: 16Mi}
`)
	p := a.waitPod(2*time.Minute, "burst-e2e-node", "Running", isRunning)
	if p.Status.QOSClass != v1.PodQOSBurstable {
		t.Fatalf("QoS %s, want Burstable", p.Status.QOSClass)
	}
	pod := filepath.Join(a.cgroupRoot, "kubepods", "burstable", "pod"+string(p.UID))
	cpuDir, ok := cgroupdir.Exists("cpu", pod)
	if !ok {
		t.Fatalf("no pod cgroup %s in the cpu hierarchy", pod)
	}
	if got := readCgroupInt(t, cpuDir, "cpu.shares"); got != 256 {
		t.Errorf("%s/cpu.shares = %d, want 256 (250m * 1024 / 1000)", cpuDir, got)
	}
	// The pod's container runs inside it (containerd put it under the
	// parent the sandbox was given).
	procs := 0
	_ = filepath.WalkDir(cpuDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "cgroup.procs" {
			b, _ := os.ReadFile(path)
			procs += len(strings.Fields(string(b)))
		}
		return nil
	})
	if procs == 0 {
		t.Errorf("no process under %s", cpuDir)
	}
	// kubepods is sized from node allocatable: its cpu.shares from the
	// node's CPUs (no reservation here: capacity).
	kubepods, _ := cgroupdir.Exists("cpu", filepath.Join(a.cgroupRoot, "kubepods"))
	if got := readCgroupInt(t, kubepods, "cpu.shares"); got < 1024 {
		t.Errorf("kubepods cpu.shares %d: not sized from the node's CPUs", got)
	}

	cleanupPods(t, a, dir, string(p.UID))
	testenv.WaitFor(t, 60*time.Second, "pod cgroup removed", func() (bool, error) {
		for _, c := range []string{"cpu", "memory", "pids"} {
			if d, ok := cgroupdir.Exists(c, pod); ok {
				return false, fmt.Errorf("%s still there", d)
			}
		}
		return true, nil
	})
}

func readCgroupInt(t *testing.T, dir, file string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s/%s: %v", dir, file, err)
	}
	return n
}
