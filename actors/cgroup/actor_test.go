package cgroup

import (
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

type countMetrics struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *countMetrics) IncCgroupError(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[op]++
}

func (c *countMetrics) get(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[op]
}

const root = "actorlet-test"

func testConfig(m *fakeManager) Config {
	return Config{
		Manager: m, Root: podspec.CgroupName{root}, CgroupsPerQOS: true,
		Kubepods: podspec.KubepodsCgroupValues(rlist("cpu", "4", "memory", "8Gi"), rlist("cpu", "1", "memory", "1Gi"), nil, true),
		Pod:      podspec.PodCgroupConfig{CPUCFSQuota: true, CPUCFSQuotaPeriod: 100 * time.Millisecond, PodPidsLimit: 1024},
		Metrics:  &countMetrics{},
	}
}

func rlist(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func testPod(uid string, req, lim v1.ResourceList) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}}}}
}

type harness struct {
	t   *testing.T
	sys *actor.ActorSystem
	pid *actor.PID
	m   *fakeManager
	cfg Config
}

func start(t *testing.T, m *fakeManager, cfg Config) *harness {
	t.Helper()
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	if err := cfg.Setup(); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	pid := sys.Root.Spawn(actor.PropsFromProducer(New(cfg), actor.WithReceiverMiddleware(actortest.Barrier(), crasher)))
	return &harness{t: t, sys: sys, pid: pid, m: m, cfg: cfg}
}

func (h *harness) ask(msg any) any {
	h.t.Helper()
	r, err := h.sys.Root.RequestFuture(h.pid, msg, 10*time.Second).Result()
	if err != nil {
		h.t.Fatalf("%T: %v", msg, err)
	}
	return r
}

func (h *harness) ensure(p *v1.Pod) *messages.PodCgroup {
	h.t.Helper()
	return h.ask(&messages.EnsurePodCgroup{Pod: p}).(*messages.PodCgroup)
}

func (h *harness) remove(uid string) *messages.PodCgroupRemoved {
	h.t.Helper()
	return h.ask(&messages.RemovePodCgroup{UID: types.UID(uid)}).(*messages.PodCgroupRemoved)
}

func shares(t *testing.T, m *fakeManager, path string) uint64 {
	t.Helper()
	v, ok := m.values(path)
	if !ok || v.CPUShares == nil {
		t.Fatalf("%s: no cpu.shares (exists %v)", path, ok)
	}
	return *v.CPUShares
}

func TestSetupMakesKubepodsAndQOS(t *testing.T) {
	m := newFakeManager(root)
	cfg := testConfig(m)
	if err := cfg.Setup(); err != nil {
		t.Fatal(err)
	}
	kp, ok := m.values(root + "/kubepods")
	if !ok {
		t.Fatal("kubepods not made")
	}
	// allocatable: 3 CPUs -> 3072 shares, 7Gi.
	if *kp.CPUShares != 3072 || *kp.Memory != 7<<30 {
		t.Errorf("kubepods: shares %d memory %d, want 3072 and 7Gi", *kp.CPUShares, *kp.Memory)
	}
	if !m.exists(root + "/kubepods/burstable") {
		t.Error("no burstable QoS cgroup")
	}
	if got := shares(t, m, root+"/kubepods/besteffort"); got != 2 {
		t.Errorf("besteffort shares %d, want 2", got)
	}
}

