package stats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actortest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	mi          = 1 << 20
	gi          = 1 << 30
	imageMount  = "/var/lib/rt/images"
	layersMount = "/var/lib/rt/layers"
)

// fakeRuntime answers the CRI stats calls from fields; a nil sbStats
// answers ListPodSandboxStats Unimplemented.
type fakeRuntime struct {
	mu         sync.Mutex
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
	cstats     []*runtimeapi.ContainerStats
	sbStats    []*runtimeapi.PodSandboxStats
	imageFs    *runtimeapi.ImageFsInfoResponse
	errs       map[string]error
	calls      map[string]int
}

var _ Runtime = (*fakeRuntime)(nil)

func (f *fakeRuntime) call(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[op]++
	return f.errs[op]
}

func (f *fakeRuntime) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return f.sandboxes, f.call("ListPodSandbox")
}

func (f *fakeRuntime) ListContainers(_ context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if err := f.call("ListContainers"); err != nil {
		return nil, err
	}
	var out []*runtimeapi.Container
	for _, c := range f.containers {
		if st := filter.GetState(); st == nil || st.GetState() == c.GetState() {
			out = append(out, c)
		}
	}
	return out, nil
}

func (f *fakeRuntime) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	err := f.call("ListContainerStats")
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cstats, err
}

func (f *fakeRuntime) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	if err := f.call("ListPodSandboxStats"); err != nil {
		return nil, err
	}
	if f.sbStats == nil {
		return nil, errdefs.Wrap(errdefs.ErrUnimplemented, errors.New("unknown method ListPodSandboxStats"))
	}
	return f.sbStats, nil
}

func (f *fakeRuntime) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return f.imageFs, f.call("ImageFsInfo")
}

// fakeNode answers node stats with a cumulative CPU counter set by the test.
type fakeNode struct {
	mu      sync.Mutex
	cpu     uint64
	at      time.Time
	err     error
	fs      map[string]*statsapi.FsStats
	partial bool
}

var _ NodeSource = (*fakeNode)(nil)

func (n *fakeNode) NodeStats(context.Context) (*statsapi.NodeStats, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil && !n.partial {
		return nil, n.err
	}
	t := metav1.NewTime(n.at)
	ns := &statsapi.NodeStats{
		StartTime: metav1.NewTime(t0.Add(-time.Hour)),
		CPU:       &statsapi.CPUStats{Time: t, UsageCoreNanoSeconds: ptr(n.cpu)},
		Memory:    &statsapi.MemoryStats{Time: t, WorkingSetBytes: ptr(2 * gi), AvailableBytes: ptr(6 * gi)},
		Fs:        &statsapi.FsStats{Time: t, CapacityBytes: ptr(100 * gi), AvailableBytes: ptr(60 * gi), Inodes: ptr(1000), InodesFree: ptr(500)},
	}
	if n.partial {
		ns.Memory = nil
	}
	return ns, n.err
}

func (n *fakeNode) FsInfo(_ context.Context, mount string) (*statsapi.FsStats, error) {
	if fs, ok := n.fs[mount]; ok {
		return fs, nil
	}
	return nil, fmt.Errorf("no filesystem at %s", mount)
}

type fakeSystem struct{}

var _ SystemSource = fakeSystem{}

func (fakeSystem) SystemContainers(context.Context) ([]statsapi.ContainerStats, error) {
	return []statsapi.ContainerStats{{Name: "kubelet", CPU: &statsapi.CPUStats{Time: metav1.NewTime(t0), UsageCoreNanoSeconds: ptr(5)}}}, nil
}

func u64(v uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: v} }

func sandbox(id, name, uid string, ready bool, created time.Time) *runtimeapi.PodSandbox {
	st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if ready {
		st = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return &runtimeapi.PodSandbox{Id: id, State: st, CreatedAt: created.UnixNano(),
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: uid}}
}

