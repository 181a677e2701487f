package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// The node's cgroups on a real containerd and the host's cgroup v1
// hierarchies, read from /sys/fs/cgroup: the kubepods / QoS / pod<uid>
// tree and its values as upstream's kubelet sets them, the pod pids limit
// against a fork bomb, kubepods sized from allocatable, and the pod cgroups
// gone after deletion, also when the agent is killed during one. Each agent
// gets its own --cgroup-root (cgNewRoot); --fail-cgroupv1=false as a
// user of a cgroup v1 host sets it.

// cgAgent starts an agent on the shared containerd with its own cgroup
// root; dir is its manifest dir.
func cgAgent(t *testing.T, dir string, extra ...string) (a *agent, root, image string) {
	t.Helper()
	root = cgNewRoot(t)
	flags := append([]string{"--cgroup-root", root, "--fail-cgroupv1=false"}, cgDiskFlags...)
	a, image = startContainerdAgent(t, dir, append(flags, extra...)...)
	// Before the agent stops (cleanups run last-in first-out), also when
	// the test failed: its pods deleted and gone from containerd, so that
	// nothing runs in the cgroup root when it is removed.
	t.Cleanup(func() {
		pods, err := a.pods()
		if err != nil || len(pods) == 0 {
			return
		}
		uids := make([]string, 0, len(pods))
		for _, p := range pods {
			uids = append(uids, string(p.UID))
		}
		cleanupPods(t, a, dir, uids...)
	})
	return a, root, image
}

// cgRunningID is the runtime ID of a pod's running container name.
func cgRunningID(t *testing.T, p *v1.Pod, name string) string {
	t.Helper()
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == name && cs.State.Running != nil {
			_, id, ok := strings.Cut(cs.ContainerID, "://")
			if ok && id != "" {
				return id
			}
		}
	}
	t.Fatalf("pod %s: no running container %s (%s)", p.Name, name, describe(p))
	return ""
}

