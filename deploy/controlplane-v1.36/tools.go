//go:build tools

// Package controlplane pins the Kubernetes control-plane binaries that
// deploy/local/controlplane.sh builds for actorlet's tests: a separate module,
// so k8s.io/kubernetes and its staging replaces never touch actorlet's go.mod.
// The blank imports keep `go mod tidy` from dropping the requirements.
package controlplane

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
