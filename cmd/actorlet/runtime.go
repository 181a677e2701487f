package main

import (
	"context"
	"fmt"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"log/slog"
	"strings"
	"time"

	"github.com/actorlet/actorlet/adapters/cri"
	"github.com/actorlet/actorlet/adapters/metrics"
	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/runtimes/sim"
)

// runtimeConn is the container runtime actorlet talks to.
type runtimeConn struct {
	client *cri.Client
	// endpoint is --container-runtime-endpoint, or the embedded sim
	// runtime's socket for sim://.
	endpoint string
	// name is the runtime's name ("containerd"), version the Node's
	// containerRuntimeVersion ("containerd://2.1.0").
	name, version string
	// sim is the embedded simulated runtime (sim://), nil otherwise: the
	// node it simulates is the stats' node.
	sim *sim.Runtime
	// linux is the runtime's Linux configuration (its cgroup driver); nil
	// when it does not tell.
	linux *runtimeapi.LinuxRuntimeConfiguration
	// noCDI says why the runtime cannot inject CDI devices; "" it can.
	noCDI string
}

// startRuntime starts the embedded sim runtime for sim://, dials the
// runtime and waits until it answers.
func startRuntime(ctx context.Context, o *options, m *metrics.Registry, log *slog.Logger) (*runtimeConn, error) {
	endpoint := o.ContainerRuntimeEndpoint
	var simRT *sim.Runtime
	if kind, rest, _ := parseEndpoint(endpoint); kind == "sim" {
		var err error
		simRT, endpoint, err = startEmbeddedSim(ctx, o.RootDir, strings.TrimPrefix(rest, "?"), log)
		if err != nil {
			return nil, fmt.Errorf("embedded sim runtime: %w", err)
		}
	}
	rt, err := cri.Dial(ctx, endpoint, o.RuntimeRequestTimeout, cri.WithObserver(m.ObserveRuntimeOp))
	if err != nil {
		return nil, fmt.Errorf("runtime %s: %w", endpoint, err)
	}
	name, version, err := waitForRuntime(ctx, rt, log)
	if err != nil {
		_ = rt.Close()
		return nil, err
	}
	noCDI := cri.NoCDI(name, strings.TrimPrefix(version, name+"://"))
	if noCDI != "" {
		log.Warn("the container runtime cannot inject CDI devices: containers given some fail with CreateContainerConfigError", "reason", noCDI)
	}
	linux, err := rt.RuntimeConfig(ctx)
	if err != nil {
		log.Warn("the runtime's configuration (cgroup driver) unknown: --cgroup-driver is trusted", "err", err)
	}
	return &runtimeConn{client: rt, endpoint: endpoint, name: name, version: version, sim: simRT, linux: linux, noCDI: noCDI}, nil
}

// waitForRuntime asks the runtime for its version until it answers (as the
// upstream kubelet waits for its runtime) and returns the runtime's name.
func waitForRuntime(ctx context.Context, rt *cri.Client, log *slog.Logger) (name, version string, err error) {
	backoff := actorkit.Backoff{Base: 100 * time.Millisecond, Cap: 5 * time.Second}
	for n := 1; ; n++ {
		v, err := rt.Version(ctx)
		if err == nil {
			log.Info("runtime ready", "name", v.RuntimeName, "version", v.RuntimeVersion, "api", v.RuntimeApiVersion)
			return v.RuntimeName, v.RuntimeName + "://" + v.RuntimeVersion, nil
		}
		log.Warn("waiting for the container runtime", "err", err)
		select {
		case <-ctx.Done():
			return "", "", fmt.Errorf("container runtime not ready: %w", err)
		case <-time.After(backoff.Delay(n)):
		}
	}
}
