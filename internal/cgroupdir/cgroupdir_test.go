package cgroupdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// On the real hierarchies (root only): the cgroup is made in each, a
// cpuset one gets its parent's cpus and mems, and Remove takes it and
// what was made under it.
func TestMakeAndRemove(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to write cgroups")
	}
	hs, err := hierarchies()
	if err != nil {
		t.Skip(err)
	}
	t.Setenv("ACTORLET_CGROUP_PREFIX", "actorlet-cgroupdir-test")
	name := Name("unused")
	if !strings.HasPrefix(name, "/actorlet-cgroupdir-test-") {
		t.Fatalf("name %q", name)
	}
	if err := Make(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Remove(name) })
	for _, h := range hs {
		if st, err := os.Stat(filepath.Join(h, name)); err != nil || !st.IsDir() {
			t.Errorf("%s not made in %s: %v", name, h, err)
		}
	}
	if dir, ok := Exists("cpuset", name); ok && len(hs) > 1 {
		b, _ := os.ReadFile(filepath.Join(dir, "cpuset.cpus"))
		if strings.TrimSpace(string(b)) == "" {
			t.Errorf("%s: no cpus", dir)
		}
	}
	sub, ok := Exists("memory", name)
	if !ok {
		t.Fatalf("%s not in the memory hierarchy", name)
	}
	if err := os.MkdirAll(filepath.Join(sub, "kubepods", "burstable"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Remove(name); err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, name)); !os.IsNotExist(err) {
			t.Errorf("%s left in %s: %v", name, h, err)
		}
	}
	if err := Make("/"); err == nil {
		t.Error("the root cgroup accepted")
	}
	if err := Remove("/"); err == nil {
		t.Error("removing the root cgroup accepted")
	}
}
