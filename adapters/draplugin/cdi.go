package draplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CDI spec files of prepared claims: one JSON spec per claim in Dir,
// kind <vendor>/<class>, one device per GPU named as the claim's CDI
// device IDs say, each with its device node; the spec's own edits give
// NVIDIA_VISIBLE_DEVICES (the claim's GPUs' UUIDs) and the driver's
// control nodes, as the device plugin path gives them.

// cdiVersion is the CDI spec version written (0.5.0 added hostPath of
// device nodes; containerd 1.7 and 2.x read it).
const cdiVersion = "0.5.0"

// CDISpec is the part of a CDI spec written here (and read by the sim
// runtime's own parser).
type CDISpec struct {
	Version        string      `json:"cdiVersion"`
	Kind           string      `json:"kind"`
	Devices        []CDIDevice `json:"devices"`
	ContainerEdits *CDIEdits   `json:"containerEdits,omitempty"`
}

// CDIDevice is a device of a spec.
type CDIDevice struct {
	Name           string   `json:"name"`
	ContainerEdits CDIEdits `json:"containerEdits"`
}

// CDIEdits are a spec's or a device's container edits.
type CDIEdits struct {
	Env         []string        `json:"env,omitempty"`
	DeviceNodes []CDIDeviceNode `json:"deviceNodes,omitempty"`
}

// CDIDeviceNode is a device node of the edits.
type CDIDeviceNode struct {
	Path        string `json:"path"`
	HostPath    string `json:"hostPath,omitempty"`
	Permissions string `json:"permissions,omitempty"`
}

// GPUNodes gives the device nodes of GPUs (UUIDs): each GPU's own node
// (host, container path) and the control nodes every GPU container gets.
type GPUNodes func(uuid string) (host, container string, err error)

// CDIWriter writes and removes the claims' specs.
type CDIWriter struct {
	Dir  string
	Kind string // "k8s.gpu.nvidia.com/claim"
	// Node is each GPU's device node; Control the control nodes (host,
	// container path pairs) the host has.
	Node    GPUNodes
	Control func() [][2]string
}

// SpecPath is the spec file of a claim.
func (w *CDIWriter) SpecPath(claimUID string) string {
	return filepath.Join(w.Dir, strings.ReplaceAll(w.Kind, "/", "_")+"_"+claimUID+".json")
}

// CDIName is the device part of a CDI device ID ("kind=name"), "" when id
// is not of kind.
func (w *CDIWriter) CDIName(id string) string {
	name, ok := strings.CutPrefix(id, w.Kind+"=")
	if !ok {
		return ""
	}
	return name
}

// Write writes the spec of a claim's devices (atomically: a temporary
// file renamed).
func (w *CDIWriter) Write(claimUID string, devs []Device) error {
	if len(devs) == 0 {
		return errors.New("no device")
	}
	spec := CDISpec{Version: cdiVersion, Kind: w.Kind, ContainerEdits: &CDIEdits{}}
	var uuids []string
	for _, d := range devs {
		if len(d.CDIDevices) != 1 || w.CDIName(d.CDIDevices[0]) == "" {
			return fmt.Errorf("device %s: CDI device IDs %q not one of kind %s", d.Name, d.CDIDevices, w.Kind)
		}
		host, ctr, err := w.Node(d.ID)
		if err != nil {
			return fmt.Errorf("device %s: %w", d.Name, err)
		}
		spec.Devices = append(spec.Devices, CDIDevice{Name: w.CDIName(d.CDIDevices[0]), ContainerEdits: CDIEdits{
			DeviceNodes: []CDIDeviceNode{{Path: ctr, HostPath: host, Permissions: "rw"}},
		}})
		uuids = append(uuids, d.ID)
	}
	spec.ContainerEdits.Env = []string{"NVIDIA_VISIBLE_DEVICES=" + strings.Join(uuids, ",")}
	if w.Control != nil {
		for _, n := range w.Control() {
			spec.ContainerEdits.DeviceNodes = append(spec.ContainerEdits.DeviceNodes, CDIDeviceNode{Path: n[1], HostPath: n[0], Permissions: "rw"})
		}
	}
	b, err := json.MarshalIndent(&spec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(w.Dir, 0o755); err != nil {
		return fmt.Errorf("CDI spec dir: %w", err)
	}
	path := w.SpecPath(claimUID)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write CDI spec: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write CDI spec: %w", err)
	}
	return nil
}

// Remove removes a claim's spec (missing: no error).
func (w *CDIWriter) Remove(claimUID string) error {
	if err := os.Remove(w.SpecPath(claimUID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove CDI spec: %w", err)
	}
	return nil
}
