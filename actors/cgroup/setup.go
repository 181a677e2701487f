package cgroup

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/podspec"
)

// The enforceNodeAllocatable keys, upstream's.
const (
	EnforcePods                       = "pods"
	EnforceSystemReserved             = "system-reserved"
	EnforceSystemReservedCompressible = "system-reserved-compressible"
	EnforceKubeReserved               = "kube-reserved"
	EnforceKubeReservedCompressible   = "kube-reserved-compressible"
	EnforceNone                       = "none"
)

// Names and defaults.
const (
	defaultPeriod  = time.Minute
	kubepodsName   = "kubepods"
	burstableName  = "burstable"
	besteffortName = "besteffort"
	podPrefix      = "pod"
)

// The operations, as counted (Metrics) and logged.
const (
	opEnsure = "ensure"
	opResize = "resize"
	opRead   = "read"
	opRemove = "remove"
	opSweep  = "sweep"
	opQOS    = "qos"
	opNode   = "node"
)

// Reserved is a reserved cgroup the node enforces its reservation on
// (--system-reserved-cgroup with --system-reserved, --kube-reserved-cgroup
// with --kube-reserved): it must exist, actorlet never creates it.
type Reserved struct {
	// Key is the enforceNodeAllocatable key that asked for it
	// (system-reserved, kube-reserved or their -compressible forms).
	Key string
	// Name is the cgroup (from the hierarchy's root).
	Name podspec.CgroupName
	// Values are written on it (podspec.ReservedCgroupValues).
	Values *podspec.CgroupResources
}

// Metrics is what the CgroupActor counts. May be nil.
type Metrics interface {
	// IncCgroupError counts a cgroup operation that failed (a write the
	// kernel refused, a cgroup missing), by op: ensure, resize, read,
	// remove, sweep, qos, node.
	IncCgroupError(op string)
}

// Config of the CgroupActor. Manager is required.
type Config struct {
	Manager Manager
	// Root is --cgroup-root as a name (ParseCgroupRoot); empty: the
	// hierarchy's root.
	Root podspec.CgroupName
	// CgroupsPerQOS makes the kubepods, QoS and pod cgroups
	// (--cgroups-per-qos); off, pods are put directly under Root and no
	// cgroup is made (upstream's behaviour).
	CgroupsPerQOS bool
	// Kubepods are the kubepods cgroup's values: node allocatable when
	// enforceNodeAllocatable has "pods", else the capacity
	// (podspec.KubepodsCgroupValues); nil: left as they are.
	Kubepods *podspec.CgroupResources
	// Reserved are the reserved cgroups enforced.
	Reserved []Reserved
	// Pod is what the pods' cgroup values are made with.
	Pod podspec.PodCgroupConfig
	// Period is how often the node's cgroups (kubepods, QoS, reserved)
	// are written again while a write failed, and the QoS shares
	// refreshed (default 1 m, as upstream's QoS update loop).
	Period  time.Duration
	Clock   clock.WithDelayedExecution
	Log     *slog.Logger
	Metrics Metrics
}

// ParseCgroupRoot reads --cgroup-root ("/", "/actorlet", "/a/b"; for the
// systemd driver "/actorlet.slice" is the slice actorlet.slice) as a name.
func ParseCgroupRoot(root string, driver podspec.CgroupDriver) (podspec.CgroupName, error) {
	if root == "" || root == "/" {
		return nil, nil
	}
	if !strings.HasPrefix(root, "/") {
		return nil, fmt.Errorf("--cgroup-root %q must be an absolute cgroup path", root)
	}
	var parts []string
	for _, p := range strings.Split(strings.Trim(root, "/"), "/") {
		if p == "" || p == "." || p == ".." {
			return nil, fmt.Errorf("--cgroup-root %q: empty, '.' or '..' part", root)
		}
		parts = append(parts, p)
	}
	if driver != podspec.CgroupDriverSystemd {
		return parts, nil
	}
	// systemd: the last slice names the whole path (a-b.slice is b under
	// a), as upstream's ParseSystemdToCgroupName.
	last := parts[len(parts)-1]
	name, ok := strings.CutSuffix(last, ".slice")
	if !ok {
		return nil, fmt.Errorf("--cgroup-root %q: with the systemd cgroup driver it must be a slice (…/name.slice)", root)
	}
	var out podspec.CgroupName
	for _, p := range strings.Split(name, "-") {
		out = append(out, strings.ReplaceAll(p, "_", "-"))
	}
	return out, nil
}