// TestE2EContainerdCgroupQoSTree: a Guaranteed, a Burstable and a
// BestEffort pod get the cgroups upstream's kubelet makes, with its values:
// kubepods/pod<uid> (cpu.shares from requests, CFS quota and memory limit
// from limits, pids.max from --pod-max-pids), kubepods/burstable/pod<uid>
// (no quota: its container sets no CPU limit), kubepods/besteffort/pod<uid>
// (2 shares, no limits); the burstable QoS cgroup's shares are its pods'
// requests, the besteffort one's 2, kubepods' the node's CPUs; each
// container's own cgroup is a child of its pod's; and every pod cgroup is
// gone once the pods are deleted.
func TestE2EContainerdCgroupQoSTree(t *testing.T) {
	dir := t.TempDir()
	a, root, image := cgAgent(t, dir, "--pod-max-pids", "1024")
	pod := func(name, resources string) string {
		return `apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: ` + image + `
    command: ["sleep", "3600"]
` + resources
	}
	writeManifest(t, dir, "qos.yaml", manifests(
		pod("guaranteed", "    resources: {limits: {cpu: 200m, memory: 64Mi}}\n"),
		pod("burstable", "    resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {memory: 128Mi}}\n"),
		pod("besteffort", ""),
	))
	type tc struct {
		name string
		qos  v1.PodQOSClass
		want cgExpect
		// the container's own cgroup (containerd sets it from the CRI
		// resources the agent sends)
		ctr cgExpect
	}
	cases := []tc{
		{"guaranteed", v1.PodQOSGuaranteed,
			cgExpect{"cpu/cpu.shares": cgShares(200), "cpu/cpu.cfs_quota_us": cgQuota(200), "cpu/cpu.cfs_period_us": 100000,
				"memory/memory.limit_in_bytes": 64 << 20, "pids/pids.max": 1024},
			cgExpect{"cpu/cpu.shares": cgShares(200), "cpu/cpu.cfs_quota_us": cgQuota(200), "memory/memory.limit_in_bytes": 64 << 20}},
		{"burstable", v1.PodQOSBurstable,
			cgExpect{"cpu/cpu.shares": cgShares(100), "cpu/cpu.cfs_quota_us": -1,
				"memory/memory.limit_in_bytes": 128 << 20, "pids/pids.max": 1024},
			cgExpect{"cpu/cpu.shares": cgShares(100), "cpu/cpu.cfs_quota_us": -1, "memory/memory.limit_in_bytes": 128 << 20}},
		{"besteffort", v1.PodQOSBestEffort,
			cgExpect{"cpu/cpu.shares": 2, "cpu/cpu.cfs_quota_us": -1, "memory/memory.limit_in_bytes": -1, "pids/pids.max": 1024},
			cgExpect{"cpu/cpu.shares": 2, "cpu/cpu.cfs_quota_us": -1, "memory/memory.limit_in_bytes": -1}},
	}
	var uids []string
	podParts := map[string][]string{}
	for _, c := range cases {
		p := a.waitPod(2*time.Minute, c.name+"-e2e-node", "Running", isRunning)
		if p.Status.QOSClass != c.qos {
			t.Fatalf("%s: QoS %s, want %s", c.name, p.Status.QOSClass, c.qos)
		}
		uid := string(p.UID)
		uids = append(uids, uid)
		parts := cgPodParts(string(c.qos), uid)
		podParts[c.name] = parts
		// The pod cgroup is made before the sandbox: its values are there
		// as soon as the pod runs.
		if d := cgCheck(root, parts, c.want); d != "" {
			t.Errorf("%s pod cgroup: %s", c.name, d)
		}
		id := cgRunningID(t, p, "app")
		if d := cgCheck(root, append(parts, id), c.ctr); d != "" {
			t.Errorf("%s container cgroup (a child of the pod's): %s", c.name, d)
		}
		// Nowhere else: a Guaranteed pod sits right under kubepods, not
		// under a QoS cgroup, and the others under theirs only.
		for _, q := range []string{"Guaranteed", "Burstable", "BestEffort"} {
			if q == string(c.qos) {
				continue
			}
			if present := cgExists(root, cgPodParts(q, uid), "cpu", "memory", "pids"); len(present) > 0 {
				t.Errorf("%s: a pod cgroup %s in %v too", c.name, filepath.Join(cgPodParts(q, uid)...), present)
			}
		}
	}
	// QoS cgroups: upstream updates their shares as pods come and go.
	cgWait(t, 70*time.Second, "the burstable QoS cgroup's shares are its pods' requests", root,
		[]string{"kubepods", "burstable"}, cgExpect{"cpu/cpu.shares": cgShares(100)})
	cgWait(t, 70*time.Second, "the besteffort QoS cgroup has the minimum shares", root,
		[]string{"kubepods", "besteffort"}, cgExpect{"cpu/cpu.shares": 2})
	// kubepods: the node's allocatable (no reservations here: its capacity).
	milli, mem := cgNodeCapacity(t)
	if d := cgCheck(root, []string{"kubepods"}, cgExpect{"cpu/cpu.shares": cgShares(milli), "memory/memory.limit_in_bytes": cgPage(mem),
		"pids/pids.max": cgNodePIDs(t)}); d != "" {
		t.Errorf("kubepods: %s", d)
	}

	// Deleted: every pod cgroup goes once the runtime holds nothing of the pods.
	cleanupPods(t, a, dir, uids...)
	for name, parts := range podParts {
		cgWaitGone(t, time.Minute, name+"'s pod cgroup removed", root, parts, "cpu", "cpuacct", "memory", "pids", "cpuset")
	}
}

// TestE2EContainerdCgroupPodPidsLimit: --pod-max-pids bounds each pod's
// processes. A busybox fork bomb inside one pod stops at the limit (the
// kernel refuses its forks: pids.events counts them, ash logs "can't
// fork") and its pod keeps running; a second pod on the same node still
// starts 20 processes of its own with no refusal, and kubepods as a whole
// holds more processes than one pod may.
func TestE2EContainerdCgroupPodPidsLimit(t *testing.T) {
	const limit = 40
	dir := t.TempDir()
	a, root, image := cgAgent(t, dir, "--pod-max-pids", strconv.Itoa(limit))
	// The bomb is not PID 1: when its ash cannot fork any more it fails
	// ("can't fork"), and the pod's PID 1 stays (exec: no fork needed).
	writeManifest(t, dir, "bomb.yaml", podYAML("bomb", image, "Never",
		`["sh", "-c", "sh -c 'while true; do sleep 3600 & done'; echo bomb-stopped; exec sleep 3600"]`))
	bomb := a.waitPod(2*time.Minute, "bomb-e2e-node", "Running", isRunning)
	bombParts := cgPodParts(string(bomb.Status.QOSClass), string(bomb.UID))
	pidsDir := func(parts []string) string { return cgDir("pids", root, parts...) }
	testenv.WaitFor(t, time.Minute, "the fork bomb refused by the pod's pids limit", func() (bool, error) {
		n := cgForkFailures(t, pidsDir(bombParts))
		return n > 0, fmt.Errorf("pids.events max %d in the pod's cgroups", n)
	})
	if got, err := cgRead(filepath.Join(pidsDir(bombParts), "pids.max")); err != nil || got != limit {
		t.Fatalf("bomb pod pids.max = %d (%v), want %d", got, err, limit)
	}
	a.waitLog(t, "bomb-e2e-node", "main", "the bomb's own refusal in its log", func(log string) bool {
		return strings.Contains(log, "can't fork")
	})
	cur, err := cgRead(filepath.Join(pidsDir(bombParts), "pids.current"))
	if err != nil || cur > limit || cur < limit/2 {
		t.Errorf("bomb pod pids.current = %d (%v), want at most %d and near it", cur, err, limit)
	}
	if p, err := a.pod("bomb-e2e-node"); err != nil || !isRunning(p) {
		t.Errorf("the bomb's pod: %v %s, want it still running (its PID 1 did not need to fork)", err, cgDescribe(p))
	}

	// Outside the bomb's pod: another pod forks freely, the node holds more
	// than one pod's limit, and the host forks too.
	writeManifest(t, dir, "calm.yaml", podYAML("calm", image, "Never",
		`["sh", "-c", "i=0; while [ $i -lt 20 ]; do sleep 3600 & i=$((i+1)); done; echo spawned $i; exec sleep 3600"]`))
	calm := a.waitPod(2*time.Minute, "calm-e2e-node", "Running", isRunning)
	calmParts := cgPodParts(string(calm.Status.QOSClass), string(calm.UID))
	a.waitLog(t, "calm-e2e-node", "main", "the second pod's 20 processes", func(log string) bool {
		return strings.Contains(log, "spawned 20")
	})
	if n := cgForkFailures(t, pidsDir(calmParts)); n != 0 {
		t.Errorf("the second pod had %d forks refused, want none", n)
	}
	calmCur, _ := cgRead(filepath.Join(pidsDir(calmParts), "pids.current"))
	if calmCur < 21 {
		t.Errorf("the second pod holds %d processes, want its 20 sleeps and its PID 1", calmCur)
	}
	nodeCur, _ := cgRead(cgDir("pids", root, "kubepods", "pids.current"))
	if nodeCur <= limit {
		t.Errorf("kubepods holds %d processes, want more than one pod's limit (%d): the limit is per pod", nodeCur, limit)
	}
	if out, err := exec.Command("sh", "-c", "for i in 1 2 3 4 5; do true & done; wait; echo host-forks").CombinedOutput(); err != nil {
		t.Errorf("the host could not fork while the bomb was capped: %v %s", err, out)
	}
	cleanupPods(t, a, dir, string(bomb.UID), string(calm.UID))
	cgWaitGone(t, time.Minute, "the bomb's pod cgroup removed", root, bombParts, "pids", "cpu", "memory")
}

func cgDescribe(p *v1.Pod) string {
	if p == nil {
		return ""
	}
	return describe(p)
}

