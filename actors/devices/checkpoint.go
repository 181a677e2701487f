package devices

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/actorlet/actorlet/internal/checkpoint"
	"github.com/actorlet/actorlet/messages"
)

// Store keeps the checkpoint of allocations (the lead wires a file at
// <root-dir>/device-plugins/kubelet_internal_checkpoint, upstream's name).
// Load of a missing checkpoint returns nil, nil. Save replaces the whole
// checkpoint (atomically, where it can). Load runs once per incarnation of
// the actor, in its Started handler: it must be quick (a small file); Save
// runs off the mailbox.
type Store interface {
	Load() ([]byte, error)
	Save([]byte) error
}

// checkpointVersion is the format written; another version is ignored.
const checkpointVersion = 1

// checkpointData is the state checkpointed: every allocated pod, in
// internal/checkpoint's envelope:
//
//	{"version":1,"checksum":"sha256:<hex>","data":{"pods":[...]}}
//
// The checksum is over the canonical JSON of data (as encoding/json writes
// it), so a corrupt or hand-edited checkpoint is detected and ignored.
type checkpointData struct {
	Pods []*podRecord `json:"pods"`
}

// podRecord is one pod's allocation: what each of its containers got. It is
// both the actor's state and the checkpoint's record.
type podRecord struct {
	UID        types.UID          `json:"uid"`
	Namespace  string             `json:"namespace"`
	Name       string             `json:"name"`
	Containers []*containerRecord `json:"containers"` // init containers first, spec order

	// sweep is the count of PodsKnown handled when the pod was allocated
	// (-1: loaded from the checkpoint); see handlePodsKnown.
	sweep int
}

// containerRecord is what one container got, by resource (sorted).
type containerRecord struct {
	Name      string            `json:"name"`
	Resources []*resourceRecord `json:"resources"`
}

