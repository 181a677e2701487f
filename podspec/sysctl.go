package podspec

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// ReasonSysctlForbidden is the admission reason of a pod asking for a
// sysctl the node does not allow, as upstream.
const ReasonSysctlForbidden = "SysctlForbidden"

// safeSysctls are upstream's safe sysctls (pkg/kubelet/sysctl, v1.36): a
// pod may always set them; those with a kernel version only from that
// version on (they are namespaced only since).
var safeSysctls = []struct{ name, kernel string }{
	{name: "kernel.shm_rmid_forced"},
	{name: "net.ipv4.ip_local_port_range"},
	{name: "net.ipv4.tcp_syncookies"},
	{name: "net.ipv4.ping_group_range"},
	{name: "net.ipv4.ip_unprivileged_port_start"},
	{name: "net.ipv4.ip_local_reserved_ports", kernel: "3.16"},
	{name: "net.ipv4.tcp_keepalive_time", kernel: "4.5"},
	{name: "net.ipv4.tcp_fin_timeout", kernel: "4.6"},
	{name: "net.ipv4.tcp_keepalive_intvl", kernel: "4.5"},
	{name: "net.ipv4.tcp_keepalive_probes", kernel: "4.5"},
	{name: "net.ipv4.tcp_rmem", kernel: "4.15"},
	{name: "net.ipv4.tcp_wmem", kernel: "4.15"},
}

// SafeSysctls are the safe sysctls on a kernel of that release (uname -r,
// such as "6.1.0-13-amd64"); an unknown release leaves out those that need
// a version, as upstream.
func SafeSysctls(kernelRelease string) []string {
	have, ok := kernelVersion(kernelRelease)
	var out []string
	for _, s := range safeSysctls {
		if s.kernel == "" {
			out = append(out, s.name)
			continue
		}
		if want, _ := kernelVersion(s.kernel); ok && !versionLess(have, want) {
			out = append(out, s.name)
		}
	}
	return out
}

var kernelVersionRE = regexp.MustCompile(`^(\d+)\.(\d+)`)

func kernelVersion(s string) ([2]int, bool) {
	m := kernelVersionRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return [2]int{}, false
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return [2]int{major, minor}, true
}

func versionLess(a, b [2]int) bool {
	return a[0] < b[0] || (a[0] == b[0] && a[1] < b[1])
}

// sysctlNamespace is the kernel namespace a sysctl lives in: only
// namespaced sysctls may be allowed (upstream's component-helpers sysctl
// namespaces).
type sysctlNamespace string

const (
	nsIPC     sysctlNamespace = "IPC"
	nsNet     sysctlNamespace = "Net"
	nsUnknown sysctlNamespace = ""
)

var sysctlNamespaces = map[string]sysctlNamespace{
	"kernel.sem": nsIPC, "kernel.shmall": nsIPC, "kernel.shmmax": nsIPC, "kernel.shmmni": nsIPC,
	"kernel.shm_rmid_forced": nsIPC, "kernel.shm": nsIPC,
	"kernel.msgmax": nsIPC, "kernel.msgmnb": nsIPC, "kernel.msgmni": nsIPC, "kernel.msg": nsIPC,
}

func namespaceOf(name string) sysctlNamespace {
	if ns, ok := sysctlNamespaces[name]; ok {
		return ns
	}
	switch {
	case strings.HasPrefix(name, "net."):
		return nsNet
	case strings.HasPrefix(name, "fs.mqueue."):
		return nsIPC
	}
	return nsUnknown
}

// normalizeSysctl writes a sysctl with '.' separators: net/ipv4/conf/eno2.100/rp_filter
// is net.ipv4.conf.eno2/100.rp_filter, as upstream.
func normalizeSysctl(s string) string {
	i := strings.IndexAny(s, "./")
	if i == -1 || s[i] == '.' {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.':
			return '/'
		case '/':
			return '.'
		}
		return r
	}, s)
}

// sysctlPatternRE is upstream's pattern of an allowed sysctl (a name, or a
// prefix ending in '*'), '/' separators allowed.
const sysctlPattern = `([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]`

var sysctlPatternRE = regexp.MustCompile("^" + sysctlPattern + "$")

const sysctlMaxLength = 253

// SysctlAllowlist admits pods whose sysctls it allows: the safe sysctls and
// the node's --allowed-unsafe-sysctls, as upstream's sysctl admit handler.
type SysctlAllowlist struct {
	names    map[string]sysctlNamespace
	prefixes map[string]sysctlNamespace
}

// NewSysctlAllowlist allows the given sysctls and patterns ("kernel.msg*");
// each must be a namespaced sysctl.
func NewSysctlAllowlist(patterns []string) (*SysctlAllowlist, error) {
	w := &SysctlAllowlist{names: map[string]sysctlNamespace{}, prefixes: map[string]sysctlNamespace{}}
	for _, p := range patterns {
		if len(p) > sysctlMaxLength || !sysctlPatternRE.MatchString(p) {
			return nil, fmt.Errorf("sysctl %q must have at most %d characters and match regex %s", p, sysctlMaxLength, sysctlPattern)
		}
		name := normalizeSysctl(p)
		prefixed := false
		if i := strings.IndexByte(name, '*'); i != -1 {
			name, prefixed = name[:i], true
		}
		ns := namespaceOf(name)
		if ns == nsUnknown {
			return nil, fmt.Errorf("the sysctls %q are not known to be namespaced", name)
		}
		if prefixed {
			w.prefixes[name] = ns
		} else {
			w.names[name] = ns
		}
	}
	return w, nil
}

// Admit checks the pod's sysctls: a sysctl neither allowed nor matching
// an allowed prefix, or a network (IPC) one in a pod on the host's network
// (IPC), is forbidden. The reason and message are upstream's.
func (w *SysctlAllowlist) Admit(pod *v1.Pod) (reason, msg string) {
	if w == nil || pod.Spec.SecurityContext == nil {
		return "", ""
	}
	for _, s := range pod.Spec.SecurityContext.Sysctls {
		if err := w.validate(s.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC); err != nil {
			return ReasonSysctlForbidden, fmt.Sprintf("forbidden sysctl: %v", err)
		}
	}
	return "", ""
}

func (w *SysctlAllowlist) validate(name string, hostNet, hostIPC bool) error {
	name = normalizeSysctl(name)
	check := func(ns sysctlNamespace) error {
		if (ns == nsIPC && hostIPC) || (ns == nsNet && hostNet) {
			return fmt.Errorf("%q not allowed with host %s enabled", name, ns)
		}
		return nil
	}
	if ns, ok := w.names[name]; ok {
		return check(ns)
	}
	for p, ns := range w.prefixes {
		if strings.HasPrefix(name, p) {
			return check(ns)
		}
	}
	return fmt.Errorf("%q not allowlisted", name)
}