func TestSetupRefusesMissingRootAndReserved(t *testing.T) {
	m := newFakeManager()
	cfg := testConfig(m)
	err := cfg.Setup()
	if err == nil || !strings.Contains(err.Error(), `invalid configuration: --cgroup-root /actorlet-test: cgroup ["actorlet-test"] has some missing paths`) {
		t.Fatalf("missing root: %v", err)
	}
	m = newFakeManager(root)
	cfg = testConfig(m)
	cfg.Reserved = []Reserved{{Key: EnforceSystemReserved, Name: podspec.CgroupName{"system.slice"},
		Values: podspec.ReservedCgroupValues(rlist("cpu", "1", "memory", "1Gi"), false)}}
	err = cfg.Setup()
	if err == nil || !strings.Contains(err.Error(), `Failed to enforce System Reserved Cgroup Limits on "/system.slice"`) {
		t.Fatalf("missing reserved cgroup: %v", err)
	}
	if m.exists(root + "/kubepods") {
		t.Error("kubepods made although the start was refused")
	}
	m = newFakeManager(root, "system.slice")
	cfg.Manager = m
	if err := cfg.Setup(); err != nil {
		t.Fatal(err)
	}
	v, _ := m.values("system.slice")
	if *v.CPUShares != 1024 || *v.Memory != 1<<30 {
		t.Errorf("system-reserved values: shares %d memory %d", *v.CPUShares, *v.Memory)
	}
}

func TestEnsureResizeRemove(t *testing.T) {
	m := newFakeManager(root)
	h := start(t, m, testConfig(m))
	burst := testPod("b1", rlist("cpu", "250m", "memory", "64Mi"), rlist("memory", "128Mi"))
	got := h.ensure(burst)
	if got.Err != nil || got.Parent != "/actorlet-test/kubepods/burstable/podb1" {
		t.Fatalf("ensure: %+v", got)
	}
	v, ok := m.values(root + "/kubepods/burstable/podb1")
	if !ok {
		t.Fatal("pod cgroup not made")
	}
	if *v.CPUShares != 256 || *v.Memory != 128<<20 || *v.PidsLimit != 1024 || v.CPUQuota != nil {
		t.Errorf("pod values: %+v", v)
	}
	actortest.Eventually(t, "burstable shares from b1", func() bool {
		v, _ := m.values(root + "/kubepods/burstable")
		return v.CPUShares != nil && *v.CPUShares == 256
	})
	guar := testPod("g1", rlist("cpu", "1", "memory", "1Gi"), rlist("cpu", "1", "memory", "1Gi"))
	if got := h.ensure(guar); got.Parent != "/actorlet-test/kubepods/podg1" {
		t.Errorf("guaranteed parent %q", got.Parent)
	}
	if got := h.ensure(testPod("be1", nil, nil)); got.Parent != "/actorlet-test/kubepods/besteffort/podbe1" {
		t.Errorf("besteffort parent %q", got.Parent)
	}
	if got := shares(t, m, root+"/kubepods/besteffort/podbe1"); got != 2 {
		t.Errorf("besteffort pod shares %d", got)
	}

	// Resize CPU: shares, quota and period follow; memory stays.
	resized := testPod("b1", rlist("cpu", "500m", "memory", "64Mi"), rlist("cpu", "1", "memory", "256Mi"))
	r := h.ask(&messages.ResizePodCgroup{Pod: resized, Resources: []v1.ResourceName{v1.ResourceCPU}}).(*messages.PodCgroup)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	v, _ = m.values(root + "/kubepods/burstable/podb1")
	if *v.CPUShares != 512 || v.CPUQuota == nil || *v.CPUQuota != 100000 || *v.Memory != 128<<20 {
		t.Errorf("after CPU resize: shares %d quota %v memory %d", *v.CPUShares, v.CPUQuota, *v.Memory)
	}
	got2 := h.ask(&messages.GetPodCgroup{UID: "b1"}).(*messages.PodCgroupValues)
	if got2.Err != nil || *got2.CPUShares != 512 || *got2.Memory != 128<<20 {
		t.Errorf("GetPodCgroup: %+v", got2)
	}
	// A CPU limit removed: the quota goes (-1), the memory limit too.
	unlimited := testPod("b1", rlist("cpu", "500m", "memory", "64Mi"), nil)
	r = h.ask(&messages.ResizePodCgroup{Pod: unlimited, Resources: []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}}).(*messages.PodCgroup)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	v, _ = m.values(root + "/kubepods/burstable/podb1")
	if *v.CPUQuota != -1 || *v.Memory != -1 || *v.CPUShares != 512 {
		t.Errorf("limits removed: quota %d memory %d shares %d, want -1, -1, 512", *v.CPUQuota, *v.Memory, *v.CPUShares)
	}
	r = h.ask(&messages.ResizePodCgroup{Pod: resized, Resources: []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}}).(*messages.PodCgroup)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	actortest.Eventually(t, "burstable shares after resize", func() bool {
		v, _ := m.values(root + "/kubepods/burstable")
		return *v.CPUShares == 512
	})

	if rm := h.remove("b1"); rm.Err != nil {
		t.Fatal(rm.Err)
	}
	if m.exists(root + "/kubepods/burstable/podb1") {
		t.Error("pod cgroup left after RemovePodCgroup")
	}
	actortest.Eventually(t, "burstable shares back to MinShares", func() bool {
		v, _ := m.values(root + "/kubepods/burstable")
		return *v.CPUShares == 2
	})
	if g := h.ask(&messages.GetPodCgroup{UID: "b1"}).(*messages.PodCgroupValues); !errdefs.IsNotFound(g.Err) {
		t.Errorf("GetPodCgroup after removal: %v", g.Err)
	}
}