// TestE2EContainerdCgroupAllocatable: with --system-reserved and
// --kube-reserved and enforceNodeAllocatable's default (pods), kubepods is
// sized to the node's capacity (cpu, memory, and process IDs: the lesser of
// kernel.pid_max and kernel.threads-max) minus both reservations (upstream's
// GetNodeAllocatableAbsolute: the hard eviction threshold is not taken off
// the cgroup, only off what the scheduler sees); with system-reserved
// enforced too, the named --system-reserved-cgroup gets the reservation
// as its limits; and a reserved cgroup that does not exist is a clear
// start error naming it.
func TestE2EContainerdCgroupAllocatable(t *testing.T) {
	milli, mem := cgNodeCapacity(t)
	const sysCPU, sysMem, sysPIDs, kubeCPU, kubeMem, kubePIDs = 300, 300 << 20, 600, 200, 200 << 20, 400
	reserved := []string{
		"--system-reserved", fmt.Sprintf("cpu=%dm,memory=%d,pid=%d", sysCPU, sysMem, sysPIDs),
		"--kube-reserved", fmt.Sprintf("cpu=%dm,memory=%d,pid=%d", kubeCPU, kubeMem, kubePIDs),
	}
	wantPods := cgExpect{
		"cpu/cpu.shares":               cgShares(milli - sysCPU - kubeCPU),
		"memory/memory.limit_in_bytes": cgPage(mem - sysMem - kubeMem),
		"pids/pids.max":                cgNodePIDs(t) - sysPIDs - kubePIDs,
	}

	t.Run("pods", func(t *testing.T) {
		_, root, _ := cgAgent(t, t.TempDir(), reserved...)
		cgWait(t, 30*time.Second, "kubepods sized from allocatable", root, []string{"kubepods"}, wantPods)
	})

	t.Run("system-reserved", func(t *testing.T) {
		// The reserved cgroup is the system's: it exists before the agent
		// starts (here: below the test's own root, so the test removes it).
		sysRoot := cgNewRoot(t)
		_, root, _ := cgAgent(t, t.TempDir(), append(reserved,
			"--enforce-node-allocatable", "pods,system-reserved", "--system-reserved-cgroup", sysRoot)...)
		cgWait(t, 30*time.Second, "kubepods sized from allocatable", root, []string{"kubepods"}, wantPods)
		cgWait(t, 30*time.Second, "the system-reserved cgroup limited to the reservation", sysRoot, nil, cgExpect{
			"cpu/cpu.shares": cgShares(sysCPU), "memory/memory.limit_in_bytes": cgPage(sysMem),
		})
	})

	t.Run("missing kube-reserved cgroup", func(t *testing.T) {
		root := cgNewRoot(t)
		missing := root + "-no-such-kube-reserved"
		v1h, unified := cgHierarchies(t)
		t.Cleanup(func() { cgRemoveTree(t, missing, v1h, unified) }) // should the agent make it
		env := containerdFor(t)
		rootDir := t.TempDir()
		testenv.UnmountAtCleanup(t, rootDir)
		ports := freePorts(t, 3)
		cmd := exec.Command(actorletBin(t), append(reserved,
			"--container-runtime-endpoint", env.Endpoint, "--root-dir", rootDir,
			"--hostname-override", "e2e-node", "--node-ip", "127.0.0.1", "--address", "127.0.0.1",
			"--port", strconv.Itoa(ports[0]), "--read-only-port", strconv.Itoa(ports[1]), "--healthz-port", strconv.Itoa(ports[2]),
			"--cgroup-root", root, "--fail-cgroupv1=false",
			"--enforce-node-allocatable", "pods,kube-reserved", "--kube-reserved-cgroup", missing)...)
		out, code := cgRunToExit(t, cmd, time.Minute)
		if code == 0 || !strings.Contains(out, missing) {
			t.Fatalf("a missing --kube-reserved-cgroup: exit %d, output must name %s:\n%s", code, missing, out)
		}
		if present := cgExists(missing, nil, "cpu", "memory"); len(present) > 0 {
			t.Errorf("the agent made the missing reserved cgroup %s in %v; it must refuse to start instead", missing, present)
		}
	})
}

