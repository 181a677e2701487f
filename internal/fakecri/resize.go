package fakecri

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// In-place resize: UpdateContainerResources changes what a container's
// status reports (ContainerStatus.Resources, from its config at creation),
// and ContainerStats reports the memory usage a test sets.

func init() {
	methods["UpdateContainerResources"] = true
	methods["ContainerStats"] = true
}

// UpdateCall is one UpdateContainerResources call that the runtime took.
type UpdateCall struct {
	ContainerID string
	Name        string
	Resources   *runtimeapi.LinuxContainerResources
}

func createdResources(cfg *runtimeapi.ContainerConfig) *runtimeapi.ContainerResources {
	if r := cfg.GetLinux().GetResources(); r != nil {
		return &runtimeapi.ContainerResources{Linux: clone(r)}
	}
	return nil
}

// HideResources makes container statuses carry no resources, as a runtime
// that does not report them.
func (r *Runtime) HideResources(hide bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hideResources = hide
}

// SetMemoryUsage sets the memory usage ContainerStats reports for a
// container (key: its ID or its name); without one it reports 0.
func (r *Runtime) SetMemoryUsage(key string, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.memUsage == nil {
		r.memUsage = map[string]int64{}
	}
	r.memUsage[key] = bytes
}

// Updates lists the UpdateContainerResources calls taken, in order.
func (r *Runtime) Updates() []UpdateCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]UpdateCall, len(r.updates))
	for i, u := range r.updates {
		out[i] = UpdateCall{ContainerID: u.ContainerID, Name: u.Name, Resources: clone(u.Resources)}
	}
	return out
}

// UpdateContainerResources sets a running or created container's CPU and
// memory: the non-zero fields of res replace the container's (as
// containerd merges them). A container that is gone is not found.
func (r *Runtime) UpdateContainerResources(ctx context.Context, id string, res *runtimeapi.LinuxContainerResources) error {
	err := r.enter(ctx, "UpdateContainerResources")
	defer r.leave("UpdateContainerResources")
	if err != nil {
		return err
	}
	c, ok := r.containers[id]
	if !ok {
		return notFound("update container resources %s: not found", id)
	}
	cur := &runtimeapi.LinuxContainerResources{}
	if c.st.Resources.GetLinux() != nil {
		cur = clone(c.st.Resources.GetLinux())
	}
	if v := res.GetCpuShares(); v != 0 {
		cur.CpuShares = v
	}
	if v := res.GetCpuQuota(); v != 0 {
		cur.CpuQuota = v
	}
	if v := res.GetCpuPeriod(); v != 0 {
		cur.CpuPeriod = v
	}
	if v := res.GetMemoryLimitInBytes(); v != 0 {
		cur.MemoryLimitInBytes = v
	}
	c.st.Resources = &runtimeapi.ContainerResources{Linux: cur}
	r.updates = append(r.updates, UpdateCall{ContainerID: id, Name: nameOf(c.st), Resources: clone(res)})
	return nil
}

// ContainerStats reports a container's memory usage (SetMemoryUsage).
func (r *Runtime) ContainerStats(ctx context.Context, id string) (*runtimeapi.ContainerStats, error) {
	err := r.enter(ctx, "ContainerStats")
	defer r.leave("ContainerStats")
	if err != nil {
		return nil, err
	}
	c, ok := r.containers[id]
	if !ok {
		return nil, notFound("container stats %s: not found", id)
	}
	usage, ok := r.memUsage[id]
	if !ok {
		usage = r.memUsage[nameOf(c.st)]
	}
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{Id: id, Metadata: c.st.Metadata},
		Memory:     &runtimeapi.MemoryUsage{Timestamp: r.now(), UsageBytes: &runtimeapi.UInt64Value{Value: uint64(usage)}},
	}, nil
}
