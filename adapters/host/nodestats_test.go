package host

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeFiles writes name -> content under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const (
	procStat = "cpu  100 20 30 4000 50 6 7 8 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nbtime 1700000000\n"
	meminfo  = "MemTotal:       8000000 kB\nMemFree:        1000000 kB\nInactive(file):  500000 kB\nAnonPages:      2000000 kB\nSwapTotal:      1000 kB\nSwapFree:       400 kB\n"
	netDev   = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 999 9 0 0 0 0 0 0 999 9 0 0 0 0 0 0
  ens5: 1000 10 1 0 0 0 0 0 2000 20 2 0 0 0 0 0
veth12: 5 1 0 0 0 0 0 0 5 1 0 0 0 0 0 0
`
	netRoute = "Iface\tDestination\tGateway\tFlags\nens5\t00000000\t0100000A\t0003\nens5\t0000000A\t00000000\t0001\n"
)

func TestNodeStats(t *testing.T) {
	procFiles := map[string]string{
		"stat": procStat, "meminfo": meminfo, "net/dev": netDev, "net/route": netRoute,
		"sys/kernel/pid_max": "4194304\n", "sys/kernel/threads-max": "95000\n", "loadavg": "0.1 0.2 0.3 2/345 999\n",
	}
	tests := []struct {
		name   string
		cgroup map[string]string
		// want
		cpu, usage, ws, rss, pgfault uint64
	}{
		{"cgroup v1", map[string]string{
			"cpuacct/cpuacct.usage":        "123456789\n",
			"memory/memory.usage_in_bytes": "6000000000\n",
			"memory/memory.stat":           "cache 1\ntotal_inactive_file 1000000000\ntotal_rss 3000000000\ntotal_pgfault 77\ntotal_pgmajfault 3\n",
		}, 123456789, 6000000000, 5000000000, 3000000000, 77},
		{"cgroup v2", map[string]string{
			"cgroup.controllers": "cpu memory\n",
			"cpu.stat":           "usage_usec 5000\nuser_usec 3000\n",
			"memory.stat":        "anon 100\ninactive_file 2000000000\npgfault 5\npgmajfault 1\n",
		}, 5_000_000, 7000000 * 1024, 7000000*1024 - 2000000000, 100, 5},
		{"cgroup v2 without root files: /proc", map[string]string{
			"cgroup.controllers": "cpu memory\n",
		}, (100 + 20 + 30 + 6 + 7 + 8) * 10_000_000, 7000000 * 1024, 6500000 * 1024, 2000000 * 1024, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proc, cg := filepath.Join(t.TempDir(), "proc"), filepath.Join(t.TempDir(), "cgroup")
			writeFiles(t, proc, procFiles)
			writeFiles(t, cg, tt.cgroup)
			root := t.TempDir()
			at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			s := &Stats{RootDir: filepath.Join(root, "not", "yet"), ProcDir: proc, CgroupDir: cg, Now: func() time.Time { return at }}
			ns, err := s.NodeStats(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !ns.StartTime.Time.Equal(time.Unix(1700000000, 0)) {
				t.Errorf("start time %v", ns.StartTime)
			}
			if got := *ns.CPU.UsageCoreNanoSeconds; got != tt.cpu || !ns.CPU.Time.Time.Equal(at) {
				t.Errorf("cpu %d at %v, want %d", got, ns.CPU.Time, tt.cpu)
			}
			m := ns.Memory
			if *m.UsageBytes != tt.usage || *m.WorkingSetBytes != tt.ws || *m.RSSBytes != tt.rss {
				t.Errorf("memory usage %d ws %d rss %d, want %d %d %d", *m.UsageBytes, *m.WorkingSetBytes, *m.RSSBytes, tt.usage, tt.ws, tt.rss)
			}
			if *m.AvailableBytes != 8000000*1024-tt.ws {
				t.Errorf("available %d", *m.AvailableBytes)
			}
			if tt.pgfault != 0 && *m.PageFaults != tt.pgfault {
				t.Errorf("page faults %d", *m.PageFaults)
			}
			if *ns.Swap.SwapUsageBytes != 600*1024 || *ns.Swap.SwapAvailableBytes != 400*1024 {
				t.Errorf("swap %+v", ns.Swap)
			}
			if len(ns.Network.Interfaces) != 1 || ns.Network.Name != "ens5" || *ns.Network.RxBytes != 1000 || *ns.Network.TxBytes != 2000 ||
				*ns.Network.RxErrors != 1 || *ns.Network.TxErrors != 2 {
				t.Errorf("network %+v", ns.Network)
			}
			if *ns.Fs.CapacityBytes == 0 || *ns.Fs.AvailableBytes > *ns.Fs.CapacityBytes {
				t.Errorf("fs %+v", ns.Fs)
			}
			if *ns.Rlimit.MaxPID != 95000 || *ns.Rlimit.NumOfRunningProcesses != 345 {
				t.Errorf("rlimit max %d cur %d", *ns.Rlimit.MaxPID, *ns.Rlimit.NumOfRunningProcesses)
			}
		})
	}
}

func TestNodeStatsErrors(t *testing.T) {
	t.Run("nothing readable", func(t *testing.T) {
		s := &Stats{ProcDir: t.TempDir(), CgroupDir: t.TempDir()}
		if ns, err := s.NodeStats(context.Background()); err == nil || ns != nil {
			t.Fatalf("NodeStats = %v, %v; want an error", ns, err)
		}
	})
	t.Run("partial", func(t *testing.T) {
		proc := t.TempDir()
		writeFiles(t, proc, map[string]string{"stat": procStat})
		s := &Stats{ProcDir: proc, CgroupDir: t.TempDir()}
		ns, err := s.NodeStats(context.Background())
		if err == nil || ns == nil || ns.CPU == nil || ns.Memory != nil {
			t.Fatalf("NodeStats = %+v, %v; want the CPU and an error", ns, err)
		}
	})
	t.Run("fs info of a missing path", func(t *testing.T) {
		s := &Stats{}
		if _, err := s.FsInfo(context.Background(), filepath.Join(t.TempDir(), "missing")); err == nil {
			t.Fatal("FsInfo of a missing path answered")
		}
	})
}

// TestNodeStatsThisMachine reads the real machine: the figures must be
// plausible against /proc/meminfo and statfs.
func TestNodeStatsThisMachine(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc on this machine")
	}
	root := t.TempDir()
	s := &Stats{RootDir: root}
	ns, err := s.NodeStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	total, err := memTotal("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	if ns.CPU == nil || *ns.CPU.UsageCoreNanoSeconds == 0 {
		t.Errorf("cpu %+v", ns.CPU)
	}
	if ws := *ns.Memory.WorkingSetBytes; ws == 0 || ws > uint64(total) || *ns.Memory.AvailableBytes+ws != uint64(total) {
		t.Errorf("working set %d available %d of %d", ws, *ns.Memory.AvailableBytes, total)
	}
	if *ns.Rlimit.NumOfRunningProcesses <= 0 || *ns.Rlimit.MaxPID <= 0 {
		t.Errorf("rlimit %+v", ns.Rlimit)
	}
	fs, err := s.FsInfo(context.Background(), root)
	if err != nil || *fs.CapacityBytes != *ns.Fs.CapacityBytes {
		t.Errorf("FsInfo(root) = %+v, %v; node fs %+v", fs, err, ns.Fs)
	}
	sys, err := s.SystemContainers(context.Background())
	if err != nil || len(sys) != 1 || sys[0].Name != "kubelet" || *sys[0].Memory.WorkingSetBytes == 0 ||
		sys[0].StartTime.After(time.Now()) || sys[0].StartTime.Before(&ns.StartTime) {
		t.Errorf("system containers %+v, %v", sys, err)
	}
}
