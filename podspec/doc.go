// Package podspec holds the pure functions of a pod spec: what is computed
// from a pod (and a few plain inputs such as an attempt number or an IP)
// alone, with no I/O, no clock and no state. The CRI sandbox and container
// configs, the QoS class and cgroup parent, the grace period, the CRI labels
// and annotations, $(VAR) expansion, the downward API for env vars, the
// managed hosts file and the ports and URLs of httpGet and tcpSocket actions
// live here.
//
// It imports nothing of the project (only the standard library and the
// Kubernetes API, apimachinery and CRI API types), so actors and adapters
// alike may use it without depending on each other.
//
// The CRI labels and annotations are the upstream kubelet's names
// (io.kubernetes.pod.uid, io.kubernetes.container.name, ...), so crictl and
// other node tools read actorlet's sandboxes and containers as usual, and a
// restarted actorlet finds its pods by them.
package podspec
