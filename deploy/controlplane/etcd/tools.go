//go:build tools

// Package etcd pins the etcd server that deploy/local/controlplane.sh builds
// (its own module, so etcd keeps the dependency versions it was released with).
package etcd

import (
	_ "go.etcd.io/etcd/server/v3"
)
