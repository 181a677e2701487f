package bench_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/actorlet/actorlet/internal/bench"
)

// TestDefaultAgent: the agent the bench starts by default is the actorlet
// beside the bench's executable, else the one on PATH, else a clear error;
// a file named actorlet that cannot be run is passed over.
func TestDefaultAgent(t *testing.T) {
	exe := func(dir, name string, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	binDir, pathDir, emptyDir := t.TempDir(), t.TempDir(), t.TempDir()
	self := exe(binDir, "actorlet-bench", 0o755)
	onPath := exe(pathDir, "actorlet", 0o755)

	t.Setenv("PATH", pathDir)
	if got, err := bench.DefaultAgent(self); err != nil || got != onPath {
		t.Errorf("none beside: %q, %v; want %q from PATH", got, err, onPath)
	}
	notExec := exe(binDir, "actorlet", 0o644)
	if got, err := bench.DefaultAgent(self); err != nil || got != onPath {
		t.Errorf("a non-executable actorlet beside: %q, %v; want %q from PATH", got, err, onPath)
	}
	if err := os.Chmod(notExec, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := bench.DefaultAgent(self); err != nil || got != notExec {
		t.Errorf("beside: %q, %v; want %q", got, err, notExec)
	}

	t.Setenv("PATH", emptyDir)
	lone := filepath.Join(emptyDir, "actorlet-bench")
	_, err := bench.DefaultAgent(lone)
	if err == nil {
		t.Fatal("no actorlet anywhere: no error")
	}
	for _, want := range []string{filepath.Join(emptyDir, "actorlet"), "PATH", "--actorlet"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// Through Run: the same error, no result, before anything starts.
	if r, err := bench.Run(t.Context(), bench.Options{Scenario: bench.ScenarioStandaloneSim, Pods: 1}); r != nil || err == nil || !strings.Contains(err.Error(), "--actorlet") {
		t.Errorf("Run with no actorlet to find: result %v, err %v", r, err)
	}
}
