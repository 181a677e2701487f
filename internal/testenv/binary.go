package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var actorlet struct {
	once sync.Once
	path string
	err  error
}

// ActorletBinary builds cmd/actorlet with the race detector, once per test
// process, and returns its path (tests that run the real binary share it).
func ActorletBinary(t testing.TB) string {
	t.Helper()
	root := RepoRoot(t)
	actorlet.once.Do(func() {
		dir, err := os.MkdirTemp("", "actorlet-test-bin")
		if err != nil {
			actorlet.err = err
			return
		}
		actorlet.path = filepath.Join(dir, "actorlet")
		cmd := exec.Command("go", "build", "-race", "-o", actorlet.path, "./cmd/actorlet")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			actorlet.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if actorlet.err != nil {
		t.Fatal(actorlet.err)
	}
	return actorlet.path
}
