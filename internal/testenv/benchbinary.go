package testenv

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var actorletBench struct {
	once sync.Once
	path string
	err  error
}

// ActorletBenchBinary builds cmd/actorlet-bench with the race detector,
// once per test process, into the directory of ActorletBinary's actorlet,
// and returns its path: run without --actorlet, the bench finds the agent
// beside it, as it does in bin/.
func ActorletBenchBinary(t testing.TB) string {
	t.Helper()
	agent := ActorletBinary(t)
	root := RepoRoot(t)
	actorletBench.once.Do(func() {
		actorletBench.path = filepath.Join(filepath.Dir(agent), "actorlet-bench")
		cmd := exec.Command("go", "build", "-race", "-o", actorletBench.path, "./cmd/actorlet-bench")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			actorletBench.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if actorletBench.err != nil {
		t.Fatal(actorletBench.err)
	}
	return actorletBench.path
}
