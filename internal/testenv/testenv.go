// Package testenv holds helpers for actorlet's integration tests: it brings
// up the real parts (a local containerd) through the scripts in deploy/ and
// waits on conditions with deadlines. Import it only from _test.go files.
package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// ExitCannotRun is the exit code of the deploy/ scripts for "this machine
// cannot run it" (not root, unsupported OS, packages not installable).
const ExitCannotRun = 3

// scriptTimeout bounds one run of a deploy script (a cold run may apt-get).
const scriptTimeout = 10 * time.Minute

// ContainerdEnv is what deploy/local/containerd.sh up prints.
type ContainerdEnv struct {
	Endpoint     string // CONTAINER_RUNTIME_ENDPOINT, unix:///...
	BusyboxImage string // BUSYBOX_IMAGE
	PauseImage   string // PAUSE_IMAGE
	Line         int    // CONTAINERD_LINE: 1 Debian's containerd 1.6, 2 containerd 2.x
	CDISpecDir   string // CDI_SPEC_DIR (line 2): where CDI specs go; "" without CDI
}

// containerdEnv reads the script's lines; ok is false when the endpoint
// or the busybox image is missing.
func containerdEnv(vals map[string]string) (ContainerdEnv, bool) {
	e := ContainerdEnv{
		Endpoint:     vals["CONTAINER_RUNTIME_ENDPOINT"],
		BusyboxImage: vals["BUSYBOX_IMAGE"],
		PauseImage:   vals["PAUSE_IMAGE"],
		Line:         1,
		CDISpecDir:   vals["CDI_SPEC_DIR"],
	}
	if vals["CONTAINERD_LINE"] == "2" {
		e.Line = 2
	}
	return e, e.Endpoint != "" && e.BusyboxImage != ""
}

var containerd part[ContainerdEnv]

// part is a real part brought up once per test process by a deploy script.
type part[E any] struct {
	once    sync.Once
	env     E
	skipMsg string // the machine cannot run it
	failMsg string // it broke
}

// get returns the part's env, or skips t (fails it when CI=true) where the
// machine cannot run it, or fails t where it broke. name is the part in
// messages, script the deploy script that brings it up.
func (p *part[E]) get(t testing.TB, name, script string) E {
	t.Helper()
	switch {
	case p.skipMsg != "" && os.Getenv("CI") == "true":
		t.Fatalf("%s needed but this machine cannot run it (CI=true): %s", name, p.skipMsg)
	case p.skipMsg != "":
		t.Skipf("skipping: this machine cannot run the local %s: %s", name, p.skipMsg)
	case p.failMsg != "":
		t.Fatalf("%s up failed: %s", script, p.failMsg)
	}
	return p.env
}

// up runs deploy/local/<script> up and records the outcome (as run).
func (p *part[E]) up(root, script string, timeout time.Duration, timeoutMsg string, parse func(vals map[string]string) (E, bool)) {
	p.run(root, script, "up", timeout, timeoutMsg, parse)
}

// run runs deploy/local/<script> <command> and records the outcome: exit 3
// (the machine cannot run it) as a skip; a timeout (with timeoutMsg, if
// any) or any other error as a failure; else the env that parse reads from
// the script's KEY=VALUE lines, a failure where parse says some are
// missing.
func (p *part[E]) run(root, script, command string, timeout time.Duration, timeoutMsg string, parse func(vals map[string]string) (E, bool)) {
	stdout, stderr, err := runScript(root, script, timeout, command)
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr) && exitErr.ExitCode() == ExitCannotRun:
		p.skipMsg = tail(stderr, 5)
		return
	case errors.Is(err, context.DeadlineExceeded) && timeoutMsg != "":
		p.failMsg = fmt.Sprintf("%s\n%s", timeoutMsg, tail(stderr, 30))
		return
	case err != nil:
		p.failMsg = fmt.Sprintf("%v\n%s", err, tail(stderr, 30))
		return
	}
	var ok bool
	if p.env, ok = parse(parseLines(stdout)); !ok {
		p.failMsg = fmt.Sprintf("unexpected output %q\n%s", stdout, tail(stderr, 30))
	}
}

// Containerd brings up the local containerd through deploy/local/containerd.sh
// up (once per test process) and returns its endpoint and busybox image. The
// line is the script's: ACTORLET_CONTAINERD_LINE (1, Debian's containerd 1.6,
// by default; 2, containerd 2.x built from the module proxy). When
// the machine cannot run it (not root, script exit 3) the test is skipped with
// the reason, or fails when CI=true. Any other failure fails the test with the
// tail of the script's stderr. The containerd stays up after the tests (fast
// re-runs); `deploy/local/containerd.sh down` removes it.
func Containerd(t testing.TB) (endpoint, busyboxImage string) {
	t.Helper()
	env := ContainerdInfo(t)
	return env.Endpoint, env.BusyboxImage
}

// ContainerdInfo is Containerd returning everything the script printed.
func ContainerdInfo(t testing.TB) ContainerdEnv {
	t.Helper()
	root := RepoRoot(t)
	containerd.once.Do(func() { upContainerd(root) })
	return containerd.get(t, "containerd", "deploy/local/containerd.sh")
}

func upContainerd(root string) {
	if os.Geteuid() != 0 {
		containerd.skipMsg = fmt.Sprintf("needs root (euid %d)", os.Geteuid())
		return
	}
	containerd.up(root, "containerd.sh", scriptTimeout, "", containerdEnv)
}

// runScript runs deploy/local/<name> with args. A timeout is reported as an
// error wrapping context.DeadlineExceeded.
func runScript(root, name string, timeout time.Duration, args ...string) (stdout, stderr string, err error) {
	return runScriptEnv(root, name, nil, timeout, args...)
}

// runScriptEnv is runScript with extra environment variables (nil: the
// test's own environment).
func runScriptEnv(root, name string, env []string, timeout time.Duration, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "deploy", "local", name), args...)
	cmd.Dir = root
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w: %v", ctx.Err(), err)
	}
	return out.String(), errb.String(), err
}

// parseLines reads KEY=VALUE lines.
func parseLines(s string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			out[k] = v
		}
	}
	return out
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// RepoRoot returns the repository root: the nearest directory at or above the
// working directory that holds go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("getwd: %v", err)
		return ""
	}
	root, err := findRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func findRoot(dir string) (string, error) {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod at or above %s", dir)
		}
		d = parent
	}
}

// WaitFor polls cond until it returns true or timeout passes, then fails the
// test naming what it waited for and cond's last error. cond's errors do not
// stop the wait. The poll interval starts short and grows to 250ms.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	interval := 10 * time.Millisecond
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return
		}
		if err != nil {
			lastErr = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s (last error: %v)", timeout, what, lastErr)
			return
		}
		time.Sleep(min(interval, time.Until(deadline)+time.Millisecond))
		interval = min(2*interval, 250*time.Millisecond)
	}
}

// CannotRun ends a test the machine cannot run: with CI=true a failure
// (there the real parts must run), else a skip that says why.
func CannotRun(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: the test must run)")
	}
	t.Skip("skipping: " + msg)
}

// NeedRoot stops a test that chowns or mounts where the test is not root:
// a failure with CI=true (CI runs as root), else a skip that says why.
func NeedRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		CannotRun(t, "needs root (chown, mount)")
	}
}
