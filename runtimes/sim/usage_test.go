package sim

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	mi = 1 << 20
	gi = 1 << 30
)

func (e *env) ctrStats(t *testing.T, id string) *runtimeapi.ContainerStats {
	t.Helper()
	resp, err := e.rt.ContainerStats(ctx(t), &runtimeapi.ContainerStatsRequest{ContainerId: id})
	if err != nil {
		t.Fatalf("ContainerStats: %v", err)
	}
	return resp.Stats
}

func (e *env) sbStats(t *testing.T, sb string) *runtimeapi.PodSandboxStats {
	t.Helper()
	resp, err := e.rt.PodSandboxStats(ctx(t), &runtimeapi.PodSandboxStatsRequest{PodSandboxId: sb})
	if err != nil {
		t.Fatalf("PodSandboxStats: %v", err)
	}
	return resp.Stats
}

// exec runs cmd in the container and returns its exit code and stderr.
func (e *env) exec(t *testing.T, id string, cmd ...string) (int32, string) {
	t.Helper()
	resp, err := e.rt.ExecSync(ctx(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: 10})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return resp.ExitCode, string(resp.Stderr)
}

// runLimited runs cmd in a fresh sandbox with a memory limit (0: none).
func (e *env) runLimited(t *testing.T, pod string, limit int64, cmd ...string) (sb, id string) {
	t.Helper()
	sb, sbCfg := e.runPod(t, pod)
	cfg := ctrConfig("c", cmd...)
	if limit > 0 {
		cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: limit}}
	}
	id = e.create(t, sb, sbCfg, cfg)
	e.start(t, id)
	return sb, id
}

func TestUsageMemory(t *testing.T) {
	e := newEnv(t, Config{NodeMemory: 2 * gi})
	c := ctx(t)
	base, err := e.r.NodeStats(c)
	if err != nil {
		t.Fatal(err)
	}
	sb, id := e.run(t, "hog", "sh", "-c", "alloc 200Mi; sleep 3600")
	st := e.ctrStats(t, id)
	if ws := st.Memory.WorkingSetBytes.GetValue(); ws < 200*mi || ws > 210*mi {
		t.Fatalf("working set %d, want about 200Mi", ws)
	}
	if st.Memory.AvailableBytes != nil {
		t.Fatalf("available %v without a limit", st.Memory.AvailableBytes)
	}
	if ws := e.sbStats(t, sb).Linux.Memory.WorkingSetBytes.GetValue(); ws < 200*mi {
		t.Fatalf("pod working set %d", ws)
	}
	node, err := e.r.NodeStats(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := *node.Memory.WorkingSetBytes - *base.Memory.WorkingSetBytes; got < 200*mi || got > 210*mi {
		t.Fatalf("node working set grew by %d, want about 200Mi", got)
	}
	if *node.Memory.AvailableBytes+*node.Memory.WorkingSetBytes != 2*gi {
		t.Fatalf("node available %d + working set %d != node-memory", *node.Memory.AvailableBytes, *node.Memory.WorkingSetBytes)
	}

	if code, _ := e.exec(t, id, "free", "150Mi"); code != 0 {
		t.Fatalf("free 150Mi exit %d", code)
	}
	if ws := e.ctrStats(t, id).Memory.WorkingSetBytes.GetValue(); ws < 50*mi || ws > 60*mi {
		t.Fatalf("working set after free 150Mi: %d", ws)
	}
	if code, _ := e.exec(t, id, "free"); code != 0 {
		t.Fatalf("free exit %d", code)
	}
	if ws := e.ctrStats(t, id).Memory.WorkingSetBytes.GetValue(); ws != ctrMemoryBytes {
		t.Fatalf("working set after free: %d", ws)
	}
	if code, stderr := e.exec(t, id, "alloc", "lots"); code != 1 || !strings.Contains(stderr, "invalid size") {
		t.Fatalf("alloc lots: exit %d, %q", code, stderr)
	}
}

func TestUsageOOMKill(t *testing.T) {
	tests := []struct {
		name  string
		limit int64
		cmd   string
	}{
		{"past the container's limit", 100 * mi, "alloc 50Mi; alloc 60Mi; sleep 3600"},
		{"past the node's memory", 0, "alloc 2Gi; sleep 3600"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{NodeMemory: 1 * gi})
			_, id := e.runLimited(t, "oom", tt.limit, "sh", "-c", tt.cmd)
			st := e.status(t, id)
			if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 || st.Reason != "OOMKilled" {
				t.Fatalf("status %s exit %d reason %q, want EXITED 137 OOMKilled", st.State, st.ExitCode, st.Reason)
			}
			if ws := e.ctrStats(t, id).Memory.WorkingSetBytes.GetValue(); ws != 0 {
				t.Fatalf("an OOM-killed container uses %d", ws)
			}
		})
	}
	t.Run("under the limit reports available", func(t *testing.T) {
		e := newEnv(t, Config{})
		_, id := e.runLimited(t, "fits", 100*mi, "sh", "-c", "alloc 50Mi; sleep 3600")
		st := e.ctrStats(t, id)
		if got := st.Memory.AvailableBytes.GetValue(); got != 100*mi-50*mi-ctrMemoryBytes {
			t.Fatalf("available %d", got)
		}
		if s := e.status(t, id); s.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("state %s", s.State)
		}
	})
}