// resourceRecord is the devices of one resource given to a container and
// the provider's answer to Allocate for them.
type resourceRecord struct {
	Resource    string            `json:"resource"`
	IDs         []string          `json:"deviceIDs"`
	Envs        map[string]string `json:"envs,omitempty"`
	Devices     []deviceNode      `json:"devices,omitempty"`
	Mounts      []deviceMount     `json:"mounts,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	CDIDevices  []string          `json:"cdiDevices,omitempty"`
}

type deviceNode struct {
	ContainerPath string `json:"containerPath"`
	HostPath      string `json:"hostPath"`
	Permissions   string `json:"permissions,omitempty"`
}

type deviceMount struct {
	ContainerPath string `json:"containerPath"`
	HostPath      string `json:"hostPath"`
	ReadOnly      bool   `json:"readOnly,omitempty"`
}

// newResourceRecord keeps a provider's ContainerAllocateResponse (nil:
// nothing but the IDs).
func newResourceRecord(resource string, ids []string, r *pluginapi.ContainerAllocateResponse) *resourceRecord {
	rec := &resourceRecord{Resource: resource, IDs: ids}
	if r == nil {
		return rec
	}
	if len(r.GetEnvs()) > 0 {
		rec.Envs = make(map[string]string, len(r.GetEnvs()))
		for k, v := range r.GetEnvs() {
			rec.Envs[k] = v
		}
	}
	if len(r.GetAnnotations()) > 0 {
		rec.Annotations = make(map[string]string, len(r.GetAnnotations()))
		for k, v := range r.GetAnnotations() {
			rec.Annotations[k] = v
		}
	}
	for _, d := range r.GetDevices() {
		if d != nil {
			rec.Devices = append(rec.Devices, deviceNode{ContainerPath: d.GetContainerPath(), HostPath: d.GetHostPath(), Permissions: d.GetPermissions()})
		}
	}
	for _, m := range r.GetMounts() {
		if m != nil {
			rec.Mounts = append(rec.Mounts, deviceMount{ContainerPath: m.GetContainerPath(), HostPath: m.GetHostPath(), ReadOnly: m.GetReadOnly()})
		}
	}
	for _, c := range r.GetCdiDevices() {
		if c != nil && c.GetName() != "" {
			rec.CDIDevices = append(rec.CDIDevices, c.GetName())
		}
	}
	return rec
}

// reply is the DevicesAllocated of an allocated pod: each container's
// resources merged (in resource order; a later resource's env or
// annotation of the same name wins).
func (p *podRecord) reply() *messages.DevicesAllocated {
	out := &messages.DevicesAllocated{UID: p.UID, Containers: map[string]messages.ContainerDevices{}}
	for _, c := range p.Containers {
		var cd messages.ContainerDevices
		for _, r := range c.Resources {
			if cd.IDs == nil {
				cd.IDs = map[v1.ResourceName][]string{}
			}
			cd.IDs[v1.ResourceName(r.Resource)] = append([]string(nil), r.IDs...)
			for k, v := range r.Envs {
				if cd.Envs == nil {
					cd.Envs = map[string]string{}
				}
				cd.Envs[k] = v
			}
			for k, v := range r.Annotations {
				if cd.Annotations == nil {
					cd.Annotations = map[string]string{}
				}
				cd.Annotations[k] = v
			}
			for _, d := range r.Devices {
				cd.Devices = append(cd.Devices, messages.DeviceNode(d))
			}
			for _, m := range r.Mounts {
				cd.Mounts = append(cd.Mounts, messages.DeviceMount(m))
			}
			cd.CDIDevices = append(cd.CDIDevices, r.CDIDevices...)
		}
		out.Containers[c.Name] = cd
	}
	return out
}

// encodeCheckpoint returns the checkpoint of pods (sorted by UID).
func encodeCheckpoint(pods map[types.UID]*podRecord) ([]byte, error) {
	d := checkpointData{Pods: make([]*podRecord, 0, len(pods))}
	for _, p := range pods {
		d.Pods = append(d.Pods, p)
	}
	sort.Slice(d.Pods, func(i, j int) bool { return d.Pods[i].UID < d.Pods[j].UID })
	b, err := checkpoint.Encode(checkpointVersion, &d)
	if err != nil {
		return nil, fmt.Errorf("encode device checkpoint: %w", err)
	}
	return b, nil
}

// errCorrupt is a checkpoint that cannot be trusted.
var errCorrupt = errors.New("corrupt device checkpoint")

// decodeCheckpoint reads a checkpoint (nil or empty: no pods). A checkpoint
// that does not parse, has another version, a wrong checksum or a record
// without its UID, container name, resource or device IDs is an error
// wrapping errCorrupt.
func decodeCheckpoint(b []byte) (map[types.UID]*podRecord, error) {
	pods := map[types.UID]*podRecord{}
	if len(b) == 0 {
		return pods, nil
	}
	var d checkpointData
	if err := checkpoint.DecodeCanonical(b, checkpointVersion, &d); err != nil {
		return nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	for _, p := range d.Pods {
		if p == nil || p.UID == "" {
			return nil, fmt.Errorf("%w: a pod without its UID", errCorrupt)
		}
		for _, c := range p.Containers {
			if c == nil || c.Name == "" {
				return nil, fmt.Errorf("%w: pod %s: a container without its name", errCorrupt, p.UID)
			}
			for _, r := range c.Resources {
				if r == nil || r.Resource == "" || len(r.IDs) == 0 {
					return nil, fmt.Errorf("%w: pod %s container %s: a resource without its name or devices", errCorrupt, p.UID, c.Name)
				}
			}
		}
		p.sweep = -1
		pods[p.UID] = p
	}
	return pods, nil
}

// saver writes checkpoints to the Store one at a time and never an older
// state over a newer one: it outlives the actor's incarnations (a save of
// an incarnation that crashed may still be running when the next one
// loads and saves).
type saver struct {
	store Store

	seq atomic.Uint64 // the last sequence number given

	mu      sync.Mutex
	written uint64 // the sequence number of the state last written
}

// next numbers a state about to be saved (from the mailbox, in the order
// the states were taken).
func (s *saver) next() uint64 { return s.seq.Add(1) }

// save writes the state numbered seq unless a newer one is written.
func (s *saver) save(seq uint64, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq <= s.written {
		return nil
	}
	if err := s.store.Save(data); err != nil {
		return fmt.Errorf("save device checkpoint: %w", err)
	}
	s.written = seq
	return nil
}

// load reads the checkpoint once no save is running.
func (s *saver) load() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.store.Load()
}
