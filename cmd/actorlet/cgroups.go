package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	cgroupactor "github.com/actorlet/actorlet/actors/cgroup"
	adapterscgroup "github.com/actorlet/actorlet/adapters/cgroup"
	"github.com/actorlet/actorlet/adapters/host"
	"github.com/actorlet/actorlet/podspec"
	"github.com/actorlet/actorlet/runtimes/sim"
)

// The pod and QoS cgroups (actors/cgroup; docs/RESOURCES.md): the flags
// and KubeletConfiguration fields of upstream's container manager, the
// start checks, and the CgroupActor's Manager for the driver.

// Defaults of the cgroup flags, upstream's.
const (
	defaultCPUCFSQuotaPeriod = 100 * time.Millisecond
	minCPUCFSQuotaPeriod     = time.Millisecond
	maxCPUCFSQuotaPeriod     = time.Second
)

// cgroupOptions are the cgroup flags (upstream names and defaults).
type cgroupOptions struct {
	CgroupsPerQOS          bool          // --cgroups-per-qos (true)
	CgroupRoot             string        // --cgroup-root ("" is "/" with --cgroups-per-qos)
	EnforceNodeAllocatable []string      // --enforce-node-allocatable (pods)
	SystemReservedCgroup   string        // --system-reserved-cgroup
	KubeReservedCgroup     string        // --kube-reserved-cgroup
	PodMaxPids             int64         // --pod-max-pids (-1: no pod limit)
	CPUCFSQuota            bool          // --cpu-cfs-quota (true)
	CPUCFSQuotaPeriod      time.Duration // --cpu-cfs-quota-period (100ms)
	FailCgroupV1           bool          // --fail-cgroupv1 (true since v1.35)
}

func defaultCgroupOptions() cgroupOptions {
	return cgroupOptions{
		CgroupsPerQOS:          true,
		EnforceNodeAllocatable: []string{cgroupactor.EnforcePods},
		PodMaxPids:             -1,
		CPUCFSQuota:            true,
		CPUCFSQuotaPeriod:      defaultCPUCFSQuotaPeriod,
		FailCgroupV1:           true,
	}
}

// addCgroupFlags registers the flags of the pod and QoS cgroups and of
// node allocatable's enforcement.
func (o *options) addCgroupFlags(fs *pflag.FlagSet) {
	c := &o.cgroupOptions
	fs.BoolVar(&c.CgroupsPerQOS, "cgroups-per-qos", c.CgroupsPerQOS,
		"Make the QoS cgroup tree: kubepods under --cgroup-root, its burstable and besteffort cgroups, and a pod<uid> cgroup per pod with the pod's values. "+
			"false: pods' cgroups are left to the runtime, under --cgroup-root.")
	fs.StringVar(&c.CgroupRoot, "cgroup-root", c.CgroupRoot,
		"The cgroup the kubepods cgroup is made in (it must exist; default / with --cgroups-per-qos). systemd driver: a slice, e.g. /actorlet.slice.")
	fs.StringSliceVar(&c.EnforceNodeAllocatable, "enforce-node-allocatable", c.EnforceNodeAllocatable,
		"Where node allocatable is enforced, comma separated: pods (kubepods sized to capacity minus --kube-reserved and --system-reserved), "+
			"system-reserved, system-reserved-compressible (on --system-reserved-cgroup), kube-reserved, kube-reserved-compressible (on --kube-reserved-cgroup), or none.")
	fs.StringVar(&c.SystemReservedCgroup, "system-reserved-cgroup", c.SystemReservedCgroup,
		"Absolute name of the existing cgroup --system-reserved is enforced on (with system-reserved in --enforce-node-allocatable), e.g. /system.slice.")
	fs.StringVar(&c.KubeReservedCgroup, "kube-reserved-cgroup", c.KubeReservedCgroup,
		"Absolute name of the existing cgroup --kube-reserved is enforced on (with kube-reserved in --enforce-node-allocatable), e.g. /kube.slice.")
	fs.Int64Var(&c.PodMaxPids, "pod-max-pids", c.PodMaxPids, "Most processes in a pod (its cgroup's pids.max); -1: no pod limit (the kubepods cgroup's bounds them).")
	fs.BoolVar(&c.CPUCFSQuota, "cpu-cfs-quota", c.CPUCFSQuota, "Enforce CPU limits with a CFS quota (pods and containers); false: no quota.")
	fs.DurationVar(&c.CPUCFSQuotaPeriod, "cpu-cfs-quota-period", c.CPUCFSQuotaPeriod, "The CFS period of the quotas (cpu.cfs_period_us), 1ms to 1s.")
	fs.BoolVar(&c.FailCgroupV1, "fail-cgroupv1", c.FailCgroupV1,
		"Refuse to start on a cgroup v1 host (as upstream since v1.35) when the node's cgroups are managed (a real runtime with --cgroups-per-qos). "+
			"false: run on cgroup v1 (deprecated upstream).")
}

