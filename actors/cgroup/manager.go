// Package cgroup is the CgroupActor: the one owner of the node's pod
// cgroup tree (kubepods under --cgroup-root, the burstable and besteffort
// QoS cgroups, pod<uid> per pod), of node allocatable's enforcement on it,
// and of removing what a pod left behind. PodActors ask it by message
// (messages/cgroup.go) before their sandbox is made, to resize, and once
// their last container is gone.
package cgroup

import "github.com/actorlet/actorlet/podspec"

// Manager reads and writes cgroups by name, for one driver (cgroupfs or
// systemd) and one cgroup version: adapters/cgroup for the host, the sim
// runtime's in-memory tree for sim://. Every method is safe to call off
// the actor's mailbox. Errors are errdefs-classified: ErrNotFound for a
// cgroup that is not there.
type Manager interface {
	// Version is the cgroup version the manager writes: 1 or 2.
	Version() int
	// Driver is the cgroup driver.
	Driver() podspec.CgroupDriver
	// Exists says whether the cgroup is there (in every controller the
	// manager uses, on v1).
	Exists(name podspec.CgroupName) bool
	// Create makes the cgroup (and its missing parents) with r's values;
	// an existing cgroup is updated.
	Create(name podspec.CgroupName, r *podspec.CgroupResources) error
	// Update sets r's non-nil values.
	Update(name podspec.CgroupName, r *podspec.CgroupResources) error
	// Read returns the cgroup's current values (every field set that the
	// manager can read).
	Read(name podspec.CgroupName) (*podspec.CgroupResources, error)
	// Destroy removes the cgroup; one that still holds a process is an
	// error (ErrFailedPrecondition), never killed.
	Destroy(name podspec.CgroupName) error
	// Pids are the processes in the cgroup and its children.
	Pids(name podspec.CgroupName) ([]int, error)
	// Children are the names of the cgroup's child cgroups.
	Children(name podspec.CgroupName) ([]podspec.CgroupName, error)
}
