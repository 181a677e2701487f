package podspec

import v1 "k8s.io/api/core/v1"

// Annotations and the priority that make a pod critical, as upstream's
// kubelettypes.IsCriticalPod.
const (
	ConfigSourceAnnotation = "kubernetes.io/config.source"
	ConfigMirrorAnnotation = "kubernetes.io/config.mirror"
	// SystemCriticalPriority is the least priority of a critical pod
	// (system-cluster-critical).
	SystemCriticalPriority = int32(2000000000)
)

// IsStaticPod reports whether the pod came from a node-local manifest
// source (a file or a URL: config.source "file" or "http"), as upstream's
// static pods. Pods from the API server ("api") and pods pushed to
// actorlet's node API ("push", which a user sends and removes at run time,
// as API pods) are not static.
func IsStaticPod(p *v1.Pod) bool {
	src, ok := p.Annotations[ConfigSourceAnnotation]
	return ok && src != "api" && src != "push"
}

// IsCriticalPod is upstream's kubelettypes.IsCriticalPod: a static pod, a
// mirror pod, or one of system-critical priority. Critical pods are never
// evicted and are admitted under node pressure.
func IsCriticalPod(p *v1.Pod) bool {
	if p == nil {
		return false
	}
	if IsStaticPod(p) {
		return true
	}
	if _, ok := p.Annotations[ConfigMirrorAnnotation]; ok {
		return true
	}
	return p.Spec.Priority != nil && *p.Spec.Priority >= SystemCriticalPriority
}
