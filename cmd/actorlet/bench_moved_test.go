package main

import (
	"strings"
	"testing"
)

// TestBenchMoved: `actorlet bench` and `actorlet fake-cri` left the agent;
// each answers a usage error that names the actorlet-bench form to run
// instead of starting the agent.
func TestBenchMoved(t *testing.T) {
	for sub, want := range map[string]string{
		"bench":    "run actorlet-bench [flags]",
		"fake-cri": "run actorlet-bench fake-cri [flags]",
	} {
		t.Run(sub, func(t *testing.T) {
			var stderr strings.Builder
			if code := movedToBench(&stderr, sub); code != exitUsage {
				t.Fatalf("exit %d, want %d", code, exitUsage)
			}
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr %q lacks %q", stderr.String(), want)
			}
		})
	}
	// Through run, with the old flags after it: the same answer, no agent.
	if code := run([]string{"bench", "--scenario", "standalone-sim"}); code != exitUsage {
		t.Errorf("run(bench ...) = %d, want %d", code, exitUsage)
	}
	if code := run([]string{"fake-cri", "--listen", "unix:///nonexistent/fake.sock"}); code != exitUsage {
		t.Errorf("run(fake-cri ...) = %d, want %d", code, exitUsage)
	}
}