func ctr(id, sb, name string, running bool, created time.Time) *runtimeapi.Container {
	st := runtimeapi.ContainerState_CONTAINER_EXITED
	if running {
		st = runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	return &runtimeapi.Container{Id: id, PodSandboxId: sb, State: st, CreatedAt: created.UnixNano(),
		Metadata: &runtimeapi.ContainerMetadata{Name: name}}
}

// cstat: cpu in core-ns (nanoCores nil: the runtime gives none), memory
// working set, writable layer bytes.
func cstat(id string, at time.Time, cpu, ws, layer uint64) *runtimeapi.ContainerStats {
	ts := at.UnixNano()
	return &runtimeapi.ContainerStats{
		Attributes:    &runtimeapi.ContainerAttributes{Id: id},
		Cpu:           &runtimeapi.CpuUsage{Timestamp: ts, UsageCoreNanoSeconds: u64(cpu)},
		Memory:        &runtimeapi.MemoryUsage{Timestamp: ts, WorkingSetBytes: u64(ws), UsageBytes: u64(ws + mi)},
		WritableLayer: &runtimeapi.FilesystemUsage{Timestamp: ts, FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: layersMount}, UsedBytes: u64(layer), InodesUsed: u64(3)},
	}
}

// world is a node with three pods:
//   - web (uid-web): ready, containers app and sidecar running, an exited
//     app of an earlier attempt;
//   - db (uid-db): an old terminated sandbox and a ready one running db;
//   - done (uid-done): terminated, nothing running (left out).
func world(at time.Time, appCPU uint64) *fakeRuntime {
	return &fakeRuntime{
		sandboxes: []*runtimeapi.PodSandbox{
			sandbox("sb-web", "web", "uid-web", true, t0),
			sandbox("sb-db-old", "db", "uid-db", false, t0),
			sandbox("sb-db", "db", "uid-db", true, t0.Add(time.Minute)),
			sandbox("sb-done", "done", "uid-done", false, t0),
		},
		containers: []*runtimeapi.Container{
			ctr("c-app-0", "sb-web", "app", false, t0),
			ctr("c-app", "sb-web", "app", true, t0.Add(time.Second)),
			ctr("c-side", "sb-web", "sidecar", true, t0.Add(time.Second)),
			ctr("c-db", "sb-db", "db", true, t0.Add(2*time.Minute)),
		},
		cstats: []*runtimeapi.ContainerStats{
			cstat("c-app-0", at, 1, 0, 4096),
			cstat("c-app", at, appCPU, 200*mi, 10*mi),
			cstat("c-side", at, 0, 10*mi, 1*mi),
			cstat("c-db", at, 0, 500*mi, 2*mi),
		},
		imageFs: &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
			Timestamp: at.UnixNano(), FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: imageMount}, UsedBytes: u64(3 * gi), InodesUsed: u64(300)}}},
	}
}

func newProvider(t *testing.T, rt Runtime, node NodeSource, mutate func(*Config)) (*Provider, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	cfg := Config{NodeName: "node-1", Runtime: rt, Node: node, System: fakeSystem{}, Clock: clk,
		PodLogsDir: filepath.Join(t.TempDir(), "logs"), Logger: slog.New(slog.DiscardHandler)}
	if mutate != nil {
		mutate(&cfg)
	}
	return New(cfg), clk
}

func fsNode(at time.Time) *fakeNode {
	return &fakeNode{at: at, fs: map[string]*statsapi.FsStats{
		imageMount:  {CapacityBytes: ptr(20 * gi), AvailableBytes: ptr(15 * gi), Inodes: ptr(100), InodesFree: ptr(40)},
		layersMount: {CapacityBytes: ptr(50 * gi), AvailableBytes: ptr(45 * gi)},
	}}
}

func podByName(t *testing.T, s *statsapi.Summary, name string) *statsapi.PodStats {
	t.Helper()
	for i := range s.Pods {
		if s.Pods[i].PodRef.Name == name {
			return &s.Pods[i]
		}
	}
	t.Fatalf("no pod %s in the summary (%d pods)", name, len(s.Pods))
	return nil
}

