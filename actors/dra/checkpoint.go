package dra

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/checkpoint"
)

// Store keeps the checkpoint of the claims (the lead wires a file at
// <root-dir>/dra_manager_state, upstream's name). Load of a missing
// checkpoint returns nil, nil. Save replaces the whole checkpoint
// atomically. Both run in the actor's mailbox: the file is small, and a
// claim's state is on disk before any pod is answered.
type Store interface {
	Load() ([]byte, error)
	Save([]byte) error
}

// checkpointVersion is the format written; another version is ignored.
const checkpointVersion = 1

// checkpointData is the checkpoint's data, in internal/checkpoint's
// envelope:
//
//	{"version":1,"checksum":"sha256:<hex>","data":{"claims":[...]}}
//
// The checksum is over data as written, so a corrupt or hand-edited
// checkpoint is detected and ignored (with a log line).
type checkpointData struct {
	Claims []*claimInfo `json:"claims"`
}

// claimInfo is one ResourceClaim used by pods of the node (upstream's
// ClaimInfo): which pods use it, whether its drivers prepared it, and the
// devices each driver prepared. It is both the actor's state and the
// checkpoint's record.
type claimInfo struct {
	UID       types.UID               `json:"uid"`
	Namespace string                  `json:"namespace"`
	Name      string                  `json:"name"`
	Pods      map[types.UID]bool      `json:"pods"`
	Prepared  bool                    `json:"prepared"`
	Drivers   map[string]*driverState `json:"drivers"`

	unpreparing bool // NodeUnprepareResources in flight: no new pod may join
}

// driverState is what one driver of a claim holds: the allocated devices,
// with the CDI IDs the driver answered once prepared.
type driverState struct {
	Devices []device `json:"devices"`
}

// device is one prepared (or allocated) device.
type device struct {
	Pool     string   `json:"pool"`
	Device   string   `json:"device"`
	Requests []string `json:"requests,omitempty"`
	CDI      []string `json:"cdiDeviceIDs,omitempty"`
	ShareID  string   `json:"shareID,omitempty"`
}

func claimKey(namespace, name string) string { return namespace + "/" + name }

// encodeCheckpoint writes every claim, sorted by key.
func encodeCheckpoint(claims map[string]*claimInfo) ([]byte, error) {
	keys := slices.Sorted(maps.Keys(claims))
	d := checkpointData{Claims: make([]*claimInfo, 0, len(keys))}
	for _, k := range keys {
		d.Claims = append(d.Claims, claims[k])
	}
	return checkpoint.Encode(checkpointVersion, d)
}

// decodeCheckpoint reads a checkpoint; nil bytes are no claims.
func decodeCheckpoint(b []byte) (map[string]*claimInfo, error) {
	out := map[string]*claimInfo{}
	if len(b) == 0 {
		return out, nil
	}
	var d checkpointData
	if err := checkpoint.Decode(b, checkpointVersion, &d); err != nil {
		return nil, fmt.Errorf("corrupt checkpoint: %w", err)
	}
	for _, c := range d.Claims {
		if c == nil || c.Name == "" || c.UID == "" {
			return nil, errors.New("checkpoint holds a claim without name or UID")
		}
		if c.Pods == nil {
			c.Pods = map[types.UID]bool{}
		}
		if c.Drivers == nil {
			c.Drivers = map[string]*driverState{}
		}
		out[claimKey(c.Namespace, c.Name)] = c
	}
	return out, nil
}
