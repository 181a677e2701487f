package fakesystemd

import (
	"bytes"
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

// exitCannotRun is the deploy/local scripts' exit status for "this machine
// cannot run it".
const exitCannotRun = 3

// StartBus brings up a private dbus-daemon with deploy/local/dbus.sh up in a
// state dir of the test's own and returns its address; the daemon is taken
// down (dbus.sh down) when the test ends. Where the machine cannot run it
// (the script exits 3) the test is skipped, or fails with CI=true.
func StartBus(t testing.TB) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// short: the socket path must fit a sockaddr_un
	dir, err := os.MkdirTemp("", "fsd")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"ACTORLET_DBUS_DIR=" + filepath.Join(dir, "bus")}
	t.Cleanup(func() {
		if _, stderr, err := runScript(root, env, "down"); err != nil {
			t.Errorf("dbus.sh down: %v\n%s", err, stderr)
		}
		_ = os.RemoveAll(dir)
	})
	stdout, stderr, err := runScript(root, env, "up")
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr) && exitErr.ExitCode() == exitCannotRun:
		if os.Getenv("CI") == "true" {
			t.Fatalf("dbus-daemon needed but this machine cannot run it (CI=true): %s", stderr)
		}
		t.Skipf("skipping: this machine cannot run dbus-daemon: %s", stderr)
	case err != nil:
		t.Fatalf("dbus.sh up: %v\n%s", err, stderr)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(stdout), "DBUS_SYSTEM_BUS_ADDRESS=")
	if !ok || addr == "" {
		t.Fatalf("dbus.sh up: unexpected output %q", stdout)
	}
	return addr
}

func runScript(root string, env []string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "deploy", "local", "dbus.sh"), args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	return out.String(), errb.String(), err
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod at or above %s", dir)
		}
	}
}

// MakeTree lays out a fake cgroup tree at root (an existing directory) for
// cgroup version 1 or 2: v1, a directory per hierarchy (cpu, cpuacct,
// cpuset with the root's cpuset.cpus "0-1" and cpuset.mems "0", memory,
// pids, systemd), each with an empty cgroup.procs; v2, the root's
// cgroup.controllers ("cpuset cpu io memory hugetlb pids"), an empty
// cgroup.subtree_control and cgroup.procs. Clients of a fake tree must
// accept plain files (opencontainers/cgroups: cgroups.TestMode).
func MakeTree(root string, version int) error {
	write := func(path, data string) error {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		return os.WriteFile(path, []byte(data), 0o644)
	}
	switch version {
	case 1:
		for _, h := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "systemd"} {
			if err := write(filepath.Join(root, h, "cgroup.procs"), ""); err != nil {
				return err
			}
		}
		if err := write(filepath.Join(root, "cpuset", "cpuset.cpus"), "0-1\n"); err != nil {
			return err
		}
		return write(filepath.Join(root, "cpuset", "cpuset.mems"), "0\n")
	case 2:
		for f, data := range map[string]string{
			"cgroup.controllers":     "cpuset cpu io memory hugetlb pids\n",
			"cgroup.subtree_control": "",
			"cgroup.procs":           "",
		} {
			if err := write(filepath.Join(root, f), data); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("fakesystemd: cgroup version %d (want 1 or 2)", version)
}
