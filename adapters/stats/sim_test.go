package stats

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/adapters/cri"
	"github.com/actorlet/actorlet/runtimes/sim"
)

// simNode is the simulated runtime served on a socket, with a CRI client
// and a Provider that uses the sim as its node source, as actorlet wires
// them for sim://.
type simNode struct {
	rt     *sim.Runtime
	client *cri.Client
	p      *Provider
	logs   string
}

func startSim(tb testing.TB, cfg sim.Config) *simNode {
	tb.Helper()
	dir := tb.TempDir()
	if cfg.IPBase == "" {
		cfg.IPBase = "127.79.0.1"
	}
	ep := "unix://" + filepath.Join(dir, "sim.sock")
	l, err := sim.Listen(ep)
	if err != nil {
		tb.Fatal(err)
	}
	r := sim.New(cfg)
	served := make(chan struct{})
	go func() { _ = r.Serve(l); close(served) }()
	tb.Cleanup(func() { r.Close(); <-served })
	c, err := cri.Dial(context.Background(), ep, 30*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	logs := filepath.Join(dir, "logs")
	p := New(Config{NodeName: "sim-node", Runtime: c, Node: r, RootDir: filepath.Join(dir, "root"), PodLogsDir: logs,
		Logger: slog.New(slog.DiscardHandler)})
	return &simNode{rt: r, client: c, p: p, logs: logs}
}

// runPod starts pod name with one container app running cmd, as actorlet
// labels them.
func (s *simNode) runPod(tb testing.TB, name string, cmd ...string) {
	tb.Helper()
	ctx := context.Background()
	uid := "uid-" + name
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: uid},
		LogDirectory: filepath.Join(s.logs, "default_"+name+"_"+uid),
		Labels: map[string]string{"io.kubernetes.pod.uid": uid, "io.kubernetes.pod.name": name,
			"io.kubernetes.pod.namespace": "default", "app": name},
		Annotations: map[string]string{"kubernetes.io/config.source": "file", "kubernetes.io/config.seen": "2026-01-01T00:00:00Z"},
	}
	sb, err := s.client.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		tb.Fatal(err)
	}
	id, err := s.client.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: "sim/preloaded/busybox:1"},
		Command:  cmd,
		LogPath:  "app/0.log",
		Labels: map[string]string{"io.kubernetes.pod.uid": uid, "io.kubernetes.pod.name": name,
			"io.kubernetes.pod.namespace": "default", "io.kubernetes.container.name": "app"},
		Annotations: map[string]string{"io.kubernetes.container.hash": "1234abcd", "io.kubernetes.container.restartCount": "0"},
	}, sbCfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.client.StartContainer(ctx, id); err != nil {
		tb.Fatal(err)
	}
}

func TestSummaryOnSim(t *testing.T) {
	s := startSim(t, sim.Config{NodeMemory: 8 * gi, NodeDisk: 20 * gi, ImageFsCapacity: 10 * gi, NodePIDs: 4096})
	s.runPod(t, "hog", "sh", "-c", "echo started; alloc 200Mi; fill /data 1Gi; spawn 50; sleep 3600")
	s.runPod(t, "idle", "sleep", "3600")
	s.p.fs.measure()
	sum, err := s.p.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hog := podByName(t, sum, "hog")
	app := hog.Containers[0]
	if ws := *app.Memory.WorkingSetBytes; ws < 200*mi || ws > 210*mi {
		t.Errorf("hog working set %d, want about 200Mi", ws)
	}
	if *app.CPU.UsageNanoCores != 10e6 {
		t.Errorf("hog cpu %d nanocores", *app.CPU.UsageNanoCores)
	}
	if r := app.Rootfs; *r.UsedBytes < gi || *r.CapacityBytes != 20*gi {
		t.Errorf("hog rootfs used %d of %d", *r.UsedBytes, *r.CapacityBytes)
	}
	if l := app.Logs; l == nil || *l.UsedBytes == 0 {
		t.Errorf("hog logs %+v (it wrote a line)", l)
	}
	if *hog.ProcessStats.ProcessCount != 52 || *hog.EphemeralStorage.UsedBytes < gi {
		t.Errorf("hog processes %d ephemeral %d", *hog.ProcessStats.ProcessCount, *hog.EphemeralStorage.UsedBytes)
	}
	n := sum.Node
	if *n.Memory.AvailableBytes+*n.Memory.WorkingSetBytes != 8*gi || *n.Memory.WorkingSetBytes < 200*mi {
		t.Errorf("node memory %+v", n.Memory)
	}
	if *n.Fs.CapacityBytes != 20*gi || *n.Fs.UsedBytes < gi || *n.Rlimit.MaxPID != 4096 {
		t.Errorf("node fs %+v rlimit %+v", n.Fs, n.Rlimit)
	}
	if img := n.Runtime.ImageFs; *img.CapacityBytes != 10*gi || *img.UsedBytes == 0 || *img.AvailableBytes != 10*gi-*img.UsedBytes {
		t.Errorf("image fs %+v", img)
	}
	if cfs := n.Runtime.ContainerFs; *cfs.CapacityBytes != 20*gi || *cfs.UsedBytes < gi {
		t.Errorf("container fs %+v", cfs)
	}
}

