package podspec

import v1 "k8s.io/api/core/v1"

// IsSidecar reports whether an init container is restartable
// (restartPolicy: Always).
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// Probed lists the containers that get probes: the restartable init
// containers (sidecars), then the regular containers. The pointers are into
// pod.
func Probed(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for i := range pod.Spec.InitContainers {
		if IsSidecar(&pod.Spec.InitContainers[i]) {
			out = append(out, &pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}
