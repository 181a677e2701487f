package testenv

import (
	"testing"

	"github.com/actorlet/actorlet/internal/cgroupdir"
)

// CgroupRoot makes a fresh cgroup for an agent's --cgroup-root (upstream's
// kubelet requires it to exist) and removes it, with what the agent left
// under it, when the test ends. Every agent on a real runtime gets its own:
// cgroups are the whole machine's, never the top-level /kubepods.
func CgroupRoot(t testing.TB) string {
	t.Helper()
	name := cgroupdir.Name("actorlet-e2e")
	if err := cgroupdir.Make(name); err != nil {
		t.Fatalf("cgroup root %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := cgroupdir.Remove(name); err != nil {
			t.Logf("cgroup root %s not fully removed: %v", name, err)
		}
	})
	return name
}
