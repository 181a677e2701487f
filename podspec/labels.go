package podspec

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Labels and annotations the upstream kubelet puts on CRI objects. Node tools
// (crictl and friends) read them; a restarted actorlet finds its pods by them.
const (
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelContainerName = "io.kubernetes.container.name"

	AnnotationContainerHash        = "io.kubernetes.container.hash"
	AnnotationRestartCount         = "io.kubernetes.container.restartCount"
	AnnotationTerminationMsgPath   = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMsgPolicy = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationPodTerminationGrace  = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationContainerPorts       = "io.kubernetes.container.ports"
	AnnotationContainerInit        = "io.kubernetes.container.init" // actorlet: "true" on init containers
	// AnnotationContainerResources (actorlet) holds the CPU and memory a
	// container was created with (FormatLinuxResources): what it runs with
	// where the runtime does not report its resources, until a resize.
	AnnotationContainerResources = "io.actorlet.container.resources"
)

// PodUIDOf is the pod UID a CRI object's labels name ("" when none).
func PodUIDOf(labels map[string]string) types.UID {
	return types.UID(labels[LabelPodUID])
}

// ContainerNameOf is the container name a CRI container's labels name (""
// when none).
func ContainerNameOf(labels map[string]string) string {
	return labels[LabelContainerName]
}

// Labels are the labels of a pod's sandbox: the pod's own labels plus its
// UID, name and namespace under the upstream kubelet's keys.
func Labels(pod *v1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[LabelPodUID] = string(pod.UID)
	l[LabelPodName] = pod.Name
	l[LabelPodNamespace] = pod.Namespace
	return l
}

// PodSelector selects a pod's CRI objects (sandboxes and containers) by the
// pod UID label.
func PodSelector(uid types.UID) map[string]string {
	return map[string]string{LabelPodUID: string(uid)}
}
