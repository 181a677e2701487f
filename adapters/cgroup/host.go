package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/actorlet/actorlet/errdefs"
)

// DefaultRoot is where the cgroup filesystems are mounted.
const DefaultRoot = "/sys/fs/cgroup"

// Layout is how a host mounts its cgroups.
type Layout string

// The layouts.
const (
	// LayoutUnified: one cgroup2 filesystem at the root (cgroup v2).
	LayoutUnified Layout = "unified"
	// LayoutHybrid: cgroup v1 controllers under the root, plus an empty
	// cgroup2 hierarchy at <root>/unified (cgroup v1 for the kubelet).
	LayoutHybrid Layout = "hybrid"
	// LayoutLegacy: cgroup v1 controllers only.
	LayoutLegacy Layout = "legacy"
)

// Host is what a host's cgroup mounts are.
type Host struct {
	// Root is the mount root (DefaultRoot).
	Root string
	// Version is 2 when Root is a cgroup2 filesystem (upstream's
	// IsCgroup2UnifiedMode), 1 otherwise.
	Version int
	Layout  Layout
	// Controllers are the controllers available: v2, the root's
	// cgroup.controllers; v1, those mounted under Root (named
	// hierarchies as name=<name>).
	Controllers []string
	// Mounts is, on v1, each mounted controller's mount point (the
	// shortest where one is mounted twice); nil on v2.
	Mounts map[string]string
	// Unified is the cgroup2 mount point of a hybrid host ("" otherwise).
	Unified string
}

// String is the host for the start log.
func (h *Host) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cgroup v%d (%s", h.Version, h.Layout)
	switch h.Layout {
	case LayoutUnified:
		fmt.Fprintf(&b, ": cgroup2 at %s", h.Root)
	case LayoutHybrid:
		fmt.Fprintf(&b, ": v1 controllers under %s, an empty cgroup2 at %s", h.Root, h.Unified)
	default:
		fmt.Fprintf(&b, ": v1 controllers under %s", h.Root)
	}
	fmt.Fprintf(&b, "); controllers: %s", strings.Join(h.Controllers, " "))
	return b.String()
}

// DetectHost reads how root ("" is DefaultRoot) is mounted: a cgroup2
// filesystem (v2, unified), or v1 controller hierarchies below it (v1,
// hybrid when <root>/unified is a cgroup2 filesystem). A root that is
// neither is an error (ErrNotFound).
func DetectHost(root string) (*Host, error) {
	if root == "" {
		root = DefaultRoot
	}
	root = filepath.Clean(root)
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return nil, classifyErr(fmt.Errorf("cgroup root %s: %w", root, err))
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		ctrs, err := readControllers(root)
		if err != nil {
			return nil, classifyErr(fmt.Errorf("cgroup root %s: %w", root, err))
		}
		return &Host{Root: root, Version: 2, Layout: LayoutUnified, Controllers: ctrs}, nil
	}
	h := &Host{Root: root, Version: 1, Layout: LayoutLegacy, Mounts: map[string]string{}}
	mounts, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return filepath.Dir(m.Mountpoint) != root || (m.FSType != "cgroup" && m.FSType != "cgroup2"), false
	})
	if err != nil {
		return nil, fmt.Errorf("cgroup mounts under %s: %w", root, err)
	}
	known, err := kernelSubsystems()
	if err != nil {
		return nil, err
	}
	for _, m := range mounts {
		if m.FSType == "cgroup2" {
			if filepath.Base(m.Mountpoint) == "unified" {
				h.Layout, h.Unified = LayoutHybrid, m.Mountpoint
			}
			continue
		}
		for _, opt := range strings.Split(m.VFSOptions, ",") {
			if !known[opt] && !strings.HasPrefix(opt, "name=") {
				continue
			}
			if prev, ok := h.Mounts[opt]; !ok || len(m.Mountpoint) < len(prev) {
				h.Mounts[opt] = m.Mountpoint
			}
		}
	}
	if len(h.Mounts) == 0 {
		return nil, errdefs.Wrap(errdefs.ErrNotFound,
			fmt.Errorf("%s is neither a cgroup2 filesystem nor the parent of cgroup v1 controller mounts", root))
	}
	for c := range h.Mounts {
		h.Controllers = append(h.Controllers, c)
	}
	slices.Sort(h.Controllers)
	return h, nil
}

// kernelSubsystems are the v1 controllers the kernel has (/proc/cgroups).
func kernelSubsystems() (map[string]bool, error) {
	data, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		return nil, fmt.Errorf("cgroup controllers: %w", err)
	}
	known := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 4 && !strings.HasPrefix(f[0], "#") {
			known[f[0]] = true
		}
	}
	return known, nil
}

// readControllers reads a v2 cgroup's cgroup.controllers.
func readControllers(dir string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(data)), nil
}

// Upstream's texts (pkg/kubelet/apis/config/validation and
// pkg/kubelet/cm/container_manager.go, v1.37).
const (
	// FailCgroupV1Message is the start error of failCgroupV1 on a v1 host.
	FailCgroupV1Message = "kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be removed in a future release"
	// CgroupV1DeprecatedWarning is logged (and a Warning event with reason
	// EventReasonCgroupV1 on the Node) when the agent runs on v1 anyway.
	CgroupV1DeprecatedWarning = "cgroup v1 detected. cgroup v1 support is deprecated and will be removed in a future release. Please migrate to cgroup v2. More information at https://git.k8s.io/enhancements/keps/sig-node/5573-remove-cgroup-v1"
	// CgroupV2KernelWarning is logged on v2 when the root has no cpu.stat.
	CgroupV2KernelWarning = "cgroup v2 is being used on a kernel, which doesn't support root `cpu.stat`." +
		"Kubelet will continue, but may experience instability or wrong behavior"
	// EventReasonCgroupV1 is the reason of the Node event on a v1 host.
	EventReasonCgroupV1 = "CgroupV1"
)

// CheckCgroupV1 is upstream's failCgroupV1 check (on by default since
// v1.35): with failCgroupV1 set, a cgroup v1 host is a start error with
// upstream's message (ErrFailedPrecondition). A version that is neither 1
// nor 2 is ErrInvalidArgument.
func CheckCgroupV1(failCgroupV1 bool, version int) error {
	switch version {
	case 1:
		if failCgroupV1 {
			return errdefs.Wrap(errdefs.ErrFailedPrecondition, errors.New(FailCgroupV1Message))
		}
		return nil
	case 2:
		return nil
	}
	return errdefs.Wrap(errdefs.ErrInvalidArgument, fmt.Errorf("unsupported cgroup version: %d", version))
}

// VersionWarning is upstream's cgroup version warning for a host that
// passed CheckCgroupV1 ("" when there is none): CgroupV1DeprecatedWarning
// on v1, CgroupV2KernelWarning on v2 without a root cpu.stat.
func VersionWarning(h *Host) string {
	switch h.Version {
	case 1:
		return CgroupV1DeprecatedWarning
	case 2:
		if _, err := os.Stat(filepath.Join(h.Root, "cpu.stat")); errors.Is(err, os.ErrNotExist) {
			return CgroupV2KernelWarning
		}
	}
	return ""
}
