package sim

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkExecSyncProbe is one exec readiness probe of the probes bench
// scenario (`sh -c "echo x >> /tmp/probes"`, 1 s timeout) through the sim
// over its real gRPC socket, client and server in this process, as in the
// agent on sim://: the steady per-probe cost (CPU per op, allocations)
// that the 1,000-pod run's wall-clock figures are too noisy to show on a
// shared machine.
func BenchmarkExecSyncProbe(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "sim.sock")
	l, err := Listen("unix://" + sock)
	if err != nil {
		b.Fatal(err)
	}
	r := New(Config{IPBase: testIPBase})
	served := make(chan struct{})
	go func() { _ = r.Serve(l); close(served) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close(); r.Close(); <-served }()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	ctx := context.Background()
	sbCfg := sandboxConfig("bench", false, map[string]string{"app": "bench"})
	sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		b.Fatal(err)
	}
	c, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId,
		Config: ctrConfig("c", "sleep", "infinity"), SandboxConfig: sbCfg})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		b.Fatal(err)
	}
	req := &runtimeapi.ExecSyncRequest{ContainerId: c.ContainerId, Cmd: []string{"sh", "-c", "echo x >> /tmp/probes"}, Timeout: 1}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := rt.ExecSync(ctx, req)
			if err != nil || resp.ExitCode != 0 {
				b.Errorf("exec: %v %v", resp, err)
				return
			}
		}
	})
	b.StopTimer()
	// The process's CPU per probe, both ends: steadier than ns/op on a
	// shared machine.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	// The file holds one line per probe: the effect the bench counts.
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.containers[c.ContainerId].fs["/tmp/probes"]); n != 2*b.N {
		b.Fatalf("/tmp/probes holds %d bytes after %d probes, want %d", n, b.N, 2*b.N)
	}
}

// cpuTime is the process's user and system CPU so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
