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
	parts := []string{"kubepods"}
	switch QOSClass(pod) {
	case v1.PodQOSBestEffort:
		parts = append(parts, "besteffort")
	case v1.PodQOSBurstable:
		parts = append(parts, "burstable")
	}
	parts = append(parts, "pod"+string(pod.UID))
	if driver != CgroupDriverSystemd {
		return "/" + strings.Join(parts, "/")
	}
	var path strings.Builder
	prefix := ""
	for _, p := range parts {
		prefix += strings.ReplaceAll(p, "-", "_")
		path.WriteString("/" + prefix + ".slice")
		prefix += "-"
	}
	return path.String()
}