func TestKernelRefusalIsAnAnswerAndTheActorCarriesOn(t *testing.T) {
	m := newFakeManager(root)
	cfg := testConfig(m)
	h := start(t, m, cfg)
	m.setRefuse("podbad", syscall.EINVAL)
	got := h.ensure(testPod("bad", rlist("cpu", "100m"), nil))
	if got.Err == nil || !errors.Is(got.Err, syscall.EINVAL) || !strings.Contains(got.Err.Error(), "failed to ensure that the pod: bad cgroups exist") {
		t.Fatalf("refused write: %+v", got)
	}
	if n := cfg.Metrics.(*countMetrics).get(opEnsure); n != 1 {
		t.Errorf("ensure errors counted %d, want 1", n)
	}
	// The next pod is served; the refused one succeeds once the kernel agrees.
	if got := h.ensure(testPod("good", rlist("cpu", "100m"), nil)); got.Err != nil {
		t.Fatal(got.Err)
	}
	m.setRefuse("podbad", nil)
	if got := h.ensure(testPod("bad", rlist("cpu", "100m"), nil)); got.Err != nil {
		t.Fatal(got.Err)
	}
	// A removal refused (a process still in it) is an answer too.
	m.addProcess(root+"/kubepods/burstable/podgood", 42)
	if rm := h.remove("good"); !errors.Is(rm.Err, errdefs.ErrFailedPrecondition) {
		t.Errorf("remove with a process: %v", rm.Err)
	}
	if !m.exists(root + "/kubepods/burstable/podgood") {
		t.Error("a cgroup holding a process was removed")
	}
}

