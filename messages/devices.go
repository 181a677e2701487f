package messages

import (
	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The DevicesActor's protocol: extended resources (the built-in GPUs, device
// plugins), their capacity, and the devices each pod's containers get.

// AllocateDevices asks the DevicesActor for the devices of every container
// of a pod that requests extended resources (limits, as upstream). Reply (to
// ReplyTo): DevicesAllocated. Asking again for a pod already allocated (a
// restarted PodActor, a restarted actorlet: allocations are checkpointed)
// answers with the same devices; it never allocates twice. Pod is the
// PodActor's desired pod, read only (see the package doc).
type AllocateDevices struct {
	Pod     *v1.Pod
	ReplyTo *actor.PID
}

// DevicesAllocated answers AllocateDevices: what each container (init
// containers included, by name) gets, or why the pod cannot have its devices
// (Reason "UnexpectedAdmissionError" as upstream's device manager, Message
// saying which resource and how many were free).
type DevicesAllocated struct {
	UID        types.UID
	Containers map[string]ContainerDevices
	Reason     string
	Message    string
}

// ContainerDevices is what one container gets, as a device plugin's
// ContainerAllocateResponse (merged over its resources): environment,
// device nodes, mounts, annotations and CDI device names for the CRI
// container config. Empty for a container that requests no device.
type ContainerDevices struct {
	Envs        map[string]string
	Devices     []DeviceNode
	Mounts      []DeviceMount
	Annotations map[string]string
	CDIDevices  []string
	// IDs are the device IDs by resource name (podresources API, metrics).
	IDs map[v1.ResourceName][]string
}

// DeviceNode is a device node given to a container.
type DeviceNode struct {
	ContainerPath string
	HostPath      string
	Permissions   string // "rw", "rwm", ...
}

// DeviceMount is a host path mounted into a container for its devices.
type DeviceMount struct {
	ContainerPath string
	HostPath      string
	ReadOnly      bool
}

// ReleaseDevices tells the DevicesActor a pod is gone (or terminated): its
// devices are free again.
type ReleaseDevices struct {
	UID types.UID
}

// DeviceCapacity is the DevicesActor's count of every extended resource it
// knows: all devices (Capacity) and the healthy ones (Allocatable), with the
// node labels and annotations that describe them (GPU feature discovery's
// names). Sent to its subscribers whenever it changes, and as the reply to
// GetDeviceCapacity.
type DeviceCapacity struct {
	Capacity    map[v1.ResourceName]int64
	Allocatable map[v1.ResourceName]int64
	Labels      map[string]string
	Annotations map[string]string
	// Ready: every built-in provider has sent its first device list (the
	// NodeActor admits pods once it is, or after a bound wait).
	Ready bool
}

// GetDeviceCapacity asks the DevicesActor for its current DeviceCapacity
// (a subscriber that restarted). Reply to ReplyTo, or to the sender when
// ReplyTo is nil.
type GetDeviceCapacity struct {
	ReplyTo *actor.PID
}

// DevicePluginRegistered tells the DevicesActor a device plugin registered
// on the kubelet's registration socket (deviceplugin v1beta1 Register):
// the resource it serves and its socket under the device-plugins dir.
type DevicePluginRegistered struct {
	ResourceName string
	Endpoint     string // the plugin's socket, an absolute path
	// Options of the plugin (GetDevicePluginOptions as registered).
	PreStartRequired                bool
	GetPreferredAllocationAvailable bool
}

// GetPodDevices asks the DevicesActor for allocations (the pod resources
// API). UID empty: every pod. Reply: PodDevicesList.
type GetPodDevices struct {
	UID types.UID
}

// PodDevicesList answers GetPodDevices.
type PodDevicesList struct {
	Pods []PodDevices
}

// PodDevices is one pod's allocated devices, by container name.
type PodDevices struct {
	UID        types.UID
	Namespace  string
	Name       string
	Containers map[string]map[v1.ResourceName][]string
}

// GetAllocatableDevices asks the DevicesActor for every healthy device by
// resource (the pod resources API's GetAllocatableResources). Reply:
// AllocatableDevices.
type GetAllocatableDevices struct{}

// AllocatableDevices answers GetAllocatableDevices.
type AllocatableDevices struct {
	Devices map[v1.ResourceName][]string
}

// InjectDeviceFault asks the DevicesActor to pass a fault to the backend of
// a simulated device (chaos tests, --gpus=mock:...): an Xid error on the
// device with this ID (a GPU's UUID). Reply: DeviceFaultInjected.
type InjectDeviceFault struct {
	DeviceID string
	Xid      uint64
}

// DeviceFaultInjected answers InjectDeviceFault (Err empty when injected).
type DeviceFaultInjected struct {
	Err string
}
