package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMemoryCgroupV1Root(t *testing.T) {
	for _, tc := range []struct {
		name, mountinfo, want, err string
	}{
		{
			name: "cgroup v1 hybrid",
			mountinfo: `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw`,
			want: "/sys/fs/cgroup/memory",
		},
		{
			name:      "memory co-mounted with other controllers, optional fields",
			mountinfo: `40 31 0:35 / /cg/mem+blk rw,relatime shared:9 master:1 - cgroup cgroup rw,blkio,memory`,
			want:      "/cg/mem+blk",
		},
		{
			name:      "cgroup v2 only",
			mountinfo: `30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate`,
			err:       "cgroup v2",
		},
		{name: "no cgroup at all", mountinfo: `22 1 8:1 / / rw - ext4 /dev/sda1 rw`, err: "no memory cgroup mounted"},
		{name: "garbage lines are skipped", mountinfo: "junk\n1 2 3\n- - -", err: "no memory cgroup mounted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mountinfo")
			if err := os.WriteFile(path, []byte(tc.mountinfo+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := memoryCgroupV1Root(path)
			if tc.err != "" {
				if !errors.Is(err, ErrMemoryNotifierUnsupported) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want ErrMemoryNotifierUnsupported saying %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("root = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestNewMemoryThresholdNotifierRefusesADirWithoutTheFiles(t *testing.T) {
	_, err := NewMemoryThresholdNotifier(t.TempDir())
	if !errors.Is(err, ErrMemoryNotifierUnsupported) {
		t.Fatalf("error %v, want ErrMemoryNotifierUnsupported", err)
	}
}

// testCgroup makes a child of the cgroup v1 memory root for the test, or
// skips where there is none or no right to make one.
func testCgroup(t *testing.T) string {
	t.Helper()
	root, err := memoryCgroupV1Root("/proc/self/mountinfo")
	if err != nil {
		t.Skipf("no cgroup v1 memory hierarchy here: %v", err)
	}
	dir := filepath.Join(root, fmt.Sprintf("actorlet-memthreshold-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup (root needed): %v", err)
	}
	t.Cleanup(func() {
		// No task is left in it; its page cache goes to the parent.
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove test cgroup: %v", err)
		}
	})
	return dir
}

// TestMemoryThresholdNotifierOnTheKernel: a process in a memory cgroup
// fills 32 MiB of page cache; the kernel signals the 8 MiB threshold.
func TestMemoryThresholdNotifierOnTheKernel(t *testing.T) {
	dir := testCgroup(t)
	n, err := NewMemoryThresholdNotifier(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.SetThresholds([]int64{8 << 20, 1 << 40}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	crossed := make(chan error, 1)
	go func() { crossed <- n.Wait(ctx) }()

	file := filepath.Join(t.TempDir(), "fill")
	cmd := exec.Command("/bin/sh", "-c", `echo $$ > "$1/cgroup.procs" && exec head -c 33554432 /dev/zero > "$2"`, "sh", dir, file)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fill the cgroup's memory: %v: %s", err, out)
	}
	if err := <-crossed; err != nil {
		t.Fatalf("Wait: %v, want the 8 MiB threshold crossed", err)
	}
}

func TestMemoryThresholdNotifierWaitEnds(t *testing.T) {
	dir := testCgroup(t)
	n, err := NewMemoryThresholdNotifier(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Before any threshold: the context ends the wait.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Wait(ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	// Armed with a threshold never reached, replaced, then closed.
	if err := n.SetThresholds([]int64{1 << 40}); err != nil {
		t.Fatal(err)
	}
	go func() { done <- n.Wait(context.Background()) }()
	if err := n.SetThresholds([]int64{1 << 41}); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Wait after Close = %v, want os.ErrClosed", err)
	}
	if err := n.SetThresholds([]int64{1 << 40}); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("SetThresholds after Close = %v, want os.ErrClosed", err)
	}
	if err := n.SetThresholds([]int64{0}); err == nil {
		t.Fatal("a zero threshold was accepted")
	}
}
