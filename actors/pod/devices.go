package pod

import (
	"fmt"
	"maps"
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/messages"
)

// deviceState is the pod's devices as the DevicesActor allocated them
// (extended resources: GPUs, device plugins): what each container gets,
// once answered; asked while the answer is pending. The DevicesActor
// answers the same allocation to every incarnation (it checkpoints them).
type deviceState struct {
	containers map[string]messages.ContainerDevices
	asked      bool
}

// ready reports whether containers may be created; ask is true when the
// DevicesActor must be asked now (once).
func (d *deviceState) ready(wired, wanted bool) (ready, ask bool) {
	if !wired || !wanted || d.containers != nil {
		return true, false
	}
	if d.asked {
		return false, false
	}
	d.asked = true
	return false, true
}

// answered records the DevicesActor's answer; false when none was pending.
func (d *deviceState) answered(m *messages.DevicesAllocated) bool {
	if !d.asked {
		return false
	}
	d.asked = false
	if m.Reason == "" {
		d.containers = m.Containers
		if d.containers == nil {
			d.containers = map[string]messages.ContainerDevices{}
		}
	}
	return true
}

// applyDevices gives a container config what the container's devices
// need: environment (before the container's own, as upstream puts the
// device manager's first: a variable the pod sets itself wins), device
// nodes, mounts, annotations and CDI devices.
func applyDevices(cfg *runtimeapi.ContainerConfig, cd messages.ContainerDevices) {
	if len(cd.Envs) > 0 {
		envs := make([]*runtimeapi.KeyValue, 0, len(cd.Envs)+len(cfg.Envs))
		for _, k := range slices.Sorted(maps.Keys(cd.Envs)) {
			envs = append(envs, &runtimeapi.KeyValue{Key: k, Value: []byte(cd.Envs[k])})
		}
		cfg.Envs = append(envs, cfg.Envs...)
	}
	for _, d := range cd.Devices {
		cfg.Devices = append(cfg.Devices, &runtimeapi.Device{ContainerPath: d.ContainerPath, HostPath: d.HostPath, Permissions: d.Permissions})
	}
	for _, m := range cd.Mounts {
		cfg.Mounts = append(cfg.Mounts, &runtimeapi.Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, Readonly: m.ReadOnly})
	}
	if len(cd.Annotations) > 0 {
		if cfg.Annotations == nil {
			cfg.Annotations = map[string]string{}
		}
		maps.Copy(cfg.Annotations, cd.Annotations)
	}
	for _, name := range cd.CDIDevices {
		cfg.CDIDevices = append(cfg.CDIDevices, &runtimeapi.CDIDevice{Name: name})
	}
}

// cdiSupported refuses a container config that names CDI devices when the
// runtime cannot inject them (noCDI says why): the container would run
// without its devices, its CDI names silently dropped.
func cdiSupported(cfg *runtimeapi.ContainerConfig, noCDI string) error {
	if noCDI == "" || len(cfg.CDIDevices) == 0 {
		return nil
	}
	names := make([]string, len(cfg.CDIDevices))
	for i, d := range cfg.CDIDevices {
		names[i] = d.GetName()
	}
	return fmt.Errorf("container %q needs CDI devices %v, which the container runtime cannot inject: %s",
		cfg.GetMetadata().GetName(), names, noCDI)
}
