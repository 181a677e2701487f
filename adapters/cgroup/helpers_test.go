package cgroup

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	actorcgroup "github.com/actorlet/actorlet/actors/cgroup"
	"github.com/actorlet/actorlet/podspec"
)

// The host driver is the CgroupActor's Manager (asserted here only:
// adapters do not import actors).
var _ actorcgroup.Manager = (*Cgroupfs)(nil)

// hogEnv makes the test binary a process that joins the cgroup
// directories it names (':'-separated), then dirties hogBytes of memory
// charged to them, says "ready" and waits for its stdin to close.
const (
	hogEnv   = "ACTORLET_CGLIB_HOG"
	hogBytes = 32 << 20
)

func TestMain(m *testing.M) {
	if dirs := os.Getenv(hogEnv); dirs != "" {
		os.Exit(hog(strings.Split(dirs, ":")))
	}
	os.Exit(m.Run())
}

func hog(dirs []string) int {
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	buf := make([]byte, hogBytes)
	for i := range buf {
		buf[i] = byte(i)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	fmt.Fprintln(io.Discard, buf[len(buf)-1])
	return 0
}

// needRealCgroups skips where the test cannot write the host's cgroups
// (not root), except under CI=true where it must run.
func needRealCgroups(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatal("CI=true: the real cgroup tests must run, as root")
	}
	tb.Skip("writing the host's cgroups needs root (under CI=true this test fails instead)")
}

// needHost skips a test whose host layout this machine does not have
// (why says which), and fails it under CI=true, where CI's machines have
// this host's layout and the real parts must run.
func needHost(tb testing.TB, ok bool, why string) {
	tb.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("CI=true: %s", why)
	}
	tb.Skip(why)
}

// uniqueParent is a cgroup name of the test's own, under the root.
func uniqueParent(tag string) podspec.CgroupName {
	return podspec.CgroupName{fmt.Sprintf("actorlet-cglib-%s-%d-%d", tag, os.Getpid(), time.Now().UnixNano())}
}

// startIn starts a process in every directory of the cgroup and stops it
// at the end of the test: `sleep`, or with hog the test binary as a
// memory hog that joins them before it allocates.
func startIn(t *testing.T, m *Cgroupfs, name podspec.CgroupName, hogMemory bool) *exec.Cmd {
	t.Helper()
	var dirs []string // devices: made by the runtime, never by the manager (as upstream)
	for _, d := range m.uniqueDirs(name) {
		if _, err := os.Stat(d); err == nil {
			dirs = append(dirs, d)
		}
	}
	var cmd *exec.Cmd
	var stdin io.WriteCloser
	if hogMemory {
		cmd = exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), hogEnv+"="+strings.Join(dirs, ":"))
		var err error
		if stdin, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	} else {
		cmd = exec.Command("sleep", "600")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	stop := func() {
		if done {
			return
		}
		done = true
		if stdin != nil {
			_ = stdin.Close()
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	t.Cleanup(stop)
	if hogMemory {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "ready\n" {
			t.Fatalf("memory hog did not get ready: %q, %v", line, err)
		}
		return cmd
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
			stop()
			t.Fatalf("move pid %d into %s: %v", cmd.Process.Pid, d, err)
		}
	}
	return cmd
}

// stopProcess kills and reaps a process startIn started.
func stopProcess(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

func readFile(t *testing.T, dir, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }
