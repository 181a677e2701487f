// Package draplugin is the driver side of the kubelet's DRA plugin
// protocol, for the node's own GPUs: the DRA gRPC service
// (k8s.io/kubelet/pkg/apis/dra/v1 NodePrepareResources and
// NodeUnprepareResources) on the driver's socket, the plugin registration
// service (pluginregistration v1) on a socket in <root-dir>/plugins_registry
// through which the node's DRA manager finds the driver as it finds any
// other, the ResourceSlice of the node's devices (resource.k8s.io/v1,
// through client-go) and the CDI spec of each prepared claim. What a claim
// gets is decided by a Preparer (the DevicesActor, asked by message).
package draplugin
