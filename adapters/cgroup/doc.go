// Package cgroup reads and writes the node's cgroups for the CgroupActor
// (actors/cgroup's Manager): Cgroupfs drives the cgroupfs driver on cgroup
// v1 (one hierarchy per controller) and v2 (one unified hierarchy) over
// github.com/opencontainers/cgroups, the library runc and the upstream
// kubelet use; the systemd driver lives beside it (systemd*.go).
//
// DetectHost tells the host's cgroup version and layout (unified, hybrid,
// legacy) for the start log, CheckCgroupV1 is upstream's failCgroupV1
// refusal. Errors are classified with errdefs: a cgroup that is not there
// is ErrNotFound, a write the kernel refuses names the cgroup, the file and
// the value and carries the errno (EBUSY and a memory limit below usage:
// ErrFailedPrecondition; EINVAL: ErrInvalidArgument; ENOSPC:
// ErrResourceExhausted).
package cgroup
