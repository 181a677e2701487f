package sim

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/podspec"
)

// cgroupManager is the method set of the agent's cgroup Manager
// (actors/cgroup.Manager), declared here because a runtime imports
// nothing of the agent: *Cgroups must keep it, so that the agent can
// drive the sim's tree as it drives the host's.
type cgroupManager interface {
	Version() int
	Driver() podspec.CgroupDriver
	Exists(name podspec.CgroupName) bool
	Create(name podspec.CgroupName, r *podspec.CgroupResources) error
	Update(name podspec.CgroupName, r *podspec.CgroupResources) error
	Read(name podspec.CgroupName) (*podspec.CgroupResources, error)
	Destroy(name podspec.CgroupName) error
	Pids(name podspec.CgroupName) ([]int, error)
	Children(name podspec.CgroupName) ([]podspec.CgroupName, error)
}

var _ cgroupManager = (*Cgroups)(nil)

func i64(v int64) *int64    { return &v }
func pu64(v uint64) *uint64 { return &v }
func podName(uid string) podspec.CgroupName {
	return podspec.CgroupName{"kubepods", "burstable", "pod" + uid}
}

// runInCgroup starts a sandbox whose cgroup parent is parent and one
// `sleep infinity` container per name in it.
func (e *env) runInCgroup(t *testing.T, pod, parent string, names ...string) (sb string, ids []string) {
	t.Helper()
	cfg := sandboxConfig(pod, false, nil)
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{CgroupParent: parent}
	resp, err := e.rt.RunPodSandbox(ctx(t), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	for _, n := range names {
		id := e.create(t, resp.PodSandboxId, cfg, ctrConfig(n, "sleep", "infinity"))
		e.start(t, id)
		ids = append(ids, id)
	}
	return resp.PodSandboxId, ids
}

func TestCgroupsTree(t *testing.T) {
	g := New(Config{}).Cgroups()
	if g.Version() != 2 || g.Driver() != podspec.CgroupDriverCgroupfs {
		t.Fatalf("version %d driver %s, want 2 cgroupfs", g.Version(), g.Driver())
	}
	pod := podName("a")
	if g.Exists(pod) || !g.Exists(nil) {
		t.Fatal("a fresh tree has only the root")
	}
	if _, err := g.Read(pod); !errdefs.IsNotFound(err) {
		t.Fatalf("Read of a missing cgroup: %v, want not found", err)
	}
	if err := g.Update(pod, &podspec.CgroupResources{Memory: i64(1)}); !errdefs.IsNotFound(err) {
		t.Fatalf("Update of a missing cgroup: %v, want not found", err)
	}
	if err := g.Create(pod, &podspec.CgroupResources{CPUShares: pu64(512), Memory: i64(64 << 20)}); err != nil {
		t.Fatal(err)
	}
	if !g.Exists(podspec.CgroupName{"kubepods", "burstable"}) {
		t.Fatal("Create did not make the parents")
	}
	got, err := g.Read(pod)
	if err != nil {
		t.Fatal(err)
	}
	if *got.CPUShares != 512 || *got.Memory != 64<<20 || *got.CPUQuota != -1 || *got.CPUPeriod != 100000 || *got.PidsLimit != -1 {
		t.Fatalf("Read = shares %d memory %d quota %d period %d pids %d", *got.CPUShares, *got.Memory, *got.CPUQuota, *got.CPUPeriod, *got.PidsLimit)
	}
	// nil values are left alone; the others replace.
	if err := g.Update(pod, &podspec.CgroupResources{CPUQuota: i64(50000), PidsLimit: i64(10)}); err != nil {
		t.Fatal(err)
	}
	got, _ = g.Read(pod)
	if *got.CPUShares != 512 || *got.CPUQuota != 50000 || *got.PidsLimit != 10 {
		t.Fatalf("after Update: shares %d quota %d pids %d", *got.CPUShares, *got.CPUQuota, *got.PidsLimit)
	}
	kids, err := g.Children(podspec.CgroupName{"kubepods"})
	if err != nil || len(kids) != 1 || kids[0].Cgroupfs() != "/kubepods/burstable" {
		t.Fatalf("Children(kubepods) = %v, %v", kids, err)
	}
	for _, bad := range []*podspec.CgroupResources{
		{CPUQuota: i64(10)}, {CPUPeriod: pu64(10)}, {Memory: i64(-2)}, {PidsLimit: i64(-5)},
	} {
		if err := g.Update(pod, bad); !errorsIsInvalid(err) {
			t.Errorf("Update(%+v) = %v, want invalid argument", bad, err)
		}
	}
	if err := g.Create(podspec.CgroupName{"kubepods", ".."}, nil); !errorsIsInvalid(err) {
		t.Errorf("Create(..) = %v, want invalid argument", err)
	}
	if err := g.Destroy(podspec.CgroupName{"kubepods"}); err != nil {
		t.Fatal(err)
	}
	if g.Exists(pod) || g.Exists(podspec.CgroupName{"kubepods"}) {
		t.Fatal("Destroy left the cgroup or its children")
	}
	if err := g.Destroy(podspec.CgroupName{"kubepods"}); err != nil {
		t.Fatalf("Destroy of a cgroup already gone: %v", err)
	}
	if err := g.Destroy(nil); !errorsIsInvalid(err) {
		t.Fatalf("Destroy(root) = %v", err)
	}
}

func errorsIsInvalid(err error) bool { return errors.Is(err, errdefs.ErrInvalidArgument) }

func TestCgroupsPodLinkPidsDestroy(t *testing.T) {
	e := newEnv(t, Config{})
	g := e.r.Cgroups()
	pod := podName("p1")
	if err := g.Create(pod, &podspec.CgroupResources{PidsLimit: i64(5)}); err != nil {
		t.Fatal(err)
	}
	sb, ids := e.runInCgroup(t, "p1", pod.Cgroupfs(), "a", "b")
	pids, err := g.Pids(pod)
	if err != nil || len(pids) != 3 { // pause + 2 containers
		t.Fatalf("Pids = %v, %v; want 3", pids, err)
	}
	if all, _ := g.Pids(nil); !slices.Equal(all, pids) {
		t.Fatalf("Pids(root) = %v, want the pod's %v", all, pids)
	}
	// 3 processes of 5: two more fit, the third does not.
	if code, _ := e.exec(t, ids[0], "spawn", "2"); code != 0 {
		t.Fatalf("spawn 2 under the pod's pids limit: exit %d", code)
	}
	if code, stderr := e.exec(t, ids[1], "spawn", "1"); code != 1 || !strings.Contains(stderr, "can't fork") {
		t.Fatalf("spawn past the pod's pids limit: exit %d %q", code, stderr)
	}
	if pids, _ = g.Pids(pod); len(pids) != 5 {
		t.Fatalf("Pids after spawn = %v", pids)
	}
	// A container cannot start in a full pod either.
	cfg := sandboxConfig("p1", false, nil)
	c := e.create(t, sb, cfg, ctrConfig("c", "sleep", "infinity"))
	_, err = e.rt.StartContainer(ctx(t), &runtimeapi.StartContainerRequest{ContainerId: c})
	wantCode(t, err, codes.Unknown)
	if code, _ := e.exec(t, ids[0], "reap"); code != 0 {
		t.Fatal("reap failed")
	}
	e.start(t, c)
	// Another pod elsewhere is not limited by it.
	_, other := e.runInCgroup(t, "p2", "/kubepods/besteffort/podp2", "x")
	if code, _ := e.exec(t, other[0], "spawn", "50"); code != 0 {
		t.Fatal("spawn in a pod without a pids limit failed")
	}

	if err := g.Destroy(pod); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Destroy of a cgroup with live containers = %v, want failed precondition", err)
	}
	if !g.Exists(pod) {
		t.Fatal("a refused Destroy removed the cgroup")
	}
	if _, err := e.rt.StopPodSandbox(ctx(t), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	if pids, _ := g.Pids(pod); len(pids) != 0 {
		t.Fatalf("Pids of a stopped pod = %v", pids)
	}
	if err := g.Destroy(pod); err != nil {
		t.Fatalf("Destroy after the pod stopped: %v", err)
	}
	// The runtime makes a missing cgroup parent, as runc does, for the
	// systemd driver's slice names too.
	e.runInCgroup(t, "p3", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3_a.slice")
	if !g.Exists(podName("3-a")) {
		t.Fatal("a sandbox's systemd cgroup parent did not make its cgroup")
	}
}

func TestCgroupsPodMemoryLimit(t *testing.T) {
	e := newEnv(t, Config{})
	g := e.r.Cgroups()
	pod := podName("m")
	// The pod's limit: 64 MiB. Each container uses 4 MiB, the pause 0.5.
	if err := g.Create(pod, &podspec.CgroupResources{Memory: i64(64 << 20)}); err != nil {
		t.Fatal(err)
	}
	_, ids := e.runInCgroup(t, "m", pod.Cgroupfs(), "big", "small")
	if code, _ := e.exec(t, ids[0], "alloc", "40Mi"); code != 0 {
		t.Fatal("alloc under the pod limit failed")
	}
	// Together past 64 MiB: the pod's OOM killer takes the largest.
	if code, _ := e.exec(t, ids[1], "alloc", "20Mi"); code != 0 {
		t.Fatalf("the smaller container was killed: exit %d", code)
	}
	st := e.waitState(t, ids[0], runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.Reason != "OOMKilled" || st.ExitCode != 137 {
		t.Fatalf("largest container: %s %d, want OOMKilled 137", st.Reason, st.ExitCode)
	}
	if st := e.status(t, ids[1]); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("the smaller container: %s", st.State)
	}

	// v1 refuses a pod limit below usage; v2 takes it and OOM-kills.
	used := 4<<20 + 20<<20 + 512<<10
	e.r.cfg.CgroupVersion = 1
	if err := g.Update(pod, &podspec.CgroupResources{Memory: i64(int64(used) - 1)}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("v1 Update below usage = %v, want failed precondition", err)
	}
	if r, _ := g.Read(pod); *r.Memory != 64<<20 {
		t.Fatalf("a refused Update wrote %d", *r.Memory)
	}
	e.r.cfg.CgroupVersion = 2
	if err := g.Update(pod, &podspec.CgroupResources{Memory: i64(int64(used) - 1)}); err != nil {
		t.Fatal(err)
	}
	if st := e.waitState(t, ids[1], runtimeapi.ContainerState_CONTAINER_EXITED); st.Reason != "OOMKilled" {
		t.Fatalf("v2 limit below usage: %s, want OOMKilled", st.Reason)
	}
}

func TestUpdateContainerResources(t *testing.T) {
	e := newEnv(t, Config{CgroupVersion: 1})
	sb, sbCfg := e.runPod(t, "u")
	cfg := ctrConfig("c", "sleep", "infinity")
	cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{
		CpuPeriod: 100000, CpuQuota: 50000, CpuShares: 512, MemoryLimitInBytes: 64 << 20, OomScoreAdj: 900}}
	id := e.create(t, sb, sbCfg, cfg)
	e.start(t, id)
	update := func(r *runtimeapi.LinuxContainerResources) error {
		_, err := e.rt.UpdateContainerResources(ctx(t), &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: r})
		return err
	}
	if err := update(&runtimeapi.LinuxContainerResources{CpuQuota: 100000, CpuShares: 1024, MemoryLimitInBytes: 128 << 20, OomScoreAdj: 0}); err != nil {
		t.Fatal(err)
	}
	res := e.status(t, id).GetResources().GetLinux()
	if res.CpuPeriod != 100000 || res.CpuQuota != 100000 || res.CpuShares != 1024 || res.MemoryLimitInBytes != 128<<20 || res.OomScoreAdj != 900 {
		t.Fatalf("status resources after update: %v", res)
	}
	// The new limit acts on alloc.
	if code, _ := e.exec(t, id, "alloc", "100Mi"); code != 0 {
		t.Fatal("alloc under the raised limit failed")
	}
	// v1: a limit below usage fails as runc does and changes nothing.
	err := update(&runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 64 << 20, CpuShares: 2048})
	wantCode(t, err, codes.Unknown)
	if !strings.Contains(err.Error(), "unable to set memory limit") {
		t.Fatalf("error %v", err)
	}
	if res := e.status(t, id).GetResources().GetLinux(); res.MemoryLimitInBytes != 128<<20 || res.CpuShares != 1024 {
		t.Fatalf("a refused update changed %v", res)
	}
	wantCode(t, update(&runtimeapi.LinuxContainerResources{CpuQuota: 5}), codes.InvalidArgument)
	// v2: it is set and the container is OOM-killed.
	e.r.cfg.CgroupVersion = 2
	if err := update(&runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	if st := e.waitState(t, id, runtimeapi.ContainerState_CONTAINER_EXITED); st.Reason != "OOMKilled" {
		t.Fatalf("v2 limit below usage: %s", st.Reason)
	}
	wantCode(t, update(&runtimeapi.LinuxContainerResources{CpuShares: 2}), codes.FailedPrecondition)
}

