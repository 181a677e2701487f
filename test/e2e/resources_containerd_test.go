package e2e

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// Stats and eviction on a real containerd: the figures of /stats/summary
// against the kernel's own (the container's cgroup, the root cgroup,
// /proc/meminfo, statfs), and a real memory hog evicted by a threshold
// set relative to the machine's memory.

const (
	rcMi = 1 << 20
	rcGi = 1 << 30
	// rcCgroupRoot is where the cgroup v1 hierarchies are mounted.
	rcCgroupRoot = "/sys/fs/cgroup"
)

// rcHoldMemory is a busybox-only way to hold n MiB: busybox tail buffers
// its whole input while it has no newline and no end, so the memory stays
// in tail's heap (anonymous, in the container's working set) until the
// container dies. dd piped to sleep would hold nothing.
func rcHoldMemory(n int) string {
	return fmt.Sprintf("(head -c %dm /dev/zero; sleep 3600) | tail", n)
}

// rcPodStats finds a pod's stats in a Summary by UID.
func rcPodStats(s *statsapi.Summary, uid string) *statsapi.PodStats {
	for i := range s.Pods {
		if s.Pods[i].PodRef.UID == uid {
			return &s.Pods[i]
		}
	}
	return nil
}

// rcCgroupOf finds a container's cgroup v1 directory of a controller
// (memory, cpuacct) from its runtime ID alone: containerd puts it under the
// pod's cgroup parent, [/<cgroup root>]/kubepods[/<qos>]/pod<uid>/<container id>
// (the harness gives every agent on containerd a cgroup root of its own).
func rcCgroupOf(t *testing.T, controller, id string) string {
	t.Helper()
	for _, pattern := range []string{"kubepods/pod*/" + id, "kubepods/*/pod*/" + id, "*/kubepods/pod*/" + id, "*/kubepods/*/pod*/" + id} {
		m, err := filepath.Glob(filepath.Join(rcCgroupRoot, controller, pattern))
		if err != nil {
			t.Fatal(err)
		}
		if len(m) == 1 {
			return m[0]
		}
	}
	t.Fatalf("no %s cgroup of container %s under %s/%s/kubepods", controller, id, rcCgroupRoot, controller)
	return ""
}

func rcReadUint(t *testing.T, path string) uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// rcKeyed reads a "key value" file (memory.stat, /proc/meminfo) as numbers;
// meminfo's "kB" is applied.
func rcKeyed(t *testing.T, path string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		if len(f) == 3 && f[2] == "kB" {
			v *= 1024
		}
		out[strings.TrimSuffix(f[0], ":")] = v
	}
	return out
}

// rcMemory is a v1 memory cgroup's usage and working set (usage minus
// total_inactive_file, as cadvisor and containerd compute it).
func rcMemory(t *testing.T, dir string) (usage, workingSet uint64) {
	t.Helper()
	usage = rcReadUint(t, filepath.Join(dir, "memory.usage_in_bytes"))
	inactive := rcKeyed(t, filepath.Join(dir, "memory.stat"))["total_inactive_file"]
	return usage, usage - min(inactive, usage)
}

// rcCgroupV1 reports a cgroup v1 memory hierarchy (what these checks read).
func rcCgroupV1(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(rcCgroupRoot, "memory", "memory.usage_in_bytes")); err != nil {
		t.Fatalf("these checks read cgroup v1 files and this host has none (%v): containerd tests run on cgroup v1 hosts", err)
	}
}

// rcNodeAvailable is the node's memory.available as the eviction manager
// computes it: MemTotal minus the root cgroup's working set.
func rcNodeAvailable(t *testing.T) int64 {
	t.Helper()
	total := rcKeyed(t, "/proc/meminfo")["MemTotal"]
	_, ws := rcMemory(t, filepath.Join(rcCgroupRoot, "memory"))
	return int64(total) - int64(ws)
}

// within reports whether v lies in [lo-tol, hi+tol].
func rcWithin(v, lo, hi, tol uint64) bool {
	return v+tol >= lo && v <= hi+tol
}

func rcU(p *uint64) uint64 {
	if p == nil {
		return math.MaxUint64
	}
	return *p
}

