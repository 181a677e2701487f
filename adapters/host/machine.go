// Package host reads facts about the machine actorlet runs on: CPU and
// memory capacity, the filesystem under the root dir, kernel, OS image, boot
// and machine IDs. Outbound adapter: it imports neither actors nor messages.
package host

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Machine reads the machine's facts; RootDir is where the ephemeral storage
// capacity is measured (the kubelet's root dir).
type Machine struct {
	RootDir string
	// ProcDir and EtcDir default to /proc and /etc (tests point elsewhere).
	ProcDir, EtcDir string
}

// Info returns the node's system info and capacity (cpu, memory,
// ephemeral-storage).
func (m *Machine) Info(_ context.Context) (v1.NodeSystemInfo, v1.ResourceList, error) {
	proc, etc := m.ProcDir, m.EtcDir
	if proc == "" {
		proc = "/proc"
	}
	if etc == "" {
		etc = "/etc"
	}
	info := v1.NodeSystemInfo{
		OperatingSystem: runtime.GOOS,
		Architecture:    runtime.GOARCH,
		KernelVersion:   readTrim(proc + "/sys/kernel/osrelease"),
		BootID:          readTrim(proc + "/sys/kernel/random/boot_id"),
		MachineID:       readTrim(etc + "/machine-id"),
		SystemUUID:      readTrim("/sys/class/dmi/id/product_uuid"),
		OSImage:         osImage(etc + "/os-release"),
	}
	if info.MachineID == "" {
		info.MachineID = readTrim("/var/lib/dbus/machine-id")
	}
	capacity := v1.ResourceList{
		v1.ResourceCPU: *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
	}
	mem, err := memTotal(proc + "/meminfo")
	if err != nil {
		return info, capacity, err
	}
	capacity[v1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
	if m.RootDir != "" {
		size, err := fsSize(m.RootDir)
		if err != nil {
			return info, capacity, err
		}
		capacity[v1.ResourceEphemeralStorage] = *resource.NewQuantity(size, resource.BinarySI)
	}
	return info, capacity, nil
}

// fsSize is the size of the filesystem holding dir, or that will hold it:
// a dir not made yet (a first start) is measured at its nearest existing
// parent.
func fsSize(dir string) (int64, error) {
	p := filepath.Clean(dir)
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(p, &st)
		if err == nil {
			return int64(st.Blocks) * st.Bsize, nil
		}
		parent := filepath.Dir(p)
		if !errors.Is(err, syscall.ENOENT) || parent == p {
			return 0, fmt.Errorf("statfs %s: %w", p, err)
		}
		p = parent
	}
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// osImage is PRETTY_NAME from os-release, as upstream.
func osImage(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "Unknown"
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("PRETTY_NAME=")); ok {
			return strings.Trim(string(v), `"'`)
		}
	}
	return "Unknown"
}

func memTotal(p string) (int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, fmt.Errorf("meminfo: %w", err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("meminfo MemTotal %q: %w", fields[1], err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("meminfo: no MemTotal in %s", p)
}