// BenchmarkSummary1000 measures a Summary of 1,000 running pods on the sim
// over its real gRPC socket (the target: under 100 ms a request, and a
// collection every 10 s under 1% of a core). cpu-ms/op is this process's
// CPU time per Summary, the sim's serving included; core-%@10s is that
// over a 10 s period.
func BenchmarkSummary1000(b *testing.B) {
	s := startSim(b, sim.Config{})
	for i := range 1000 {
		s.runPod(b, fmt.Sprintf("pod-%04d", i), "sh", "-c", "alloc 20Mi; sleep 3600")
	}
	s.p.fs.measure()
	ctx := context.Background()
	for _, bb := range []struct {
		name string
		json bool
	}{{"summary", false}, {"summary+json", true}} {
		b.Run(bb.name, func(b *testing.B) {
			var before, after syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			b.ResetTimer()
			for b.Loop() {
				sum, err := s.p.Summary(ctx)
				if err != nil || len(sum.Pods) != 1000 {
					b.Fatalf("summary of %d pods, %v", len(sum.Pods), err)
				}
				if bb.json {
					if _, err := json.Marshal(sum); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) / time.Duration(b.N)
			b.ReportMetric(float64(cpu)/float64(time.Millisecond), "cpu-ms/op")
			b.ReportMetric(100*float64(cpu)/float64(10*time.Second), "core-%@10s")
		})
	}
}

// BenchmarkMeasureVolumes1000 measures one background pass over 1,000 pods,
// each with an emptyDir of three files, a configMap and a container log
// (the pass runs every --volume-stats-agg-period, 1 m by default).
func BenchmarkMeasureVolumes1000(b *testing.B) {
	root, logs := b.TempDir(), b.TempDir()
	for i := range 1000 {
		uid := fmt.Sprintf("uid-%04d", i)
		vol := filepath.Join(root, "pods", uid, "volumes")
		for _, f := range []string{"kubernetes.io~empty-dir/cache/a", "kubernetes.io~empty-dir/cache/b", "kubernetes.io~empty-dir/cache/sub/c",
			"kubernetes.io~configmap/conf/app.conf"} {
			write(b, filepath.Join(vol, f), 1000)
		}
		write(b, filepath.Join(logs, fmt.Sprintf("default_pod-%04d_%s", i, uid), "app", "0.log"), 5000)
	}
	a := newFsAnalyzer(root, logs, clock.RealClock{}, slog.New(slog.DiscardHandler))
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ResetTimer()
	for b.Loop() {
		a.measure()
	}
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	if len(a.snapshot()) != 1000 {
		b.Fatalf("measured %d pods", len(a.snapshot()))
	}
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) / time.Duration(b.N)
	b.ReportMetric(float64(cpu)/float64(time.Millisecond), "cpu-ms/op")
	b.ReportMetric(100*float64(cpu)/float64(DefaultVolumePeriod), "core-%@1m")
}
