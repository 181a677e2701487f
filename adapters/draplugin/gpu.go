package draplugin

import (
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/actorlet/actorlet/adapters/nvml"
)

// GPU device type, NVIDIA's DRA driver's "type" attribute of a full GPU.
const gpuType = "gpu"

// GPUDevice is a GPU as NVIDIA's DRA driver (gpu.nvidia.com) publishes it:
// named gpu-<index>, with the attributes type, uuid, productName, brand,
// architecture, cudaComputeCapability, driverVersion, cudaDriverVersion
// (versions as semantic versions), pcieBusID, index and minor, and the
// capacity memory. Unknown figures are left out.
func GPUDevice(g nvml.GPUInfo, healthy bool) SliceDevice {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"type":  {StringValue: ptr.To(gpuType)},
		"uuid":  {StringValue: ptr.To(g.UUID)},
		"index": {IntValue: ptr.To(int64(g.Index))},
		"minor": {IntValue: ptr.To(int64(g.Minor))},
	}
	str := func(name, v string) {
		if v != "" {
			attrs[resourceapi.QualifiedName(name)] = resourceapi.DeviceAttribute{StringValue: ptr.To(v)}
		}
	}
	ver := func(name, v string) {
		if s := semver(v); s != "" {
			attrs[resourceapi.QualifiedName(name)] = resourceapi.DeviceAttribute{VersionValue: ptr.To(s)}
		}
	}
	str("productName", g.ProductName)
	str("brand", g.Brand)
	str("architecture", g.Architecture)
	str("pcieBusID", g.PCIeBusID)
	ver("cudaComputeCapability", g.CUDAComputeCapability)
	ver("driverVersion", g.DriverVersion)
	ver("cudaDriverVersion", g.CUDADriverVersion)
	d := SliceDevice{Name: g.Name, Attributes: attrs, Healthy: healthy}
	if g.MemoryBytes > 0 {
		d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": MemoryCapacity(g.MemoryBytes)}
	}
	return d
}

// semver pads a dotted version of one to three numbers to
// major.minor.patch ("9.0" -> "9.0.0"); "" when v is not one.
func semver(v string) string {
	parts := strings.Split(v, ".")
	if v == "" || len(parts) > 3 {
		return ""
	}
	for i, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return ""
		}
		if len(p) > 1 && p[0] == '0' { // no leading zeros in semver
			parts[i] = strings.TrimLeft(p, "0")
			if parts[i] == "" {
				parts[i] = "0"
			}
		}
	}
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	return strings.Join(parts, ".")
}
