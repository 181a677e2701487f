package main

import (
	"os"
	"strings"
)

// selinuxEnforceFile is where the kernel says whether SELinux enforces.
const selinuxEnforceFile = "/sys/fs/selinux/enforce"

// selinuxWarning is the line logged at start when SELinux enforces on
// the host (the file at path reads "1"): actorlet neither mounts volumes
// with -o context= (SELinuxMount, GA in Kubernetes v1.37) nor asks the
// runtime to relabel them, so a pod whose containers need their volumes
// labelled fails on such a host. "" when SELinux is off or absent, where
// upstream does nothing either (docs/KUBERNETES-1.37.md).
func selinuxWarning(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(b)) != "1" {
		return ""
	}
	return "SELinux enforces on this host, and actorlet does not label pod volumes (no context= mounts, no relabel): pods whose containers need labelled volumes will fail"
}
