package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var draDriver builtBinary

// DRADriverBinary builds test/dradriver (the project's DRA test driver)
// with the race detector, once per test process, and returns its path.
func DRADriverBinary(t testing.TB) string {
	t.Helper()
	return draDriver.get(t, "./test/dradriver", func() (string, error) {
		dir, err := os.MkdirTemp("", "dradriver-test-bin")
		return filepath.Join(dir, "dradriver"), err
	})
}

// DRADriverOpts is how StartDRADriver runs the test driver.
type DRADriverOpts struct {
	Name       string // --driver-name; default dra.actorlet.dev
	Node       string // --node-name (required)
	Kubeconfig string // --kubeconfig (required): the node's own will do
	// RootDir is the agent's --root-dir: the driver registers in
	// <RootDir>/plugins_registry and serves in <RootDir>/plugins/<Name>.
	RootDir string
	CDIDir  string // --cdi-dir; default a temporary directory
	Devices int    // --devices; default 2
	Extra   []string
}

// DRADriver is a running test driver.
type DRADriver struct {
	Name         string
	RegistrarDir string
	PluginDir    string
	CDIDir       string
	StateFile    string // the driver's JSON-lines record of its calls
	LogPath      string // its stdout and stderr

	t    testing.TB
	cmd  *exec.Cmd
	done chan struct{}
}

// DRADriverCall is one line of the driver's state file.
type DRADriverCall struct {
	Time    time.Time `json:"time"`
	Op      string    `json:"op"` // registered, registration-failed, prepare, prepare-failed, prepare-abandoned, unprepare
	Claim   string    `json:"claim"`
	UID     string    `json:"uid"`
	Devices []string  `json:"devices"`
	CDI     []string  `json:"cdi"`
	Again   bool      `json:"again"` // a repeated prepare; an unprepare of a claim not prepared
	Error   string    `json:"error"`
}

// StartDRADriver builds and starts the test driver against an agent's root
// directory and stops it (SIGTERM) when the test ends, logging its output
// tail if the test failed. It returns once the driver's registration socket
// is there (not yet registered: see WaitRegistered).
func StartDRADriver(t testing.TB, o DRADriverOpts) *DRADriver {
	t.Helper()
	if o.Name == "" {
		o.Name = "dra.actorlet.dev"
	}
	if o.CDIDir == "" {
		o.CDIDir = t.TempDir()
	}
	if o.Devices == 0 {
		o.Devices = 2
	}
	d := &DRADriver{
		Name:         o.Name,
		RegistrarDir: filepath.Join(o.RootDir, "plugins_registry"),
		PluginDir:    filepath.Join(o.RootDir, "plugins", o.Name),
		CDIDir:       o.CDIDir,
		LogPath:      filepath.Join(t.TempDir(), "dradriver.log"),
		t:            t,
	}
	d.StateFile = filepath.Join(d.PluginDir, "calls.jsonl")
	args := append([]string{
		"--driver-name", o.Name, "--node-name", o.Node, "--kubeconfig", o.Kubeconfig,
		"--registrar-dir", d.RegistrarDir, "--plugin-dir", d.PluginDir, "--cdi-dir", o.CDIDir,
		"--devices", fmt.Sprint(o.Devices), "-v", "4",
	}, o.Extra...)
	f, err := os.Create(d.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(DRADriverBinary(t), args...)
	d.cmd.Stdout, d.cmd.Stderr = f, f
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d.done = make(chan struct{})
	go func() {
		_ = d.cmd.Wait()
		_ = f.Close()
		close(d.done)
	}()
	t.Cleanup(func() {
		d.Stop()
		if t.Failed() {
			t.Logf("dradriver log tail:\n%s", d.LogTail(40))
		}
	})
	sock := filepath.Join(d.RegistrarDir, o.Name+"-reg.sock")
	WaitFor(t, time.Minute, "the DRA driver's registration socket "+sock, func() (bool, error) {
		select {
		case <-d.done:
			return false, fmt.Errorf("dradriver exited: %s", d.LogTail(20))
		default:
		}
		_, err := os.Stat(sock)
		return err == nil, err
	})
	return d
}

// Stop ends the driver with SIGTERM (SIGKILL after 20 s) and waits for it.
func (d *DRADriver) Stop() {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// LogTail is the last n lines of the driver's output.
func (d *DRADriver) LogTail(n int) string {
	b, _ := os.ReadFile(d.LogPath)
	return tail(string(b), n)
}

// Calls reads the driver's state file (none yet: no calls).
func (d *DRADriver) Calls() ([]DRADriverCall, error) {
	return ReadDRADriverCalls(d.StateFile)
}

// ReadDRADriverCalls parses a test driver's state file; a missing file is
// no calls.
func ReadDRADriverCalls(path string) ([]DRADriverCall, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var calls []DRADriverCall
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var c DRADriverCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, sc.Text(), err)
		}
		calls = append(calls, c)
	}
	return calls, sc.Err()
}

// CallsFor is the calls of op for the claim of uid.
func (d *DRADriver) CallsFor(op, uid string) ([]DRADriverCall, error) {
	calls, err := d.Calls()
	var out []DRADriverCall
	for _, c := range calls {
		if c.Op == op && c.UID == uid {
			out = append(out, c)
		}
	}
	return out, err
}

// WaitRegistered waits until the agent has told the driver it is
// registered; a registration the agent refused fails the test with its
// error.
func (d *DRADriver) WaitRegistered(t testing.TB, timeout time.Duration) {
	t.Helper()
	WaitFor(t, timeout, "the agent to register DRA driver "+d.Name, func() (bool, error) {
		calls, err := d.Calls()
		for _, c := range calls {
			switch c.Op {
			case "registered":
				return true, nil
			case "registration-failed":
				t.Fatalf("the agent refused DRA driver %s: %s", d.Name, c.Error)
			}
		}
		return false, err
	})
}

// Specs lists the CDI spec files the driver has in its CDI directory: one
// per prepared claim.
func (d *DRADriver) Specs() ([]string, error) {
	ents, err := os.ReadDir(d.CDIDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), d.Name+"-") && strings.HasSuffix(e.Name(), ".json") {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// ContainerdCDIDir is the directory the local containerd reads CDI specs
// from (CDI_SPEC_DIR of `deploy/local/containerd.sh status`), "" where it
// cannot do CDI (the 1.x line). It brings containerd up like ContainerdInfo.
func ContainerdCDIDir(t testing.TB) string {
	t.Helper()
	ContainerdInfo(t)
	stdout, stderr, err := runScript(RepoRoot(t), "containerd.sh", time.Minute, "status")
	if err != nil {
		t.Fatalf("deploy/local/containerd.sh status: %v\n%s", err, tail(stderr, 30))
	}
	return parseLines(stdout)["CDI_SPEC_DIR"]
}
