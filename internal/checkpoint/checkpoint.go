// Package checkpoint is the envelope of the agent's JSON checkpoints (the
// DevicesActor's allocations, the ClaimsActor's claims, the GPU DRA
// driver's prepared claims):
//
//	{"version":1,"checksum":"sha256:<hex>","data":{...}}
//
// The checksum is over data as encoding/json writes it, so a corrupt or
// hand-edited checkpoint is detected. Where the file lives and how it is
// replaced atomically is the Store's business (adapters/host.FileStore).
package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// file is the checkpoint as stored.
type file struct {
	Version  int             `json:"version"`
	Checksum string          `json:"checksum"`
	Data     json.RawMessage `json:"data"`
}

// Checksum is the checksum of data as written in a checkpoint.
func Checksum(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Encode returns the checkpoint of data (any value encoding/json writes)
// with version.
func Encode(version int, data any) ([]byte, error) {
	d, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	return json.Marshal(&file{Version: version, Checksum: Checksum(d), Data: d})
}

// Decode reads a checkpoint of version into v (a pointer). The checksum
// must match data byte for byte as it stands in b. Its errors name what
// is wrong (the JSON, "version N, want M", "checksum ...", "data: ...")
// without a prefix: the caller says which checkpoint it read.
func Decode(b []byte, version int, v any) error {
	f, err := open(b, version)
	if err != nil {
		return err
	}
	if got := Checksum(f.Data); got != f.Checksum {
		return fmt.Errorf("checksum %s, want %s", got, f.Checksum)
	}
	if err := json.Unmarshal(f.Data, v); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	return nil
}

// DecodeCanonical is Decode with the checksum over v written again by
// encoding/json once read, so that a checkpoint re-indented by hand still
// reads while a changed value does not.
func DecodeCanonical(b []byte, version int, v any) error {
	f, err := open(b, version)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(f.Data, v); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	canon, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if got := Checksum(canon); got != f.Checksum {
		return fmt.Errorf("checksum %s, want %s", got, f.Checksum)
	}
	return nil
}

func open(b []byte, version int) (*file, error) {
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	if f.Version != version {
		return nil, fmt.Errorf("version %d, want %d", f.Version, version)
	}
	return &f, nil
}
