package cgroup

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/actorlet/actorlet/errdefs"
)

// The host's own layout, read the way upstream tells v2 from v1: a
// cgroup2 root is v2; otherwise the v1 controllers mounted under it, and
// hybrid where <root>/unified is cgroup2.
func TestDetectHostReal(t *testing.T) {
	var st unix.Statfs_t
	err := unix.Statfs(DefaultRoot, &st)
	needHost(t, err == nil, fmt.Sprintf("no %s on this machine: %v", DefaultRoot, err))
	h, err := DetectHost("")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(h)
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		if h.Version != 2 || h.Layout != LayoutUnified || h.Mounts != nil {
			t.Errorf("cgroup2 root: %+v", h)
		}
		return
	}
	if h.Version != 1 || (h.Layout != LayoutHybrid && h.Layout != LayoutLegacy) {
		t.Fatalf("v1 root: %+v", h)
	}
	for _, c := range h.Controllers {
		var cst unix.Statfs_t
		if err := unix.Statfs(h.Mounts[c], &cst); err != nil || cst.Type != unix.CGROUP_SUPER_MAGIC {
			t.Errorf("controller %s at %s: not a cgroup v1 mount (%v)", c, h.Mounts[c], err)
		}
		if !strings.Contains(h.String(), c) {
			t.Errorf("String() %q does not name %s", h.String(), c)
		}
	}
	var ust unix.Statfs_t
	if unix.Statfs(hybridUnified, &ust) == nil && ust.Type == unix.CGROUP2_SUPER_MAGIC {
		if h.Layout != LayoutHybrid || h.Unified != hybridUnified || !strings.Contains(h.String(), "hybrid") {
			t.Errorf("hybrid host: %+v, %s", h, h)
		}
	}
	// This project's machines: cpu and cpuacct are separate mounts, and
	// the manager uses each one where it is.
	if h.Mounts["cpu"] != "" && h.Mounts["cpuacct"] != "" && h.Mounts["cpu"] != h.Mounts["cpuacct"] {
		m, err := NewCgroupfs(Config{})
		if err != nil {
			t.Fatal(err)
		}
		d := m.dirs([]string{"x"})
		if d["cpu"] == d["cpuacct"] {
			t.Errorf("cpu and cpuacct mounted apart, one dir for both: %v", d)
		}
	}
}

func TestDetectHostNotCgroup(t *testing.T) {
	if _, err := DetectHost(t.TempDir()); !errdefs.IsNotFound(err) {
		t.Errorf("DetectHost(empty dir) = %v, want ErrNotFound", err)
	}
	if _, err := DetectHost("/nonexistent-cgroup-root"); !errdefs.IsNotFound(err) {
		t.Errorf("DetectHost(missing) = %v, want ErrNotFound", err)
	}
}

func TestCheckCgroupV1(t *testing.T) {
	err := CheckCgroupV1(true, 1)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) ||
		err.Error() != "kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be removed in a future release" {
		t.Errorf("CheckCgroupV1(true, 1) = %v", err)
	}
	for _, c := range []struct {
		fail    bool
		version int
	}{{false, 1}, {true, 2}, {false, 2}} {
		if err := CheckCgroupV1(c.fail, c.version); err != nil {
			t.Errorf("CheckCgroupV1(%v, %d) = %v", c.fail, c.version, err)
		}
	}
	if err := CheckCgroupV1(false, 0); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("CheckCgroupV1(false, 0) = %v", err)
	}
	if w := VersionWarning(&Host{Version: 1}); w != CgroupV1DeprecatedWarning {
		t.Errorf("v1 warning = %q", w)
	}
	if w := VersionWarning(&Host{Version: 2, Root: t.TempDir()}); w != CgroupV2KernelWarning {
		t.Errorf("v2 without cpu.stat warning = %q", w)
	}
}
