//go:build tools

// Package kubeadm pins the kubeadm that deploy/local/kubeadm.sh builds for
// actorlet's `kubeadm join` test: a separate module, so k8s.io/kubernetes and
// its staging replaces never touch actorlet's go.mod. The blank import keeps
// `go mod tidy` from dropping the requirement.
package kubeadm

import (
	_ "k8s.io/kubernetes/cmd/kubeadm"
)