// Kubepods is the kubepods cgroup's name.
func (c *Config) kubepods() podspec.CgroupName { return c.Root.Child(kubepodsName) }

// qos is a QoS class's cgroup name (Guaranteed: kubepods).
func (c *Config) qos(class v1.PodQOSClass) podspec.CgroupName {
	switch class {
	case v1.PodQOSBurstable:
		return c.kubepods().Child(burstableName)
	case v1.PodQOSBestEffort:
		return c.kubepods().Child(besteffortName)
	}
	return c.kubepods()
}

// podName is the pod's cgroup name under Root.
func (c *Config) podName(pod *v1.Pod) podspec.CgroupName {
	return append(append(podspec.CgroupName{}, c.Root...), podspec.PodCgroupName(pod)...)
}

// podParents are the cgroups pod cgroups live in.
func (c *Config) podParents() []podspec.CgroupName {
	return []podspec.CgroupName{c.kubepods(), c.qos(v1.PodQOSBurstable), c.qos(v1.PodQOSBestEffort)}
}

// podUID is the UID of a pod cgroup's name ("pod<uid>" as its last part);
// false for any other cgroup (the QoS cgroups, a runtime's own).
func podUID(n podspec.CgroupName) (types.UID, bool) {
	if len(n) == 0 {
		return "", false
	}
	uid, ok := strings.CutPrefix(n[len(n)-1], podPrefix)
	if !ok || uid == "" {
		return "", false
	}
	return types.UID(uid), true
}

// Parent is the cgroup parent a pod's sandbox gets in the driver's form:
// its pod cgroup, or Root when cgroupsPerQOS is off (as upstream).
func (c *Config) Parent(pod *v1.Pod) string {
	if !c.CgroupsPerQOS {
		return c.Root.Path(c.Manager.Driver())
	}
	return c.podName(pod).Path(c.Manager.Driver())
}

// Setup is the start check and the first writes of the node's cgroups,
// as upstream's container manager at start: Root must exist
// (cgroupsPerQOS), each reserved cgroup must exist and takes its values,
// kubepods is made (or updated) with its values and the burstable and
// besteffort QoS cgroups under it. The agent refuses to start on its
// error; the CgroupActor runs it again at each start (idempotent).
func (c *Config) Setup() error {
	m := c.Manager
	if c.CgroupsPerQOS && len(c.Root) > 0 {
		if err := validate(m, c.Root); err != nil {
			return fmt.Errorf("invalid configuration: --cgroup-root %s: %w (create it, or name an existing one)", c.Root.Path(m.Driver()), err)
		}
	}
	for _, r := range c.Reserved {
		label := "System Reserved"
		if strings.HasPrefix(r.Key, "kube-") {
			label = "Kube Reserved"
		}
		if strings.HasSuffix(r.Key, "-compressible") {
			label += " Compressible"
		}
		if err := validate(m, r.Name); err != nil {
			return fmt.Errorf("Failed to enforce %s Cgroup Limits on %q: %w", label, r.Name.Cgroupfs(), err) //nolint:staticcheck // upstream's message
		}
		if r.Values != nil {
			if err := m.Update(r.Name, r.Values); err != nil {
				return fmt.Errorf("Failed to enforce %s Cgroup Limits on %q: %w", label, r.Name.Cgroupfs(), err) //nolint:staticcheck // upstream's message
			}
		}
	}
	if !c.CgroupsPerQOS {
		return nil
	}
	if err := m.Create(c.kubepods(), c.Kubepods); err != nil {
		return fmt.Errorf("create the node allocatable cgroup %s: %w", c.kubepods().Path(m.Driver()), err)
	}
	min := uint64(podspec.MinShares)
	for _, n := range []podspec.CgroupName{c.qos(v1.PodQOSBurstable), c.qos(v1.PodQOSBestEffort)} {
		r := &podspec.CgroupResources{}
		if n[len(n)-1] == besteffortName {
			r.CPUShares = &min
		}
		if err := m.Create(n, r); err != nil {
			return fmt.Errorf("failed to create top level %s QOS cgroup %s: %w", n[len(n)-1], n.Path(m.Driver()), err)
		}
	}
	return nil
}