// cgRunToExit runs cmd until it exits (killing it after timeout) and
// returns its combined output and exit code (-1: killed).
func cgRunToExit(t *testing.T, cmd *exec.Cmd, timeout time.Duration) (string, int) {
	t.Helper()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return out.String(), -1
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// TestE2EContainerdCgroupKill9DuringDeletion: the agent is killed (-9)
// while a pod is being deleted (its container got SIGTERM and is still in
// its grace period); the restarted agent finishes the deletion and its
// sweep removes the pod's cgroup, and also an orphaned empty pod cgroup
// (a crash between its creation and the sandbox), but never one that
// still holds a process.
func TestE2EContainerdCgroupKill9DuringDeletion(t *testing.T) {
	dir, marks := t.TempDir(), t.TempDir()
	a, root, image := cgAgent(t, dir)
	writeManifest(t, dir, "lingering.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: lingering
spec:
  terminationGracePeriodSeconds: 30
  volumes:
  - {name: marks, hostPath: {path: `+marks+`}}
  containers:
  - name: app
    image: `+image+`
    command: ["sh", "-c", "trap 'touch /marks/term' TERM; while true; do sleep 1; done"]
    resources: {requests: {cpu: 50m, memory: 16Mi}}
    volumeMounts: [{name: marks, mountPath: /marks}]
`)
	p := a.waitPod(2*time.Minute, "lingering-e2e-node", "Running", isRunning)
	uid := string(p.UID)
	parts := cgPodParts(string(p.Status.QOSClass), uid)
	if present := cgExists(root, parts, "cpu", "memory", "pids"); len(present) != 3 {
		t.Fatalf("pod cgroup %s only in %v", filepath.Join(parts...), present)
	}

	// Delete it, and kill the agent once the container has its SIGTERM.
	if err := os.Remove(filepath.Join(dir, "lingering.yaml")); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "the container got SIGTERM", func() (bool, error) {
		_, err := os.Stat(filepath.Join(marks, "term"))
		return err == nil, err
	})
	a.kill9()
	rt := dialRuntime(t, a.endpoint)
	if n := len(containersOf(t, rt, uid)); n == 0 {
		t.Fatal("the container was gone before the kill: the kill was not during the deletion")
	}
	if present := cgExists(root, parts, "cpu", "memory", "pids"); len(present) == 0 {
		t.Fatal("the pod cgroup was gone before the kill")
	}

	// Orphans the dead agent could have left: an empty pod cgroup (made,
	// then a crash before the sandbox) and one that holds a process.
	v1h, _ := cgHierarchies(t)
	emptyParts := []string{"kubepods", "besteffort", "pod0e2e0000-dead-4bad-8000-00000000e2e1"}
	busyParts := []string{"kubepods", "besteffort", "pod0e2e0000-dead-4bad-8000-00000000e2e2"}
	for _, h := range v1h {
		for _, parts := range [][]string{emptyParts, busyParts} {
			if err := os.MkdirAll(cgDir(h, root, parts...), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	holder := exec.Command("sleep", "600")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() }) // before the root's removal (LIFO)
	for _, c := range []string{"cpu", "memory", "pids"} {
		if err := os.WriteFile(filepath.Join(cgDir(c, root, busyParts...), "cgroup.procs"), []byte(strconv.Itoa(holder.Process.Pid)), 0o644); err != nil {
			t.Fatalf("move the holder into %s: %v", c, err)
		}
	}

	a.start()
	testenv.WaitFor(t, 2*time.Minute, "the restarted agent finished the deletion", func() (bool, error) {
		if n := len(containersOf(t, rt, uid)); n > 0 {
			return false, fmt.Errorf("%d containers left", n)
		}
		sbs, err := rt.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}})
		if err != nil || len(sbs) > 0 {
			return false, fmt.Errorf("%d sandboxes left (%v)", len(sbs), err)
		}
		return true, nil
	})
	cgWaitGone(t, 2*time.Minute, "the deleted pod's cgroup removed after the restart", root, parts, "cpu", "cpuacct", "memory", "pids", "cpuset")
	cgWaitGone(t, 2*time.Minute, "the orphaned empty pod cgroup swept", root, emptyParts, "cpu", "memory", "pids")
	if present := cgExists(root, busyParts, "cpu", "memory", "pids"); len(present) != 3 {
		t.Errorf("the orphaned pod cgroup holding a process is left in %v only, want cpu, memory and pids", present)
	}
	if err := holder.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the process in the orphaned pod cgroup was killed: %v", err)
	}
}