// TestE2EContainerdStatsSummary: a busy busybox container (150 MiB held by
// tail, a shell loop burning CPU under a 200m limit) has figures in
// /stats/summary and /metrics/resource that match its cgroup's own files,
// and the node's figures match the root cgroup, /proc/meminfo and statfs of
// the root dir.
func TestE2EContainerdStatsSummary(t *testing.T) {
	rcCgroupV1(t)
	dir := t.TempDir()
	a, image := startContainerdAgent(t, dir)
	writeManifest(t, dir, "busy.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: busy
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: `+image+`
    command: ["sh", "-c", "while :; do :; done & `+rcHoldMemory(150)+`"]
    resources:
      limits: {cpu: 200m, memory: 512Mi}
`)
	p := a.waitPod(2*time.Minute, "busy-e2e-node", "Running", isRunning)
	uid := string(p.UID)
	defer cleanupPods(t, a, dir, uid)

	rt := a.runtime()
	ctrs := containersOf(t, rt, uid)
	if len(ctrs) != 1 {
		t.Fatalf("%d containers of the pod in containerd", len(ctrs))
	}
	memDir := rcCgroupOf(t, "memory", ctrs[0].Id)
	cpuDir := rcCgroupOf(t, "cpuacct", ctrs[0].Id)
	if !strings.Contains(memDir, "/kubepods/pod"+uid+"/") {
		t.Errorf("memory cgroup %s: want it under the Guaranteed pod's parent /kubepods/pod%s", memDir, uid)
	}
	testenv.WaitFor(t, time.Minute, "tail holds 150 MiB", func() (bool, error) {
		_, ws := rcMemory(t, memDir)
		return ws >= 150*rcMi, fmt.Errorf("cgroup working set %d MiB", ws/rcMi)
	})

	// The summary's rates need two samples: wait for the container's.
	var s *statsapi.Summary
	var rate uint64
	testenv.WaitFor(t, time.Minute, "the container's CPU rate in the summary", func() (bool, error) {
		var err error
		if s, err = a.summary(); err != nil {
			return false, err
		}
		ps := rcPodStats(s, uid)
		if ps == nil || len(ps.Containers) != 1 || ps.Containers[0].CPU == nil {
			return false, fmt.Errorf("pod %s not in the summary with its container", uid)
		}
		rate = rcU(ps.Containers[0].CPU.UsageNanoCores)
		return ps.Containers[0].CPU.UsageNanoCores != nil && rate > 0, fmt.Errorf("no rate yet")
	})

	// The kernel's figures read just before and just after a summary
	// bracket the summary's.
	usage1, ws1 := rcMemory(t, memDir)
	cpu1 := rcReadUint(t, filepath.Join(cpuDir, "cpuacct.usage"))
	rootUsage1, rootWS1 := rcMemory(t, filepath.Join(rcCgroupRoot, "memory"))
	rootCPU1 := rcReadUint(t, filepath.Join(rcCgroupRoot, "cpuacct", "cpuacct.usage"))
	var fs1 syscall.Statfs_t
	if err := syscall.Statfs(a.rootDir, &fs1); err != nil {
		t.Fatal(err)
	}
	s, err := a.summary()
	if err != nil {
		t.Fatal(err)
	}
	usage2, ws2 := rcMemory(t, memDir)
	cpu2 := rcReadUint(t, filepath.Join(cpuDir, "cpuacct.usage"))
	rootUsage2, rootWS2 := rcMemory(t, filepath.Join(rcCgroupRoot, "memory"))
	rootCPU2 := rcReadUint(t, filepath.Join(rcCgroupRoot, "cpuacct", "cpuacct.usage"))
	var fs2 syscall.Statfs_t
	if err := syscall.Statfs(a.rootDir, &fs2); err != nil {
		t.Fatal(err)
	}
	meminfo := rcKeyed(t, "/proc/meminfo")

	ps := rcPodStats(s, uid)
	if ps == nil || len(ps.Containers) != 1 {
		t.Fatalf("pod %s not in the summary with one container: %+v", uid, ps)
	}
	c := ps.Containers[0]
	if c.Name != "app" || c.Memory == nil || c.CPU == nil {
		t.Fatalf("container stats %+v", c)
	}
	// Memory: a static 150 MiB; the cgroup's usage counter is batched per
	// CPU, so a few MiB of slack.
	const memTol = 8 * rcMi
	lo, hi := min(ws1, ws2), max(ws1, ws2)
	t.Logf("container working set: summary %d B, cgroup usage-total_inactive_file %d..%d B; usage: summary %d B, cgroup %d..%d B",
		rcU(c.Memory.WorkingSetBytes), lo, hi, rcU(c.Memory.UsageBytes), min(usage1, usage2), max(usage1, usage2))
	if ws := rcU(c.Memory.WorkingSetBytes); !rcWithin(ws, lo, hi, memTol) || ws < 150*rcMi {
		t.Errorf("container workingSetBytes %d, cgroup's %d..%d (and at least the 150 MiB tail holds)", ws, lo, hi)
	}
	if us := rcU(c.Memory.UsageBytes); !rcWithin(us, min(usage1, usage2), max(usage1, usage2), memTol) {
		t.Errorf("container usageBytes %d, cgroup's memory.usage_in_bytes %d..%d", us, usage1, usage2)
	}
	// The pod's cgroup and the container's are read at two instants: the
	// same tolerance as against the cgroup files.
	if ps.Memory == nil || rcU(ps.Memory.WorkingSetBytes)+memTol < rcU(c.Memory.WorkingSetBytes) {
		t.Errorf("pod memory %+v below its container's", ps.Memory)
	}
	// CPU: cumulative, so bracketed exactly.
	t.Logf("container CPU: summary %d ns, cpuacct.usage %d..%d ns; rates %d then %d nanocores (limit 200m)",
		rcU(c.CPU.UsageCoreNanoSeconds), cpu1, cpu2, rate, rcU(c.CPU.UsageNanoCores))
	if got := rcU(c.CPU.UsageCoreNanoSeconds); got < cpu1 || got > cpu2 {
		t.Errorf("container usageCoreNanoSeconds %d outside cpuacct.usage %d..%d", got, cpu1, cpu2)
	}
	// The CFS quota (200m, no burst) bounds the cumulative time since the
	// container was created: a rate over its whole life, so no timing.
	// (containerd 1.6 gives usageNanoCores itself, over the window since
	// its previous ListContainerStats of any caller, which can be a few
	// ms: a momentary rate is not bounded by the quota.)
	life := time.Since(c.StartTime.Time)
	if got, most := rcU(c.CPU.UsageCoreNanoSeconds), uint64(life.Nanoseconds())/5+uint64(100*time.Millisecond); got > most {
		t.Errorf("container usageCoreNanoSeconds %d over %s of life: above its 200m quota's %d", got, life, most)
	}

	// The node: the root cgroup, /proc/meminfo, statfs of the root dir.
	n := s.Node
	if n.Memory == nil || n.CPU == nil || n.Fs == nil {
		t.Fatalf("node stats lack memory, cpu or fs: %+v", n)
	}
	if got := rcU(n.Memory.AvailableBytes) + rcU(n.Memory.WorkingSetBytes); got != meminfo["MemTotal"] {
		t.Errorf("node availableBytes+workingSetBytes %d, /proc/meminfo MemTotal %d", got, meminfo["MemTotal"])
	}
	// The machine's other load moves the node's figures between reads.
	const nodeTol = 256 * rcMi
	t.Logf("node working set: summary %d B, root cgroup %d..%d B; available %d B, MemAvailable %d B",
		rcU(n.Memory.WorkingSetBytes), rootWS1, rootWS2, rcU(n.Memory.AvailableBytes), meminfo["MemAvailable"])
	if ws := rcU(n.Memory.WorkingSetBytes); !rcWithin(ws, min(rootWS1, rootWS2), max(rootWS1, rootWS2), nodeTol) {
		t.Errorf("node workingSetBytes %d, root cgroup's %d..%d", ws, rootWS1, rootWS2)
	}
	if us := rcU(n.Memory.UsageBytes); !rcWithin(us, min(rootUsage1, rootUsage2), max(rootUsage1, rootUsage2), nodeTol) {
		t.Errorf("node usageBytes %d, root memory.usage_in_bytes %d..%d", us, rootUsage1, rootUsage2)
	}
	if ws := rcU(n.Memory.WorkingSetBytes); ws > meminfo["MemTotal"]-meminfo["MemFree"]+nodeTol {
		t.Errorf("node workingSetBytes %d above MemTotal-MemFree %d", ws, meminfo["MemTotal"]-meminfo["MemFree"])
	}
	if got := rcU(n.CPU.UsageCoreNanoSeconds); got < rootCPU1 || got > rootCPU2 {
		t.Errorf("node usageCoreNanoSeconds %d outside the root cpuacct.usage %d..%d", got, rootCPU1, rootCPU2)
	}
	bs := uint64(fs1.Bsize)
	t.Logf("node fs: summary capacity %d available %d inodes %d free %d; statfs %d, %d..%d, %d, %d..%d",
		rcU(n.Fs.CapacityBytes), rcU(n.Fs.AvailableBytes), rcU(n.Fs.Inodes), rcU(n.Fs.InodesFree),
		fs1.Blocks*bs, fs1.Bavail*bs, fs2.Bavail*bs, fs1.Files, fs1.Ffree, fs2.Ffree)
	if rcU(n.Fs.CapacityBytes) != fs1.Blocks*bs || rcU(n.Fs.Inodes) != fs1.Files {
		t.Errorf("node fs capacity %d B / %d inodes, statfs %d B / %d inodes", rcU(n.Fs.CapacityBytes), rcU(n.Fs.Inodes), fs1.Blocks*bs, fs1.Files)
	}
	if av := rcU(n.Fs.AvailableBytes); !rcWithin(av, min(fs1.Bavail, fs2.Bavail)*bs, max(fs1.Bavail, fs2.Bavail)*bs, 512*rcMi) {
		t.Errorf("node fs availableBytes %d, statfs %d..%d", av, fs1.Bavail*bs, fs2.Bavail*bs)
	}
	if fr := rcU(n.Fs.InodesFree); !rcWithin(fr, min(fs1.Ffree, fs2.Ffree), max(fs1.Ffree, fs2.Ffree), 20000) {
		t.Errorf("node fs inodesFree %d, statfs %d..%d", fr, fs1.Ffree, fs2.Ffree)
	}

	// /metrics/resource says the same of the container.
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics/resource", a.roPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	wsLine := regexp.MustCompile(`(?m)^container_memory_working_set_bytes\{[^}]*container="app"[^}]*pod="busy-e2e-node"[^}]*\} ([0-9.e+]+)`)
	m := wsLine.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no container_memory_working_set_bytes of app in /metrics/resource:\n%s", body)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	_, ws3 := rcMemory(t, memDir)
	if !rcWithin(uint64(v), min(lo, ws3), max(hi, ws3), memTol) {
		t.Errorf("/metrics/resource working set %v, cgroup's %d..%d", v, min(lo, ws3), max(hi, ws3))
	}
}

// TestE2EContainerdMemoryHogEvicted: with memory.available's hard
// threshold 1 GiB below what the node has, a pushed busybox pod holding
// 2 GiB is evicted (the biggest of two pods; a sleeping pod stays):
// Failed/Evicted with upstream's message naming its container, its
// containers stopped in containerd, kubelet_evictions{memory.available} 1.
func TestE2EContainerdMemoryHogEvicted(t *testing.T) {
	rcCgroupV1(t)
	// containerd up and the binary built before the node's memory is read:
	// both move it.
	testenv.ContainerdInfo(t)
	actorletBin(t)
	const hog, margin = 2 * rcGi, 1 * rcGi
	avail := rcNodeAvailable(t)
	if avail < hog+2*margin {
		t.Fatalf("the node has %d MiB available: this test needs %d MiB", avail/rcMi, (hog+2*margin)/rcMi)
	}
	threshold := (avail - margin) / rcMi * rcMi
	t.Logf("node memory.available %d MiB; --eviction-hard memory.available<%dMi; hog %d MiB", avail/rcMi, threshold/rcMi, hog/rcMi)
	dir := t.TempDir()
	a, image := startContainerdAgent(t, dir,
		"--eviction-hard", fmt.Sprintf("memory.available<%dMi", threshold/rcMi),
		"--eviction-pressure-transition-period", "5s")

	// Pushed pods are evictable (manifest pods are static, critical).
	push := func(name, command string) (uid, fullName string) {
		t.Helper()
		body := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", %q]
`, name, image, command)
		return a.pushPod(t, body)
	}
	var uids []string
	defer func() {
		a.deletePushed("calm-e2e-node", "hog-e2e-node")
		cleanupPods(t, a, dir, uids...)
	}()

	calmUID, calm := push("calm", "sleep 3600")
	uids = append(uids, calmUID)
	a.waitPod(2*time.Minute, calm, "Running", isRunning)
	// Nothing but the hog may cross the threshold: the machine's other
	// load must leave the margin before the hog comes.
	testenv.WaitFor(t, 2*time.Minute, "the node clear of the threshold by half the margin", func() (bool, error) {
		s, err := a.summary()
		if err != nil {
			return false, err
		}
		if s.Node.Memory == nil || s.Node.Memory.AvailableBytes == nil {
			return false, fmt.Errorf("no node memory in the summary")
		}
		av := int64(*s.Node.Memory.AvailableBytes)
		return av > threshold+margin/2, fmt.Errorf("available %d MiB, threshold %d MiB", av/rcMi, threshold/rcMi)
	})

	hogUID, hogName := push("hog", rcHoldMemory(hog/rcMi))
	uids = append(uids, hogUID)
	p := a.waitPod(3*time.Minute, hogName, "Failed/Evicted", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == "Evicted"
	})
	msg := p.Status.Message
	t.Logf("hog evicted: %q", msg)
	for _, want := range []string{
		"The node was low on resource: memory. ",
		fmt.Sprintf("Threshold quantity: %dMi, available: ", threshold/rcMi),
		"Container app was using ",
		", request is 0, has larger consumption of memory. ",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("eviction message %q lacks %q", msg, want)
		}
	}
	// The hog is evicted as soon as it crosses (the kernel's notifier),
	// while it still grows: it then holds about the margin (the node was at
	// least half the margin above the threshold before the hog; the
	// machine's other load moves too): at least a quarter of it.
	if m := regexp.MustCompile(`Container app was using (\S+),`).FindStringSubmatch(msg); m != nil {
		if q, err := resource.ParseQuantity(m[1]); err != nil || q.Value() < margin/4 {
			t.Errorf("the message says the hog used %s: want at least %d MiB (%v)", m[1], margin/4/rcMi, err)
		}
	}
	// The runtime: the hog's containers are gone, its sandbox is not
	// ready; the calm pod's container runs.
	rt := a.runtime()
	testenv.WaitFor(t, time.Minute, "the hog's containers gone from containerd", func() (bool, error) {
		if cs := containersOf(t, rt, hogUID); len(cs) > 0 {
			return false, fmt.Errorf("container %s %s", cs[0].Id, cs[0].State)
		}
		sbs, err := rt.ListPodSandbox(t.Context(), &runtimeapi.PodSandboxFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.uid": hogUID}})
		if err != nil {
			return false, err
		}
		for _, sb := range sbs {
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				return false, fmt.Errorf("sandbox %s ready", sb.Id)
			}
		}
		return true, nil
	})
	testenv.WaitFor(t, 30*time.Second, `kubelet_evictions{eviction_signal="memory.available"} 1`, func() (bool, error) {
		v, err := a.metricSum("kubelet_evictions", `eviction_signal="memory.available"`)
		return err == nil && v == 1, fmt.Errorf("%v (%v)", v, err)
	})
	// Passes go on after the hog's memory is back: the pressure ends (5 s
	// after the last pass that saw it) and nothing more is evicted.
	testenv.WaitFor(t, 2*time.Minute, "memory pressure over (log)", func() (bool, error) {
		b, _ := os.ReadFile(a.logPath)
		on := false
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, `msg="node pressure"`) {
				continue
			}
			if strings.Contains(line, " memory=true") {
				on = true
			} else if on && strings.Contains(line, " memory=false") {
				return true, nil
			}
		}
		if !on {
			return false, fmt.Errorf("no memory pressure logged")
		}
		return false, fmt.Errorf("memory pressure on")
	})
	if p, err := a.pod(calm); err != nil || !isRunning(p) {
		t.Errorf("the calm pod: %v %v", rcDescribe(p), err)
	}
	for _, c := range containersOf(t, rt, calmUID) {
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("the calm pod's container %s is %s", c.Id, c.State)
		}
	}
	if v, err := a.metricSum("kubelet_evictions", `eviction_signal="memory.available"`); err != nil || v != 1 {
		t.Errorf(`kubelet_evictions{eviction_signal="memory.available"} %v (%v), want 1`, v, err)
	}
	if a.logContains("memory threshold crossed (kernel notification)") {
		t.Logf("the kernel's memory threshold notifier fired and started the pass")
	} else {
		t.Logf("the kernel's memory threshold notifier did not fire: a periodic pass found the hog")
	}
}

func rcDescribe(p *v1.Pod) string {
	if p == nil {
		return "not listed"
	}
	return string(p.Status.Phase) + " " + describe(p)
}
