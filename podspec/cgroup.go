package podspec

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CgroupDriver is how the node's cgroups are managed (--cgroup-driver):
// cgroupfs directly, or systemd slices. It names the pods' cgroup parents
// and must match the runtime's.
type CgroupDriver string

// The cgroup drivers, upstream's names.
const (
	CgroupDriverCgroupfs CgroupDriver = "cgroupfs"
	CgroupDriverSystemd  CgroupDriver = "systemd"
)

// ParseCgroupDriver reads --cgroup-driver ("" is cgroupfs, upstream's flag
// default).
func ParseCgroupDriver(s string) (CgroupDriver, error) {
	switch d := CgroupDriver(s); d {
	case "":
		return CgroupDriverCgroupfs, nil
	case CgroupDriverCgroupfs, CgroupDriverSystemd:
		return d, nil
	}
	return "", fmt.Errorf("--cgroup-driver: %q is neither %q nor %q", s, CgroupDriverCgroupfs, CgroupDriverSystemd)
}

// RuntimeCgroupDriver is the driver to use given the flag and what the
// runtime said (CRI RuntimeConfig's linux section; nil where the runtime
// does not tell, e.g. containerd 1.6 answers Unimplemented). As upstream
// (KubeletCgroupDriverFromCRI), the runtime's wins; mismatch is a message
// to log at warning level when the flag named the other driver ("" when
// they agree or the runtime did not tell). An unknown driver is an error.
func RuntimeCgroupDriver(flag CgroupDriver, runtime *runtimeapi.LinuxRuntimeConfiguration) (CgroupDriver, string, error) {
	if runtime == nil {
		return flag, "", nil
	}
	var d CgroupDriver
	switch runtime.GetCgroupDriver() {
	case runtimeapi.CgroupDriver_SYSTEMD:
		d = CgroupDriverSystemd
	case runtimeapi.CgroupDriver_CGROUPFS:
		d = CgroupDriverCgroupfs
	default:
		return "", "", fmt.Errorf("runtime returned an unknown cgroup driver %d", runtime.GetCgroupDriver())
	}
	if flag != "" && flag != d {
		return d, fmt.Sprintf("--cgroup-driver=%s differs from the container runtime's cgroup driver %s: using the runtime's", flag, d), nil
	}
	return d, "", nil
}

// CgroupParent is the pod's cgroup parent as upstream names it for the
// driver. cgroupfs: /kubepods/pod<uid> (Guaranteed),
// /kubepods/burstable/pod<uid>, /kubepods/besteffort/pod<uid>. systemd: the
// same names as slices, '-' in a part written '_', expanded to their path:
// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice
// (the runtime takes the last element as the slice).
func CgroupParent(pod *v1.Pod, driver CgroupDriver) string {
	return PodCgroupName(pod).Path(driver)
}

// PodCgroupName is the pod's cgroup name: kubepods, its QoS class's cgroup
// (none for Guaranteed), pod<uid>.
func PodCgroupName(pod *v1.Pod) CgroupName {
	n := CgroupName{"kubepods"}
	switch QOSClass(pod) {
	case v1.PodQOSBestEffort:
		n = append(n, "besteffort")
	case v1.PodQOSBurstable:
		n = append(n, "burstable")
	}
	return append(n, "pod"+string(pod.UID))
}

// CgroupName is a cgroup named as upstream's kubelet names it, driver
// independent: its parts from the cgroup root, e.g. {"kubepods",
// "burstable", "pod<uid>"}; nil or empty is the root itself. Cgroupfs and
// Systemd give its path for each driver.
type CgroupName []string

// Cgroupfs is the name as a cgroupfs path: "/kubepods/burstable/pod<uid>"
// ("/" for the root).
func (n CgroupName) Cgroupfs() string {
	return "/" + strings.Join(n, "/")
}

// Systemd is the name as systemd slices expanded to their path, as
// upstream: each part's '-' written '_', each slice named after its
// parents: "/kubepods.slice/kubepods-burstable.slice/
// kubepods-burstable-pod<uid>.slice" ("/" for the root).
func (n CgroupName) Systemd() string {
	if len(n) == 0 {
		return "/"
	}
	var path strings.Builder
	prefix := ""
	for _, p := range n {
		prefix += strings.ReplaceAll(p, "-", "_")
		path.WriteString("/" + prefix + ".slice")
		prefix += "-"
	}
	return path.String()
}

// Path is the name for the driver.
func (n CgroupName) Path(driver CgroupDriver) string {
	if driver == CgroupDriverSystemd {
		return n.Systemd()
	}
	return n.Cgroupfs()
}

// Child is n with one more part.
func (n CgroupName) Child(part string) CgroupName {
	return append(append(CgroupName{}, n...), part)
}

// CgroupResources are the values actorlet sets on a cgroup it owns (the
// kubepods, QoS and pod cgroups), as upstream's ResourceConfig: nil leaves
// a value as it is. CPUShares is in cgroup v1 shares (2..262144); a v2
// manager converts it to cpu.weight as runc and upstream do. CPUQuota -1
// and Memory/PidsLimit -1 mean no limit ("max" on v2).
type CgroupResources struct {
	CPUShares *uint64
	CPUQuota  *int64  // microseconds per CPUPeriod
	CPUPeriod *uint64 // microseconds
	Memory    *int64  // bytes
	PidsLimit *int64
	// HugePageLimit is the limit in bytes by page size in bytes.
	HugePageLimit map[int64]int64
}