func TestUsageDisk(t *testing.T) {
	e := newEnv(t, Config{NodeDisk: 10 * gi})
	c := ctx(t)
	_, id := e.run(t, "disk", "sh", "-c", "fill /data 1Gi; sleep 3600")
	used := func() uint64 { return e.ctrStats(t, id).WritableLayer.UsedBytes.GetValue() }
	if u := used(); u < gi || u > gi+mi {
		t.Fatalf("writable layer %d, want about 1Gi", u)
	}
	node, err := e.r.NodeStats(c)
	if err != nil {
		t.Fatal(err)
	}
	if *node.Fs.UsedBytes < baseDisk+gi || *node.Fs.CapacityBytes != 10*gi || *node.Fs.AvailableBytes != 10*gi-*node.Fs.UsedBytes {
		t.Fatalf("node fs %+v", node.Fs)
	}
	fs, err := e.r.FsInfo(c, ContainerFsMountpoint)
	if err != nil || *fs.UsedBytes != *node.Fs.UsedBytes {
		t.Fatalf("FsInfo(containers) = %+v, %v", fs, err)
	}
	info, err := e.img.ImageFsInfo(c, &runtimeapi.ImageFsInfoRequest{})
	if err != nil || len(info.ContainerFilesystems) != 1 || info.ContainerFilesystems[0].UsedBytes.GetValue() < gi {
		t.Fatalf("ImageFsInfo = %v, %v", info, err)
	}
	if code, _ := e.exec(t, id, "test", "-s", "/data"); code != 0 {
		t.Fatal("a filled file is empty")
	}
	if code, stderr := e.exec(t, id, "fill", "/more", "20Gi"); code != 1 || !strings.Contains(stderr, "No space left on device") {
		t.Fatalf("fill past the disk: exit %d, %q", code, stderr)
	}
	if code, _ := e.exec(t, id, "fill", "2Mi"); code != 0 {
		t.Fatal("fill without a file")
	}
	if code, _ := e.exec(t, id, "rm", "/data", "/fill"); code != 0 {
		t.Fatal("rm failed")
	}
	if u := used(); u > mi {
		t.Fatalf("writable layer after rm: %d", u)
	}
	if _, err := e.r.FsInfo(c, "/elsewhere"); err == nil {
		t.Fatal("FsInfo of an unknown path answered")
	}
}