func TestSweepRemovesOrphansOnly(t *testing.T) {
	m := newFakeManager(root)
	cfg := testConfig(m)
	if err := cfg.Setup(); err != nil {
		t.Fatal(err)
	}
	// What a crashed agent left: three pod cgroups, one with a process.
	for _, p := range []string{"kubepods/podorphan1", "kubepods/burstable/podorphan2", "kubepods/besteffort/podbusy", "kubepods/burstable/podkept"} {
		if err := m.Create(append(podspec.CgroupName{root}, strings.Split(p, "/")...), nil); err != nil {
			t.Fatal(err)
		}
	}
	m.addProcess(root+"/kubepods/besteffort/podbusy", 7)
	h := start(t, m, cfg)
	kept := testPod("kept", rlist("cpu", "1"), nil)
	h.sys.Root.Send(h.pid, &messages.SweepPodCgroups{Active: []*v1.Pod{kept}, Keep: map[types.UID]bool{"kept": true}})
	// A pod admitted after the node looked asks for its cgroup.
	if got := h.ensure(testPod("new", nil, nil)); got.Err != nil {
		t.Fatal(got.Err)
	}
	actortest.Eventually(t, "orphans removed", func() bool {
		return !m.exists(root+"/kubepods/podorphan1") && !m.exists(root+"/kubepods/burstable/podorphan2")
	})
	actortest.Sync(t, h.sys, h.pid)
	for _, p := range []string{"kubepods/besteffort/podbusy", "kubepods/burstable/podkept", "kubepods/besteffort/podnew"} {
		if !m.exists(root + "/" + p) {
			t.Errorf("%s removed by the sweep", p)
		}
	}
	actortest.Eventually(t, "burstable shares from the active pods", func() bool {
		v, _ := m.values(root + "/kubepods/burstable")
		return v.CPUShares != nil && *v.CPUShares == 1024
	})
	// The busy one is removed once its process is gone.
	m.mu.Lock()
	m.cgroups[root+"/kubepods/besteffort/podbusy"].pids = nil
	m.mu.Unlock()
	h.sys.Root.Send(h.pid, &messages.SweepPodCgroups{Keep: map[types.UID]bool{"kept": true, "new": true}})
	actortest.Eventually(t, "emptied orphan removed", func() bool { return !m.exists(root + "/kubepods/besteffort/podbusy") })
}

// A restarted CgroupActor (a crash) finds the pod cgroups in the tree:
// it reads and removes one its pods never asked it for.
func TestRestartRebuildsFromTheTree(t *testing.T) {
	m := newFakeManager(root)
	h := start(t, m, testConfig(m))
	if got := h.ensure(testPod("p1", rlist("cpu", "300m"), nil)); got.Err != nil {
		t.Fatal(got.Err)
	}
	h.sys.Root.Send(h.pid, &crash{})
	// The restarted incarnation lists the tree before it serves the read.
	actortest.Eventually(t, "p1 readable after the restart", func() bool {
		g := h.ask(&messages.GetPodCgroup{UID: "p1"}).(*messages.PodCgroupValues)
		return g.Err == nil && g.CPUShares != nil && *g.CPUShares == 307
	})
	if rm := h.remove("p1"); rm.Err != nil || m.exists(root+"/kubepods/burstable/podp1") {
		t.Fatalf("remove after restart: %v", rm.Err)
	}
}

// A pod whose cgroup was being made when the actor crashed gets its
// answer from the restarted actor: it does not wait for a resync.
func TestRestartAnswersWhatWasInFlight(t *testing.T) {
	m := newFakeManager(root)
	h := start(t, m, testConfig(m))
	gate := make(chan struct{})
	m.mu.Lock()
	m.gate = gate
	m.mu.Unlock()
	f := h.sys.Root.RequestFuture(h.pid, &messages.EnsurePodCgroup{Pod: testPod("slow", rlist("cpu", "100m"), nil)}, 10*time.Second)
	actortest.Sync(t, h.sys, h.pid) // the create is in flight
	h.sys.Root.Send(h.pid, &crash{})
	actortest.Sync(t, h.sys, h.pid) // restarted
	m.mu.Lock()
	m.gate = nil
	m.mu.Unlock()
	close(gate)
	r, err := f.Result()
	if err != nil {
		t.Fatalf("no answer after the restart: %v", err)
	}
	if got := r.(*messages.PodCgroup); got.Err != nil || !m.exists(root+"/kubepods/burstable/podslow") {
		t.Fatalf("answer %+v", got)
	}
}

// crash makes the actor panic (its supervisor restarts it).
type crash struct{}

func crasher(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		if _, ok := env.Message.(*crash); ok {
			panic("crash asked by the test")
		}
		next(c, env)
	}
}