func TestSummaryPodsAndContainers(t *testing.T) {
	rt := world(t0, 0)
	p, _ := newProvider(t, rt, fsNode(t0), nil)
	s, err := p.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ps := range s.Pods {
		names = append(names, ps.PodRef.Name+"/"+ps.PodRef.UID)
	}
	if fmt.Sprint(names) != "[db/uid-db web/uid-web]" {
		t.Fatalf("pods %v, want db and web (done terminated, db's old sandbox dropped)", names)
	}
	db := podByName(t, s, "db")
	if !db.StartTime.Time.Equal(t0.Add(time.Minute)) || len(db.Containers) != 1 || db.Containers[0].Name != "db" {
		t.Fatalf("db pod %+v", db)
	}
	web := podByName(t, s, "web")
	if len(web.Containers) != 2 || web.Containers[0].Name != "app" || web.Containers[1].Name != "sidecar" {
		t.Fatalf("web containers %+v, want app and sidecar (the exited attempt left out)", web.Containers)
	}
	app := web.Containers[0]
	if !app.StartTime.Time.Equal(t0.Add(time.Second)) || *app.Memory.WorkingSetBytes != 200*mi || *app.Memory.UsageBytes != 201*mi {
		t.Fatalf("app %+v memory %+v", app, app.Memory)
	}
	if r := app.Rootfs; *r.UsedBytes != 10*mi || *r.InodesUsed != 3 || *r.CapacityBytes != 50*gi || *r.AvailableBytes != 45*gi {
		t.Fatalf("app rootfs %+v", r)
	}
	// No sandbox stats from this runtime: the pod is its containers' sum.
	if *web.Memory.WorkingSetBytes != 210*mi || web.CPU == nil || web.Network != nil {
		t.Fatalf("web memory %+v cpu %+v network %+v", web.Memory, web.CPU, web.Network)
	}
	if got := *web.EphemeralStorage.UsedBytes; got != 11*mi || *web.EphemeralStorage.CapacityBytes != 100*gi {
		t.Fatalf("web ephemeral storage %+v (used %d), want the writable layers' 11Mi before any volume or log was measured", web.EphemeralStorage, got)
	}
	// The node.
	n := s.Node
	if n.NodeName != "node-1" || !n.StartTime.Time.Equal(t0.Add(-time.Hour)) || *n.Memory.WorkingSetBytes != 2*gi {
		t.Fatalf("node %+v", n)
	}
	img := n.Runtime.ImageFs
	if *img.UsedBytes != 3*gi || *img.InodesUsed != 300 || *img.CapacityBytes != 20*gi || *img.AvailableBytes != 15*gi || *img.Inodes != 100 {
		t.Fatalf("image fs %+v", img)
	}
	if cfs := n.Runtime.ContainerFs; cfs == nil || *cfs.CapacityBytes != 20*gi {
		t.Fatalf("container fs %+v, want the image filesystem's (no separate one)", cfs)
	}
	var sys []string
	for _, c := range n.SystemContainers {
		sys = append(sys, c.Name)
	}
	if fmt.Sprint(sys) != "[kubelet pods]" {
		t.Fatalf("system containers %v", sys)
	}
	pods := n.SystemContainers[1]
	if *pods.Memory.WorkingSetBytes != 710*mi || *pods.Memory.AvailableBytes != 8*gi-710*mi {
		t.Fatalf("pods system container memory %+v", pods.Memory)
	}
}

func TestSummarySandboxStats(t *testing.T) {
	rt := world(t0, 0)
	ts := t0.UnixNano()
	rt.sbStats = []*runtimeapi.PodSandboxStats{{
		Attributes: &runtimeapi.PodSandboxAttributes{Id: "sb-web"},
		Linux: &runtimeapi.LinuxPodSandboxStats{
			Cpu:     &runtimeapi.CpuUsage{Timestamp: ts, UsageCoreNanoSeconds: u64(7e9), UsageNanoCores: u64(250e6)},
			Memory:  &runtimeapi.MemoryUsage{Timestamp: ts, WorkingSetBytes: u64(300 * mi)},
			Network: &runtimeapi.NetworkUsage{Timestamp: ts, DefaultInterface: &runtimeapi.NetworkInterfaceUsage{Name: "eth0", RxBytes: u64(10), TxBytes: u64(20)}},
			Process: &runtimeapi.ProcessUsage{Timestamp: ts, ProcessCount: u64(7)},
		},
	}}
	p, _ := newProvider(t, rt, fsNode(t0), nil)
	s, err := p.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	web := podByName(t, s, "web")
	if *web.CPU.UsageNanoCores != 250e6 || *web.CPU.UsageCoreNanoSeconds != 7e9 || *web.Memory.WorkingSetBytes != 300*mi {
		t.Fatalf("web cpu %+v memory %+v, want the sandbox's", web.CPU, web.Memory)
	}
	if web.Network == nil || web.Network.Name != "eth0" || *web.Network.RxBytes != 10 || len(web.Network.Interfaces) != 1 {
		t.Fatalf("web network %+v", web.Network)
	}
	if *web.ProcessStats.ProcessCount != 7 {
		t.Fatalf("web processes %+v", web.ProcessStats)
	}
	// db has no sandbox stats: its container's sum.
	if db := podByName(t, s, "db"); *db.Memory.WorkingSetBytes != 500*mi {
		t.Fatalf("db memory %+v", db.Memory)
	}
}

