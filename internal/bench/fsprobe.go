package bench

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// FileSystem is what the file system under the agent's directories costs
// when a run starts. Every pod start makes directories and files there
// (the pod's directory, its hosts file, termination-log files, the pod
// log directories), and on a file system that has made and deleted many
// inodes in the minutes before (ext4 without a journal skips each inode
// freed recently, reading its table block to see when) one inode costs
// up to 25 times what it costs on a fresh one: the same build's CPU per pod
// moves with the bench's own history. This says how much, so that two
// runs can be compared; put --root-dir on a tmpfs to take it out.
type FileSystem struct {
	// Type is the statfs type of the directory: ext4, xfs, btrfs, tmpfs,
	// overlay, or the magic number in hex.
	Type string `json:"type"`
	// InodeCPUMicros is the CPU (user and system, of the measuring thread)
	// per inode made, over fsProbeInodes directories and files made as a
	// pod's are (a directory, and a file in it), then removed.
	InodeCPUMicros float64 `json:"inode_cpu_us"`
}

const fsProbeInodes = 400

// probeFileSystem measures the file system of dir (the system's temporary
// directory when dir is ""). It makes its inodes in a directory of its
// own, which it removes.
func probeFileSystem(dir string) (FileSystem, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	var fs FileSystem
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fs, fmt.Errorf("file system probe: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fs, fmt.Errorf("file system probe: statfs %s: %w", dir, err)
	}
	fs.Type = fsTypeName(int64(st.Type))
	work, err := os.MkdirTemp(dir, "actorlet-fsprobe-")
	if err != nil {
		return fs, fmt.Errorf("file system probe: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }()

	// The CPU of this thread only: the rest of the machine (the agent of a
	// run before, the control plane) does not count.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := threadCPU()
	if err != nil {
		return fs, err
	}
	for i := range fsProbeInodes / 2 {
		d := filepath.Join(work, fmt.Sprintf("d%d", i))
		if err := os.Mkdir(d, 0o750); err != nil {
			return fs, fmt.Errorf("file system probe: %w", err)
		}
		f, err := os.OpenFile(filepath.Join(d, "f"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
		if err != nil {
			return fs, fmt.Errorf("file system probe: %w", err)
		}
		if err := f.Close(); err != nil {
			return fs, fmt.Errorf("file system probe: %w", err)
		}
	}
	after, err := threadCPU()
	if err != nil {
		return fs, err
	}
	fs.InodeCPUMicros = round(float64((after - before).Nanoseconds()) / 1e3 / fsProbeInodes)
	return fs, nil
}

// threadCPU is the calling thread's CPU time (user and system), as the
// scheduler counts it now: getrusage's figure for a running thread lags
// by up to a tick, longer than the whole probe on a fast file system.
func threadCPU() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, fmt.Errorf("file system probe: thread CPU clock: %w", err)
	}
	return time.Duration(ts.Nano()), nil
}

func fsTypeName(magic int64) string {
	switch magic {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlay"
	}
	return fmt.Sprintf("0x%x", magic)
}

// measureFileSystem is probeFileSystem for a run: nil, with a warning,
// when the probe fails (the run goes on without the figure).
func measureFileSystem(dir string, log *slog.Logger) *FileSystem {
	fs, err := probeFileSystem(dir)
	if err != nil {
		log.Warn("file system not measured", "err", err)
		return nil
	}
	log.Info("file system of the agent's directories", "type", fs.Type, "inode_cpu_us", fs.InodeCPUMicros)
	return &fs
}
