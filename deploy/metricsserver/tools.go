//go:build tools

// Package metricsserver pins the metrics-server that deploy/local/metrics-server.sh builds for
// actorlet's `kubectl top` tests: a separate module, so metrics-server's dependencies never touch
// actorlet's go.mod. The blank import keeps `go mod tidy` from dropping the requirement.
package metricsserver

import (
	_ "sigs.k8s.io/metrics-server/cmd/metrics-server"
)
