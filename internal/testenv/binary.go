package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// builtBinary is a command of this module built with the race detector at
// most once per test process; every test that runs it shares the build.
type builtBinary struct {
	once sync.Once
	path string
	err  error
}

// get builds pkg into the file path() names, once, and returns its path.
func (b *builtBinary) get(t testing.TB, pkg string, path func() (string, error)) string {
	t.Helper()
	root := RepoRoot(t)
	b.once.Do(func() {
		if b.path, b.err = path(); b.err != nil {
			return
		}
		cmd := exec.Command("go", "build", "-race", "-o", b.path, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

var actorlet, actorletBench builtBinary

// ActorletBinary builds cmd/actorlet with the race detector, once per test
// process, and returns its path (tests that run the real binary share it).
func ActorletBinary(t testing.TB) string {
	t.Helper()
	return actorlet.get(t, "./cmd/actorlet", func() (string, error) {
		dir, err := os.MkdirTemp("", "actorlet-test-bin")
		return filepath.Join(dir, "actorlet"), err
	})
}

// ActorletBenchBinary builds cmd/actorlet-bench with the race detector,
// once per test process, into the directory of ActorletBinary's actorlet,
// and returns its path: run without --actorlet, the bench finds the agent
// beside it, as it does in bin/.
func ActorletBenchBinary(t testing.TB) string {
	t.Helper()
	agent := ActorletBinary(t)
	return actorletBench.get(t, "./cmd/actorlet-bench", func() (string, error) {
		return filepath.Join(filepath.Dir(agent), "actorlet-bench"), nil
	})
}
