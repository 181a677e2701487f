//go:build tools

// Package containerd2 pins the containerd 2.x and runc that deploy/local/containerd.sh builds
// for the tests that need a current container runtime (CDI, ...): a separate module, so
// containerd's and runc's requirements never touch actorlet's go.mod. The blank imports keep
// `go mod tidy` from dropping the requirements.
package containerd2

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/opencontainers/runc"
)