// validateCgroups checks the cgroup flags, with upstream's messages.
func (o *options) validateCgroups() []error {
	c := &o.cgroupOptions
	var errs []error
	if err := cgroupactor.ValidateEnforcement(c.EnforceNodeAllocatable, c.CgroupsPerQOS, c.SystemReservedCgroup, c.KubeReservedCgroup); err != nil {
		errs = append(errs, err)
	}
	if c.CPUCFSQuotaPeriod < minCPUCFSQuotaPeriod || c.CPUCFSQuotaPeriod > maxCPUCFSQuotaPeriod {
		errs = append(errs, fmt.Errorf("invalid configuration: cpuCFSQuotaPeriod (--cpu-cfs-quota-period) %v must be between 1ms and 1sec, inclusive", c.CPUCFSQuotaPeriod))
	}
	if c.PodMaxPids < -1 {
		errs = append(errs, fmt.Errorf("--pod-max-pids must be -1 (no pod limit) or more, got %d", c.PodMaxPids))
	}
	if _, err := cgroupactor.ParseCgroupRoot(c.CgroupRoot, podspec.CgroupDriver(o.CgroupDriver)); err != nil {
		errs = append(errs, err)
	}
	for _, r := range []struct{ flag, v string }{{"system-reserved-cgroup", c.SystemReservedCgroup}, {"kube-reserved-cgroup", c.KubeReservedCgroup}} {
		if r.v != "" && !strings.HasPrefix(r.v, "/") {
			errs = append(errs, fmt.Errorf("--%s %q must be an absolute cgroup name (/...)", r.flag, r.v))
		}
	}
	return errs
}

// enforces reports whether key is in --enforce-node-allocatable.
func (c *cgroupOptions) enforces(key string) bool {
	return slices.Contains(c.EnforceNodeAllocatable, key)
}

// cgroupPlan is what the CgroupActor is made with, decided at start; a
// nil plan: the node's cgroups are not managed (named at start).
type cgroupPlan struct {
	cfg cgroupactor.Config
}

// planCgroups runs the start checks of the pod cgroups and returns the
// CgroupActor's configuration: failCgroupV1 on a cgroup v1 host, the
// cgroup root and the reserved cgroups that must exist, the first writes
// of kubepods and the QoS cgroups (Setup). A nil plan without error: no
// cgroups are managed (the sim runtime without a cgroup tree).
func planCgroups(ctx context.Context, o *options, rt *runtimeConn, driver podspec.CgroupDriver, log *slog.Logger) (*cgroupPlan, error) {
	c := &o.cgroupOptions
	mgr, err := newCgroupManager(o, rt, driver, log)
	if err != nil {
		return nil, err
	}
	if mgr == nil {
		log.Warn("pod cgroups are not managed: the sim runtime has no cgroup tree here; pods are not bounded by kubepods, QoS or pod cgroups",
			"runtime", rt.name)
		return nil, nil
	}
	root, err := cgroupactor.ParseCgroupRoot(c.CgroupRoot, driver)
	if err != nil {
		return nil, err
	}
	sysR, _ := parseResources(o.SystemReserved) // validated with the flags
	kubeR, _ := parseResources(o.KubeReserved)
	capacity := cgroupCapacity(ctx, o, log)
	cfg := cgroupactor.Config{
		Manager:       mgr,
		Root:          root,
		CgroupsPerQOS: c.CgroupsPerQOS,
		Kubepods:      podspec.KubepodsCgroupValues(capacity, sysR, kubeR, c.CgroupsPerQOS && c.enforces(cgroupactor.EnforcePods)),
		Pod: podspec.PodCgroupConfig{
			CPUCFSQuota: c.CPUCFSQuota, CPUCFSQuotaPeriod: c.CPUCFSQuotaPeriod, PodPidsLimit: c.PodMaxPids,
		},
		Log: log,
	}
	for _, r := range []struct {
		key, compressible, cgroup string
		rl                        v1.ResourceList
	}{
		{cgroupactor.EnforceSystemReserved, cgroupactor.EnforceSystemReservedCompressible, c.SystemReservedCgroup, sysR},
		{cgroupactor.EnforceKubeReserved, cgroupactor.EnforceKubeReservedCompressible, c.KubeReservedCgroup, kubeR},
	} {
		key, only := "", false
		switch {
		case c.enforces(r.key):
			key = r.key
		case c.enforces(r.compressible):
			key, only = r.compressible, true
		default:
			continue
		}
		name, err := cgroupactor.ParseCgroupRoot(r.cgroup, podspec.CgroupDriverCgroupfs) // a cgroupfs name, as upstream
		if err != nil {
			return nil, err
		}
		cfg.Reserved = append(cfg.Reserved, cgroupactor.Reserved{Key: key, Name: name, Values: podspec.ReservedCgroupValues(r.rl, only)})
	}
	if err := cfg.Setup(); err != nil {
		return nil, err
	}
	log.Info("pod cgroups managed", "driver", driver, "cgroupVersion", mgr.Version(), "cgroupRoot", root.Path(driver),
		"cgroupsPerQOS", c.CgroupsPerQOS, "enforceNodeAllocatable", strings.Join(c.EnforceNodeAllocatable, ","))
	return &cgroupPlan{cfg: cfg}, nil
}

