package devices

import (
	"context"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Provider is the source of one extended resource's devices: the built-in
// GPUs (adapters/nvml, on NVML or go-nvml's simulated servers) or a device
// plugin that registered on the kubelet socket (adapters/deviceplugin). The
// DevicesActor owns the goroutines that call it: none of its calls runs on
// the actor's mailbox.
type Provider interface {
	// ResourceName is the extended resource served ("nvidia.com/gpu").
	ResourceName() string
	// Watch calls update with the full device list (ID, Health "Healthy" or
	// "Unhealthy", topology) at once and again each time it changes, until
	// ctx ends (nil) or the provider fails (the error; the actor then
	// treats every device as gone and dials or starts it again with
	// back-off). why says what changed, for events ("GPU-...: Xid 79
	// (GPU has fallen off the bus)"), "" when nothing worth telling.
	Watch(ctx context.Context, update func(devices []*pluginapi.Device, why string)) error
	// Allocate returns what one container gets for these device IDs.
	Allocate(ctx context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error)
	// PreferredAllocation picks size devices of available, including
	// mustInclude; nil and no error: no preference (the actor picks).
	PreferredAllocation(ctx context.Context, available, mustInclude []string, size int) ([]string, error)
	// PreStart runs before a container with these devices starts (the
	// plugin's PreStartContainer; a no-op where the plugin does not ask for
	// it).
	PreStart(ctx context.Context, ids []string) error
}

// Describer is what a provider of GPUs also tells: node labels and
// annotations that describe its devices (GPU feature discovery's names:
// nvidia.com/gpu.product, nvidia.com/gpu.memory, ...).
type Describer interface {
	Describe() (labels, annotations map[string]string)
}

// Sampler is what a provider of GPUs also measures, polled by the actor at
// its metrics period: per device ID, metric name (DCGM exporter's, e.g.
// DCGM_FI_DEV_GPU_UTIL) to value.
type Sampler interface {
	Sample(ctx context.Context) (map[string]map[string]float64, error)
}

// FaultInjector is what a simulated provider also does: raise an Xid on a
// device (chaos tests).
type FaultInjector interface {
	InjectXid(deviceID string, xid uint64) error
}

// Dialer connects to a device plugin that registered (its socket path)
// and returns it as a Provider. Close releases the connection.
type Dialer interface {
	Dial(ctx context.Context, resourceName, endpoint string, preStart, preferred bool) (Provider, func() error, error)
}