// TestCgroupsV1QuotaOrder: on cgroup v1 the kernel keeps a child's CFS
// quota within its parent's, so a resize must raise the pod cgroup's
// quota before its containers' and lower it after (upstream's order);
// the other order fails as runc and the kernel fail it.
func TestCgroupsV1QuotaOrder(t *testing.T) {
	e := newEnv(t, Config{CgroupVersion: 1})
	g := e.r.Cgroups()
	pod := podName("q")
	if err := g.Create(pod, &podspec.CgroupResources{CPUQuota: i64(10000), CPUPeriod: pu64(100000)}); err != nil {
		t.Fatal(err)
	}
	cfg := sandboxConfig("q", false, nil)
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{CgroupParent: pod.Cgroupfs()}
	resp, err := e.rt.RunPodSandbox(ctx(t), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	cc := ctrConfig("c", "sleep", "infinity")
	cc.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{CpuQuota: 10000, CpuPeriod: 100000}}
	id := e.create(t, resp.PodSandboxId, cfg, cc)
	e.start(t, id)
	update := func(q int64) error {
		_, err := e.rt.UpdateContainerResources(ctx(t), &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id,
			Linux: &runtimeapi.LinuxContainerResources{CpuQuota: q, CpuPeriod: 100000}})
		return err
	}
	// Up: the container first fails.
	err = update(15000)
	wantCode(t, err, codes.Unknown)
	if !strings.Contains(err.Error(), "cpu.cfs_quota_us: invalid argument") {
		t.Fatalf("error %v", err)
	}
	if err := g.Update(pod, &podspec.CgroupResources{CPUQuota: i64(15000)}); err != nil {
		t.Fatal(err)
	}
	if err := update(15000); err != nil {
		t.Fatalf("after the pod's quota rose: %v", err)
	}
	// Down: the pod first fails.
	if err := g.Update(pod, &podspec.CgroupResources{CPUQuota: i64(12000)}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("pod quota below its container's = %v, want invalid argument", err)
	}
	if err := update(12000); err != nil {
		t.Fatal(err)
	}
	if err := g.Update(pod, &podspec.CgroupResources{CPUQuota: i64(12000)}); err != nil {
		t.Fatalf("after the container's quota fell: %v", err)
	}
	// v2 has no such check.
	e.r.cfg.CgroupVersion = 2
	if err := update(50000); err != nil {
		t.Fatalf("v2: %v", err)
	}
}