func TestCgroupsPerQOSOff(t *testing.T) {
	m := newFakeManager()
	cfg := testConfig(m)
	cfg.CgroupsPerQOS, cfg.Root = false, nil
	h := start(t, m, cfg)
	got := h.ensure(testPod("x", rlist("cpu", "1"), nil))
	if got.Err != nil || got.Parent != "/" {
		t.Fatalf("cgroupsPerQOS off: %+v", got)
	}
	if m.exists("kubepods") {
		t.Error("kubepods made with cgroupsPerQOS off")
	}
	if rm := h.remove("x"); rm.Err != nil {
		t.Fatal(rm.Err)
	}
}

func TestParseCgroupRoot(t *testing.T) {
	for _, c := range []struct {
		in     string
		driver podspec.CgroupDriver
		want   string // cgroupfs path of the name
		err    bool
	}{
		{"/", podspec.CgroupDriverCgroupfs, "/", false},
		{"", podspec.CgroupDriverCgroupfs, "/", false},
		{"/actorlet-a/b", podspec.CgroupDriverCgroupfs, "/actorlet-a/b", false},
		{"relative", podspec.CgroupDriverCgroupfs, "", true},
		{"/a/../b", podspec.CgroupDriverCgroupfs, "", true},
		{"/actorlet.slice", podspec.CgroupDriverSystemd, "/actorlet", false},
		{"/a.slice/a-b.slice", podspec.CgroupDriverSystemd, "/a/b", false},
		{"/notaslice", podspec.CgroupDriverSystemd, "", true},
	} {
		n, err := ParseCgroupRoot(c.in, c.driver)
		if (err != nil) != c.err || (err == nil && n.Cgroupfs() != c.want) {
			t.Errorf("ParseCgroupRoot(%q, %s) = %v, %v; want %q (error %v)", c.in, c.driver, n, err, c.want, c.err)
		}
	}
}

func TestValidateEnforcement(t *testing.T) {
	for _, c := range []struct {
		keys     []string
		perQOS   bool
		sys, kub string
		want     string // "" no error
	}{
		{[]string{"pods"}, true, "", "", ""},
		{nil, false, "", "", ""},
		{[]string{"none"}, false, "", "", ""},
		{[]string{"pods"}, false, "", "", `cgroupsPerQOS (--cgroups-per-qos) must be set to true when "pods"`},
		{[]string{"pods", "system-reserved"}, true, "", "", "systemReservedCgroup (--system-reserved-cgroup) must be specified"},
		{[]string{"kube-reserved"}, true, "", "", "kubeReservedCgroup (--kube-reserved-cgroup) must be specified"},
		{[]string{"pods", "system-reserved", "kube-reserved"}, true, "/system", "/kube", ""},
		{[]string{"none", "pods"}, true, "", "", `may not contain additional enforcements when "none"`},
		{[]string{"podz"}, true, "", "", `option "podz" specified for enforceNodeAllocatable`},
		{[]string{"pods", "pods"}, true, "", "", `duplicated enforcements "pods"`},
		{[]string{"system-reserved", "system-reserved-compressible"}, true, "/s", "", "cannot be specified together"},
	} {
		err := ValidateEnforcement(c.keys, c.perQOS, c.sys, c.kub)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v perQOS=%v: %v, want %q", c.keys, c.perQOS, err, c.want)
		}
	}
}

// validatingManager says what is missing, as adapters/cgroup's managers.
type validatingManager struct{ *fakeManager }

func (v validatingManager) Validate(n podspec.CgroupName) error {
	if !v.Exists(n) {
		return errors.New("cgroup " + n.Cgroupfs() + " is missing in cpu (/sys/fs/cgroup/cpu" + n.Cgroupfs() + ")")
	}
	return nil
}

func TestSetupNamesWhatIsMissing(t *testing.T) {
	cfg := testConfig(newFakeManager())
	cfg.Manager = validatingManager{newFakeManager()}
	err := cfg.Setup()
	if err == nil || !strings.Contains(err.Error(), "is missing in cpu (/sys/fs/cgroup/cpu/actorlet-test)") {
		t.Fatalf("missing root: %v", err)
	}
}
