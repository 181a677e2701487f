package main

import (
	"log/slog"
	"os"
	"strings"

	"github.com/actorlet/actorlet/podspec"
)

// sysctlAllowlist is what pods are admitted with (upstream's sysctl admit
// handler): the safe sysctls this kernel namespaces, plus
// --allowed-unsafe-sysctls (validated with the flags).
func sysctlAllowlist(o *options, log *slog.Logger) *podspec.SysctlAllowlist {
	release, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		log.Warn("kernel version unknown: the safe sysctls namespaced only by newer kernels are not allowed", "err", err)
	}
	w, err := podspec.NewSysctlAllowlist(append(podspec.SafeSysctls(strings.TrimSpace(string(release))), o.AllowedUnsafeSysctls...))
	if err != nil {
		// validate refused the flag already; the safe list always parses.
		log.Error("--allowed-unsafe-sysctls", "err", err)
		w, _ = podspec.NewSysctlAllowlist(podspec.SafeSysctls(strings.TrimSpace(string(release))))
	}
	return w
}
