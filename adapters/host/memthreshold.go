package host

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel's memory threshold notification, for the EvictionActor's
// faster path on memory (upstream's memoryThresholdNotifier and
// CgroupNotifier).
//
// cgroup v1: an eventfd is registered in the memory cgroup's
// cgroup.event_control against memory.usage_in_bytes with a usage
// threshold ("<eventfd> <usage fd> <bytes>"); the kernel signals the
// eventfd each time the usage crosses it (up or down). Several thresholds
// are registered on one eventfd; setting them again registers a fresh
// eventfd and closes the old one (closing it unregisters its thresholds).
//
// cgroup v2 has no such registration: memory.events only counts the low,
// high, max and oom events of the limits, and memory.current can be
// polled but is not edge-triggered on a threshold; PSI triggers
// (memory.pressure) signal stalls, not an amount available. Like the
// upstream kubelet (whose notifier is cgroup v1 only), actorlet then has
// no notifier: NewMemoryThresholdNotifier returns
// ErrMemoryNotifierUnsupported and the eviction checks memory every
// housekeeping period (10 s).

// ErrMemoryNotifierUnsupported: the kernel cannot notify memory usage
// thresholds here (cgroup v2, no memory cgroup, no access to it).
var ErrMemoryNotifierUnsupported = errors.New("memory threshold notification unsupported")

// MemoryThresholdNotifier tells when the usage of a cgroup v1 memory
// cgroup crosses a threshold. Safe for concurrent use: SetThresholds from
// one goroutine while Wait blocks in another.
type MemoryThresholdNotifier struct {
	dir string

	mu     sync.Mutex
	efd    *os.File      // the current eventfd; nil until SetThresholds
	armed  chan struct{} // closed when efd changes or on Close
	closed bool
}

// NewMemoryThresholdNotifier returns a notifier for the memory cgroup in
// dir; "" is the root memory cgroup (the node's usage) found in
// /proc/self/mountinfo. The error wraps ErrMemoryNotifierUnsupported when
// the kernel cannot do it here, saying why.
func NewMemoryThresholdNotifier(dir string) (*MemoryThresholdNotifier, error) {
	if dir == "" {
		root, err := memoryCgroupV1Root("/proc/self/mountinfo")
		if err != nil {
			return nil, err
		}
		dir = root
	}
	for _, f := range []string{"memory.usage_in_bytes", "cgroup.event_control"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrMemoryNotifierUnsupported, filepath.Join(dir, f), err)
		}
	}
	// Writable? A registration is a write; try it with no threshold set
	// yet by opening the control file.
	f, err := os.OpenFile(filepath.Join(dir, "cgroup.event_control"), os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMemoryNotifierUnsupported, err)
	}
	_ = f.Close()
	return &MemoryThresholdNotifier{dir: dir, armed: make(chan struct{})}, nil
}

// memoryCgroupV1Root finds the mount point of the cgroup v1 memory
// hierarchy in a mountinfo file.
func memoryCgroupV1Root(mountinfo string) (string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrMemoryNotifierUnsupported, err)
	}
	defer f.Close()
	v2 := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(tail) < 3 {
			continue
		}
		switch tail[0] {
		case "cgroup":
			for _, opt := range strings.Split(tail[2], ",") {
				if opt == "memory" {
					return fields[4], nil
				}
			}
		case "cgroup2":
			v2 = true
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("%w: read %s: %w", ErrMemoryNotifierUnsupported, mountinfo, err)
	}
	if v2 {
		return "", fmt.Errorf("%w: cgroup v2 (no usage threshold notification; memory is checked every housekeeping period)", ErrMemoryNotifierUnsupported)
	}
	return "", fmt.Errorf("%w: no memory cgroup mounted", ErrMemoryNotifierUnsupported)
}

// SetThresholds registers the usage thresholds (bytes) in place of the
// ones set before.
func (n *MemoryThresholdNotifier) SetThresholds(usageBytes []int64) error {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	efd := os.NewFile(uintptr(fd), "memory-threshold-eventfd")
	if err := n.register(fd, usageBytes); err != nil {
		_ = efd.Close()
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		_ = efd.Close()
		return os.ErrClosed
	}
	old := n.efd
	n.efd = efd
	close(n.armed)
	n.armed = make(chan struct{})
	if old != nil {
		_ = old.Close() // unregisters its thresholds; a Wait on it moves on
	}
	return nil
}

// register writes one registration per threshold for the eventfd.
func (n *MemoryThresholdNotifier) register(efd int, usageBytes []int64) error {
	usage, err := os.Open(filepath.Join(n.dir, "memory.usage_in_bytes"))
	if err != nil {
		return fmt.Errorf("open memory usage: %w", err)
	}
	defer usage.Close()
	control, err := os.OpenFile(filepath.Join(n.dir, "cgroup.event_control"), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open cgroup.event_control: %w", err)
	}
	defer control.Close()
	for _, b := range usageBytes {
		if b <= 0 {
			return fmt.Errorf("memory threshold %d: must be positive", b)
		}
		line := strconv.Itoa(efd) + " " + strconv.Itoa(int(usage.Fd())) + " " + strconv.FormatInt(b, 10)
		if _, err := control.WriteString(line); err != nil {
			return fmt.Errorf("register memory threshold %d bytes in %s: %w", b, n.dir, err)
		}
	}
	return nil
}

// Wait blocks until the usage crosses a threshold (nil), ctx ends
// (ctx.Err()) or the notifier is closed (os.ErrClosed). Before the first
// SetThresholds it waits for one.
func (n *MemoryThresholdNotifier) Wait(ctx context.Context) error {
	buf := make([]byte, 8)
	for {
		n.mu.Lock()
		efd, armed, closed := n.efd, n.armed, n.closed
		n.mu.Unlock()
		if closed {
			return os.ErrClosed
		}
		if efd == nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-armed:
				continue
			}
		}
		stop := context.AfterFunc(ctx, func() { _ = efd.SetReadDeadline(time.Now()) })
		_, err := efd.Read(buf)
		stop()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, os.ErrClosed):
			continue // replaced by SetThresholds, or closed
		default:
			return fmt.Errorf("read memory threshold eventfd: %w", err)
		}
	}
}

// Close unregisters the thresholds and ends Wait.
func (n *MemoryThresholdNotifier) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	close(n.armed)
	if n.efd != nil {
		return n.efd.Close()
	}
	return nil
}