func TestSummaryUnimplementedSandboxStatsAskedOnce(t *testing.T) {
	rt := world(t0, 0)
	p, _ := newProvider(t, rt, fsNode(t0), nil)
	for range 3 {
		if _, err := p.Summary(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := rt.calls["ListPodSandboxStats"]; n != 1 {
		t.Fatalf("ListPodSandboxStats asked %d times of a runtime without it", n)
	}
}

func TestSummaryCPURate(t *testing.T) {
	node := fsNode(t0)
	rt := world(t0, 1e9)
	p, _ := newProvider(t, rt, node, func(c *Config) { c.CPUWindow = 5 * time.Second })
	rates := func(at time.Time, appCPU, nodeCPU uint64) (app, node_ *uint64) {
		t.Helper()
		w := world(at, appCPU)
		rt.mu.Lock()
		rt.cstats = w.cstats
		rt.mu.Unlock()
		node.mu.Lock()
		node.at, node.cpu = at, nodeCPU
		node.mu.Unlock()
		s, err := p.Summary(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return podByName(t, s, "web").Containers[0].CPU.UsageNanoCores, s.Node.CPU.UsageNanoCores
	}
	if a, n := rates(t0, 1e9, 100e9); a != nil || n != nil {
		t.Fatalf("a first sample has a rate: app %v node %v", a, n)
	}
	// 10 s later: app used 5 core-seconds (0.5 core), node 20 (2 cores).
	if a, n := rates(t0.Add(10*time.Second), 6e9, 120e9); a == nil || *a != 500e6 || n == nil || *n != 2e9 {
		t.Fatalf("rates app %v node %v, want 0.5 and 2 cores", deref(a), deref(n))
	}
	// 1 s later, within the window: still measured from t0 over 11 s.
	if a, _ := rates(t0.Add(11*time.Second), 6.5e9, 122e9); a == nil || *a != uint64(5.5e9/11) {
		t.Fatalf("rate within the window %v, want %d", deref(a), uint64(5.5e9/11))
	}
	// A counter that went back (a restarted container) starts over.
	if a, _ := rates(t0.Add(20*time.Second), 1e6, 130e9); a != nil {
		t.Fatalf("rate after a reset %d", *a)
	}
}

func deref(p *uint64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestSummaryErrors(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		rtErr   string // failing runtime call
		node    func(*fakeNode)
		wantErr bool
		check   func(t *testing.T, s *statsapi.Summary)
	}{
		{name: "sandboxes", rtErr: "ListPodSandbox", wantErr: true},
		{name: "containers", rtErr: "ListContainers", wantErr: true},
		{name: "container stats", rtErr: "ListContainerStats", wantErr: true},
		{name: "image filesystem: left out", rtErr: "ImageFsInfo", check: func(t *testing.T, s *statsapi.Summary) {
			if s.Node.Runtime != nil || len(s.Pods) != 2 {
				t.Fatalf("runtime %+v, %d pods", s.Node.Runtime, len(s.Pods))
			}
		}},
		{name: "sandbox stats failing: sums", rtErr: "ListPodSandboxStats", check: func(t *testing.T, s *statsapi.Summary) {
			if *podByName(t, s, "web").Memory.WorkingSetBytes != 210*mi {
				t.Fatal("no container sums")
			}
		}},
		{name: "node source down: pods still there", node: func(n *fakeNode) { n.err = boom }, check: func(t *testing.T, s *statsapi.Summary) {
			if s.Node.CPU != nil || s.Node.NodeName != "node-1" || len(s.Pods) != 2 {
				t.Fatalf("node %+v pods %d", s.Node, len(s.Pods))
			}
		}},
		{name: "node source partial: what it has", node: func(n *fakeNode) { n.err, n.partial = boom, true }, check: func(t *testing.T, s *statsapi.Summary) {
			if s.Node.CPU == nil || s.Node.Memory != nil {
				t.Fatalf("node %+v", s.Node)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := world(t0, 0)
			if tt.rtErr != "" {
				rt.errs = map[string]error{tt.rtErr: boom}
			}
			node := fsNode(t0)
			if tt.node != nil {
				tt.node(node)
			}
			p, _ := newProvider(t, rt, node, nil)
			s, err := p.Summary(context.Background())
			if (err != nil) != tt.wantErr {
				t.Fatalf("Summary err = %v, wantErr %t", err, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
	t.Run("unconfigured", func(t *testing.T) {
		if _, err := New(Config{}).Summary(context.Background()); !errors.Is(err, errdefs.ErrFailedPrecondition) {
			t.Fatalf("Summary = %v", err)
		}
	})
}

func TestSummaryContainerFs(t *testing.T) {
	rt := world(t0, 0)
	rt.imageFs.ContainerFilesystems = []*runtimeapi.FilesystemUsage{{
		Timestamp: t0.UnixNano(), FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: layersMount}, UsedBytes: u64(13 * mi)}}
	p, _ := newProvider(t, rt, fsNode(t0), nil)
	s, err := p.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cfs := s.Node.Runtime.ContainerFs; *cfs.UsedBytes != 13*mi || *cfs.CapacityBytes != 50*gi {
		t.Fatalf("container fs %+v", cfs)
	}
}

// write creates a file of n bytes.
func write(t testing.TB, path string, n int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSummaryVolumesAndLogs(t *testing.T) {
	root, logs := t.TempDir(), t.TempDir()
	vol := filepath.Join(root, "pods", "uid-web", "volumes")
	write(t, filepath.Join(vol, "kubernetes.io~empty-dir", "scratch", "big"), 1*mi)
	write(t, filepath.Join(vol, "kubernetes.io~empty-dir", "scratch", "sub", "small"), 10)
	write(t, filepath.Join(vol, "kubernetes.io~secret", "token", "token"), 100)
	write(t, filepath.Join(vol, "kubernetes.io~configmap", "conf", "app.conf"), 64<<10)
	write(t, filepath.Join(logs, "default_web_uid-web", "app", "0.log"), 256<<10)
	write(t, filepath.Join(logs, "default_web_uid-web", "app", "1.log"), 256<<10)
	write(t, filepath.Join(logs, "default_web_uid-web", "sidecar", "0.log"), 10)
	write(t, filepath.Join(logs, "not-a-pod-dir", "x", "0.log"), 10)

	p, clk := newProvider(t, world(t0, 0), fsNode(t0), func(c *Config) {
		c.RootDir, c.PodLogsDir, c.VolumePeriod = root, logs, time.Minute
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	summary := func() *statsapi.PodStats {
		t.Helper()
		s, err := p.Summary(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return podByName(t, s, "web")
	}
	actortest.Eventually(t, "the first measurement", func() bool { return len(summary().VolumeStats) == 3 })
	web := summary()
	vols := map[string]statsapi.VolumeStats{}
	for _, v := range web.VolumeStats {
		vols[v.Name] = v
	}
	scratch := vols["scratch"]
	if *scratch.UsedBytes < 1*mi || *scratch.UsedBytes > 1*mi+64<<10 || *scratch.InodesUsed != 4 || *scratch.CapacityBytes == 0 {
		t.Fatalf("scratch volume used %d inodes %d capacity %v", *scratch.UsedBytes, *scratch.InodesUsed, scratch.CapacityBytes)
	}
	if _, ok := vols["token"]; !ok {
		t.Fatalf("volumes %v", vols)
	}
	app := web.Containers[0].Logs
	if *app.UsedBytes < 512<<10 || *app.UsedBytes > 600<<10 || *app.InodesUsed != 3 || *app.CapacityBytes != 100*gi {
		t.Fatalf("app logs %+v used %d", app, *app.UsedBytes)
	}
	// Ephemeral: writable layers + the pod's logs + emptyDir and configMap
	// (not the secret), as upstream.
	layers := uint64(11 * mi)
	wantMin := layers + *app.UsedBytes + *scratch.UsedBytes + *vols["conf"].UsedBytes
	if got := *web.EphemeralStorage.UsedBytes; got < wantMin || got >= wantMin+*vols["token"].UsedBytes+16<<10 {
		t.Fatalf("ephemeral used %d, want about %d (without the secret's %d)", got, wantMin, *vols["token"].UsedBytes)
	}

	// Usage grows between measurements: seen at the next period only.
	write(t, filepath.Join(vol, "kubernetes.io~empty-dir", "scratch", "more"), 4*mi)
	if got := *summary().VolumeStats[1].UsedBytes; got != *scratch.UsedBytes {
		t.Fatalf("a request measured the volume: %d", got)
	}
	actortest.Eventually(t, "the ticker", func() bool { return clk.HasWaiters() })
	clk.Step(time.Minute)
	actortest.Eventually(t, "the next measurement", func() bool {
		for _, v := range summary().VolumeStats {
			if v.Name == "scratch" {
				return *v.UsedBytes >= 5*mi
			}
		}
		return false
	})
}

// Sandbox stats that carry every running container's stats are used for
// the containers too (upstream's PodAndContainerStatsFromCRI): no second
// listing; one that misses a container falls back to ListContainerStats.
func TestSummaryContainersFromSandboxStats(t *testing.T) {
	for _, tt := range []struct {
		name       string
		coverAll   bool
		wantListed int
	}{
		{name: "every container in the sandbox stats", coverAll: true, wantListed: 0},
		{name: "a container missing", coverAll: false, wantListed: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rt := world(t0, 0)
			byPod := map[string][]*runtimeapi.ContainerStats{}
			dropped := false
			for _, cs := range rt.cstats {
				if !tt.coverAll && !dropped && running(rt, cs.GetAttributes().GetId()) {
					dropped = true // a running container the sandbox stats miss
					continue
				}
				byPod[podSandboxOf(rt, cs.GetAttributes().GetId())] = append(byPod[podSandboxOf(rt, cs.GetAttributes().GetId())], cs)
			}
			for sb, cs := range byPod {
				rt.sbStats = append(rt.sbStats, &runtimeapi.PodSandboxStats{
					Attributes: &runtimeapi.PodSandboxAttributes{Id: sb},
					Linux:      &runtimeapi.LinuxPodSandboxStats{Containers: cs},
				})
			}
			p, _ := newProvider(t, rt, fsNode(t0), nil)
			s, err := p.Summary(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if n := rt.calls["ListContainerStats"]; n != tt.wantListed {
				t.Fatalf("ListContainerStats asked %d times, want %d", n, tt.wantListed)
			}
			ctrs := 0
			for _, ps := range s.Pods {
				for _, c := range ps.Containers {
					if c.Memory == nil || c.Memory.WorkingSetBytes == nil {
						t.Fatalf("pod %s container %s has no memory figures", ps.PodRef.Name, c.Name)
					}
					ctrs++
				}
			}
			want := 0
			for _, c := range rt.containers {
				if running(rt, c.Id) {
					want++
				}
			}
			if ctrs != want {
				t.Fatalf("%d containers in the summary, want the %d running", ctrs, want)
			}
		})
	}
}

// running: the fake runtime's container id is running.
func running(rt *fakeRuntime, id string) bool {
	for _, c := range rt.containers {
		if c.Id == id {
			return c.State == runtimeapi.ContainerState_CONTAINER_RUNNING
		}
	}
	return false
}

// podSandboxOf is the sandbox of a container of the fake runtime.
func podSandboxOf(rt *fakeRuntime, id string) string {
	for _, c := range rt.containers {
		if c.Id == id {
			return c.PodSandboxId
		}
	}
	return ""
}