// validator is a Manager that tells what of a cgroup is missing
// (upstream's Validate: "cgroup ... has some missing paths: ...").
type validator interface {
	Validate(name podspec.CgroupName) error
}

// validate is nil when the cgroup exists, else why not: the Manager's
// own words where it has them.
func validate(m Manager, name podspec.CgroupName) error {
	if v, ok := m.(validator); ok {
		return v.Validate(name)
	}
	if !m.Exists(name) {
		return fmt.Errorf("cgroup %q has some missing paths", []string(name))
	}
	return nil
}

// ValidateEnforcement checks enforceNodeAllocatable against the other
// settings with upstream's messages.
func ValidateEnforcement(keys []string, cgroupsPerQOS bool, systemReservedCgroup, kubeReservedCgroup string) error {
	var errs []error
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			errs = append(errs, fmt.Errorf("invalid configuration: duplicated enforcements %q in enforceNodeAllocatable (--enforce-node-allocatable)", k))
			continue
		}
		seen[k] = true
		switch k {
		case EnforcePods:
		case EnforceSystemReserved, EnforceSystemReservedCompressible:
			if systemReservedCgroup == "" {
				errs = append(errs, fmt.Errorf("invalid configuration: systemReservedCgroup (--system-reserved-cgroup) must be specified when %q or %q included in enforceNodeAllocatable (--enforce-node-allocatable)", EnforceSystemReserved, EnforceSystemReservedCompressible))
			}
		case EnforceKubeReserved, EnforceKubeReservedCompressible:
			if kubeReservedCgroup == "" {
				errs = append(errs, fmt.Errorf("invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified when %q or %q included in enforceNodeAllocatable (--enforce-node-allocatable)", EnforceKubeReserved, EnforceKubeReservedCompressible))
			}
		case EnforceNone:
			if len(keys) > 1 {
				errs = append(errs, fmt.Errorf("invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements when %q is specified", EnforceNone))
			}
			continue
		default:
			errs = append(errs, fmt.Errorf("invalid configuration: option %q specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are %q, %q, %q, %q, %q or %q",
				k, EnforcePods, EnforceSystemReserved, EnforceSystemReservedCompressible, EnforceKubeReserved, EnforceKubeReservedCompressible, EnforceNone))
			continue
		}
		if !cgroupsPerQOS {
			errs = append(errs, fmt.Errorf("invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true when %q contained in enforceNodeAllocatable (--enforce-node-allocatable)", k))
		}
	}
	if seen[EnforceSystemReserved] && seen[EnforceSystemReservedCompressible] {
		errs = append(errs, fmt.Errorf("invalid configuration: both %q and %q cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)", EnforceSystemReserved, EnforceSystemReservedCompressible))
	}
	if seen[EnforceKubeReserved] && seen[EnforceKubeReservedCompressible] {
		errs = append(errs, fmt.Errorf("invalid configuration: both %q and %q cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)", EnforceKubeReserved, EnforceKubeReservedCompressible))
	}
	return errors.Join(errs...)
}