func TestUsagePIDs(t *testing.T) {
	e := newEnv(t, Config{NodePIDs: 1000})
	c := ctx(t)
	sb, id := e.run(t, "forky", "sh", "-c", "spawn 50; sleep 3600")
	if n := e.sbStats(t, sb).Linux.Process.ProcessCount.GetValue(); n != 52 {
		t.Fatalf("pod processes %d, want 52 (pause, main, 50 spawned)", n)
	}
	node, err := e.r.NodeStats(c)
	if err != nil {
		t.Fatal(err)
	}
	if *node.Rlimit.MaxPID != 1000 || *node.Rlimit.NumOfRunningProcesses != basePIDs+52 {
		t.Fatalf("rlimit max %d cur %d", *node.Rlimit.MaxPID, *node.Rlimit.NumOfRunningProcesses)
	}
	if code, stderr := e.exec(t, id, "spawn", "5000"); code != 1 || !strings.Contains(stderr, "can't fork") {
		t.Fatalf("spawn past pid_max: exit %d, %q", code, stderr)
	}
	if code, _ := e.exec(t, id, "reap", "20"); code != 0 {
		t.Fatal("reap 20")
	}
	if n := e.sbStats(t, sb).Linux.Process.ProcessCount.GetValue(); n != 32 {
		t.Fatalf("pod processes after reap 20: %d", n)
	}
	if _, err := e.rt.StopContainer(c, &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if n := e.sbStats(t, sb).Linux.Process.ProcessCount.GetValue(); n != 1 {
		t.Fatalf("pod processes after the container stopped: %d", n)
	}
}

func TestImageSizes(t *testing.T) {
	e := newEnv(t, Config{ImageFsCapacity: 10 * gi, ImageSizes: map[string]string{
		"busybox": "5Mi", "nginx:1.27": "100Mi", "registry.example:5000/app": "1Gi"}})
	c := ctx(t)
	tests := []struct {
		ref  string
		want uint64 // 0: the deterministic default
	}{
		{"busybox:1.36", 5 * mi},
		{"docker.io/library/busybox:latest", 5 * mi},
		{"nginx:1.27", 100 * mi},
		{"nginx:1.26", 0},
		{"registry.example:5000/app:v2", gi},
	}
	var total uint64
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			e.pull(t, tt.ref)
			resp, err := e.img.ImageStatus(c, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: tt.ref}})
			if err != nil || resp.Image == nil {
				t.Fatalf("ImageStatus = %v, %v", resp, err)
			}
			size := resp.Image.Size
			total += size
			if tt.want != 0 && size != tt.want {
				t.Fatalf("size %d, want %d", size, tt.want)
			}
			if tt.want == 0 && (size < mi || size > 51*mi) {
				t.Fatalf("default size %d", size)
			}
		})
	}
	info, err := e.img.ImageFsInfo(c, &runtimeapi.ImageFsInfoRequest{})
	if err != nil || info.ImageFilesystems[0].UsedBytes.GetValue() != total || info.ImageFilesystems[0].FsId.Mountpoint != ImageFsMountpoint {
		t.Fatalf("ImageFsInfo = %v, %v (want used %d)", info, err, total)
	}
	fs, err := e.r.FsInfo(c, ImageFsMountpoint)
	if err != nil || *fs.CapacityBytes != 10*gi || *fs.UsedBytes != total || *fs.AvailableBytes != 10*gi-total {
		t.Fatalf("FsInfo(images) = %+v, %v", fs, err)
	}
}

func TestNodeFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    nodeConfig
		wantErr bool
	}{
		{"defaults", nil, nodeConfig{memory: DefaultNodeMemory, disk: DefaultNodeDisk, pids: DefaultNodePIDs, imageFs: DefaultImageFsCapacity}, false},
		{"all", []string{"--node-memory=8Gi", "--node-disk=100G", "--node-pids=4096", "--imagefs-capacity=10Gi", "--image-size=busybox=5Mi", "--image-size=nginx:1=1Mi"},
			nodeConfig{memory: 8 * gi, disk: 100e9, pids: 4096, imageFs: 10 * gi}, false},
		{"bad quantity", []string{"--node-memory=lots"}, nodeConfig{}, true},
		{"bad image size", []string{"--image-size=busybox=lots"}, nodeConfig{}, true},
		{"bad image reference", []string{"--image-size=Bad Name=1Mi"}, nodeConfig{}, true},
		{"negative pids", []string{"--node-pids=-1"}, nodeConfig{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg Config
			fs := pflag.NewFlagSet("sim", pflag.ContinueOnError)
			cfg.AddFlags(fs)
			err := fs.Parse(tt.args)
			if err == nil {
				err = cfg.Validate()
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %t", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			n := newNodeConfig(cfg)
			if n.memory != tt.want.memory || n.disk != tt.want.disk || n.pids != tt.want.pids || n.imageFs != tt.want.imageFs {
				t.Fatalf("node = %+v, want %+v", n, tt.want)
			}
			if len(n.sizes) != len(cfg.ImageSizes) {
				t.Fatalf("sizes %+v from %v", n.sizes, cfg.ImageSizes)
			}
		})
	}
}

func TestNodeStatsCPU(t *testing.T) {
	e := newEnv(t, Config{})
	c := ctx(t)
	_, id := e.run(t, "cpu", "sleep", "infinity")
	a, err := e.r.NodeStats(c)
	if err != nil {
		t.Fatal(err)
	}
	if *a.CPU.UsageNanoCores != baseNanoCores+ctrNanoCores {
		t.Fatalf("node nano cores %d", *a.CPU.UsageNanoCores)
	}
	// Removing a container keeps its CPU time in the node's counter.
	if _, err := e.rt.RemoveContainer(c, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	b, err := e.r.NodeStats(c)
	if err != nil {
		t.Fatal(err)
	}
	if *b.CPU.UsageCoreNanoSeconds < *a.CPU.UsageCoreNanoSeconds {
		t.Fatalf("node CPU went back: %d then %d", *a.CPU.UsageCoreNanoSeconds, *b.CPU.UsageCoreNanoSeconds)
	}
	if *b.CPU.UsageNanoCores != baseNanoCores {
		t.Fatalf("node nano cores %d after removal", *b.CPU.UsageNanoCores)
	}
}
