package nodestatus

import "slices"

// Node declared features (node.status.declaredFeatures, GA in Kubernetes
// v1.37): the kubelet lists the features of
// k8s.io/component-helpers/nodedeclaredfeatures it has, and the API server
// and the scheduler use the list to keep a pod that needs one off a node
// that lacks it (and, for ExtendWebSocketsToKubelet, to pass WebSocket
// streams through to the node). A feature declared but not implemented
// would send such pods or streams to a node that fails them, so actorlet
// declares exactly the features it implements. In v1.37.2 none of the
// registry's features qualifies (notDeclared says why for each), so the
// list is empty and the field is left out, as upstream's for a kubelet
// with those gates off.

// declaredFeatures are the registry features actorlet implements, sorted.
var declaredFeatures []string

// notDeclared is every feature of the v1.37.2 registry
// (nodedeclaredfeatures/features.AllFeatures) that actorlet does not
// declare, with the reason (docs/KUBERNETES-1.37.md).
var notDeclared = map[string]string{
	"RestartAllContainersOnContainerExits":         "the RestartAllContainers action of restartPolicyRules is not implemented (alpha, refused as the API server does with its gate off)",
	"InPlacePodLevelResourcesVerticalScaling":      "containers are resized in place, pod-level resources are not (such a resize is Infeasible)",
	"InPlacePodVerticalScalingInitContainers":      "containers and sidecars are resized in place, non-restartable init containers are not (Infeasible)",
	"InPlacePodVerticalScalingMemoryBackedVolumes": "memory-backed emptyDir size limits are not resized in place",
	"ExtendWebSocketsToKubelet":                    "exec and attach speak v5 WebSockets, but port-forward over a WebSocket tunnel is refused (SPDY only): declaring it would make the API server pass those through and break kubectl port-forward",
	"UserNamespacesHostNetworkSupport":             "alpha, off upstream; user namespaces with hostNetwork are not implemented",
	"DRANodeAllocatableResources":                  "alpha, off upstream; DRA node-allocatable resources are not implemented",
	"VolumeBindMountOptions":                       "alpha, off upstream; bind mount options are not passed to the runtime",
	"DRAOptionalNodeOperations":                    "alpha, off upstream",
}

// DeclaredFeatures is node.status.declaredFeatures: a copy, nil when empty.
func DeclaredFeatures() []string {
	if len(declaredFeatures) == 0 {
		return nil
	}
	return slices.Clone(declaredFeatures)
}