// cgroupCapacity is the node's capacity the kubepods cgroup is sized
// from: cpu and memory (as allocatable's), and the pid capacity
// (kernel.pid_max), as upstream's internal capacity. Huge pages are not
// discovered (docs/KUBERNETES-1.37.md), so kubepods sets no huge page
// limit.
func cgroupCapacity(ctx context.Context, o *options, log *slog.Logger) v1.ResourceList {
	_, capacity, err := (&host.Machine{RootDir: o.RootDir}).Info(ctx)
	if err != nil {
		log.Warn("machine capacity partly unknown: the kubepods cgroup is not bounded by what is missing",
			"known", slices.Sorted(maps.Keys(capacity)), "err", err)
	}
	out := v1.ResourceList{}
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if q, ok := capacity[name]; ok {
			out[name] = q
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			out[podspec.ResourcePIDs] = *resource.NewQuantity(n, resource.DecimalSI)
		}
	}
	return out
}

// newCgroupManager is the CgroupActor's Manager: the sim runtime's
// in-memory tree for sim://, else the host's for the driver, after
// failCgroupV1's check. nil, nil: none (the node's cgroups are not
// managed).
func newCgroupManager(o *options, rt *runtimeConn, driver podspec.CgroupDriver, log *slog.Logger) (cgroupactor.Manager, error) {
	switch {
	case rt.sim != nil:
		return simCgroupManager(rt) // sim:// manages no host cgroups: failCgroupV1 does not apply
	case rt.name == sim.RuntimeName:
		// A sim runtime of its own process (actorlet simruntime): no host
		// cgroup holds its pods, and its in-memory tree is not reachable.
		return nil, nil
	}
	if err := checkCgroupV1(o.FailCgroupV1, log); err != nil {
		return nil, err
	}
	if driver == podspec.CgroupDriverSystemd {
		return newSystemdManager(o, log)
	}
	return newCgroupfsManager(o, log)
}

// simCgroupManager is the sim runtime's in-memory cgroup tree.
func simCgroupManager(rt *runtimeConn) (cgroupactor.Manager, error) {
	_ = rt
	// WIRE(simbench): return rt.sim.Cgroups(), nil
	return nil, nil
}

// newCgroupfsManager is the host's cgroupfs Manager (cgroup v1 or v2).
func newCgroupfsManager(_ *options, log *slog.Logger) (cgroupactor.Manager, error) {
	m, err := adapterscgroup.NewCgroupfs(adapterscgroup.Config{Log: log})
	if err != nil {
		return nil, fmt.Errorf("the cgroupfs cgroup manager: %w", err)
	}
	return m, nil
}

// newSystemdManager is the host's systemd Manager (over D-Bus): where
// systemd does not run, a start error.
func newSystemdManager(_ *options, _ *slog.Logger) (cgroupactor.Manager, error) {
	m, err := adapterscgroup.NewSystemd(adapterscgroup.SystemdConfig{})
	if err != nil {
		return nil, fmt.Errorf("the systemd cgroup manager: %w", err)
	}
	return m, nil
}

// checkCgroupV1 is upstream's failCgroupV1 check: on a cgroup v1 (or
// hybrid) host the agent refuses to start unless --fail-cgroupv1=false;
// running on v1 anyway logs upstream's deprecation warning.
func checkCgroupV1(fail bool, log *slog.Logger) error {
	h, err := adapterscgroup.DetectHost("")
	if err != nil {
		return fmt.Errorf("reading the host's cgroups: %w", err)
	}
	if err := adapterscgroup.CheckCgroupV1(fail, h.Version); err != nil {
		return fmt.Errorf("%w (--fail-cgroupv1=false, failCgroupV1: false, runs it on cgroup v1)", err)
	}
	if w := adapterscgroup.VersionWarning(h); w != "" {
		log.Warn(w, "cgroups", h.String())
	}
	return nil
}

// cgroupsActor is the CgroupActor; its plan is made at start.
func cgroupsActor(w *wiring) actor.Producer {
	cfg := w.cgroups.cfg
	cfg.Clock, cfg.Metrics = w.clk, w.m
	return cgroupactor.New(cfg)
}
