package messages

import (
	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The CgroupActor's protocol (actors/cgroup): a pod's cgroup made before
// its sandbox, resized in place, removed once the pod's last container is
// gone. Pods are read only. Each request is answered to its ReplyTo, or
// to its sender (ctx.Request) when ReplyTo is nil.

// EnsurePodCgroup asks for the pod's cgroup, created with its values (or
// updated, when it is there: a restarted PodActor or agent). Reply:
// PodCgroup.
type EnsurePodCgroup struct {
	Pod     *v1.Pod
	ReplyTo *actor.PID
}

// PodCgroup answers EnsurePodCgroup and ResizePodCgroup: the cgroup parent
// the pod's sandbox is given (the driver's form: a cgroupfs path or the
// expanded systemd slice), or why the cgroup could not be made or written
// (the pod waits and asks again after back-off; an event names Err).
type PodCgroup struct {
	UID    types.UID
	Parent string
	Err    error
}

// ResizePodCgroup sets the pod cgroup's values of the resources named
// (v1.ResourceCPU, v1.ResourceMemory) from Pod, whose spec carries the
// resources allocated to it after a resize. The PodActor sends it before
// UpdateContainerResources for a resource whose pod limit rises and after
// it for one whose limit falls, as upstream. Reply: PodCgroup.
type ResizePodCgroup struct {
	Pod       *v1.Pod
	Resources []v1.ResourceName
	ReplyTo   *actor.PID
}

// GetPodCgroup asks for the current values of a pod's cgroup. Reply:
// PodCgroupValues.
type GetPodCgroup struct {
	UID     types.UID
	ReplyTo *actor.PID
}

// PodCgroupValues answers GetPodCgroup: the values read from the cgroup
// (nil fields: not readable), or Err (errdefs.ErrNotFound: no such pod
// cgroup).
type PodCgroupValues struct {
	UID       types.UID
	CPUShares *uint64
	CPUQuota  *int64
	CPUPeriod *uint64
	Memory    *int64
	PidsLimit *int64
	Err       error
}

// RemovePodCgroup asks to remove a pod's cgroup once the pod's last
// container and sandbox are gone. Reply: PodCgroupRemoved. A cgroup that
// still holds a process is left (Err says so) and the garbage collector
// tries again.
type RemovePodCgroup struct {
	UID     types.UID
	ReplyTo *actor.PID
}

// PodCgroupRemoved answers RemovePodCgroup.
type PodCgroupRemoved struct {
	UID types.UID
	Err error
}

// SweepPodCgroups is the NodeActor's housekeeping word to the
// CgroupActor. Active are the pods admitted and not being killed
// (upstream's active pods): the burstable QoS cgroup's CPU shares are the
// sum of their requests. Keep are all the pods that still exist (a source
// wants them, the runtime holds something of them, or a PodActor lives):
// the pod cgroup of any other pod (a crash between create and delete, a
// pod deleted while the agent was down) is removed, unless it still holds
// a process. Both are the receiver's to keep (read only).
type SweepPodCgroups struct {
	Active []*v1.Pod
	Keep   map[types.UID]bool
}
