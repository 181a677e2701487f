package main

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"

	dra "github.com/actorlet/actorlet/actors/dra"
	draadapter "github.com/actorlet/actorlet/adapters/dra"
	"github.com/actorlet/actorlet/adapters/host"
	"github.com/actorlet/actorlet/messages"
)

// Dynamic Resource Allocation on the node (issue 29): DRA drivers register
// in <root-dir>/plugins_registry; the ClaimsActor ("dra") prepares and
// unprepares the pods' ResourceClaims through them, checkpointed in
// <root-dir>/dra_manager_state (upstream's names). DRA is always on, as in
// upstream's v1.37 kubelet (the feature is GA): a node without drivers
// runs every pod without claims as before.

const draCheckpointName = "dra_manager_state"

// draCallTimeout bounds one call of a driver (upstream: 45s, half its retry period).
const draCallTimeout = 45 * time.Second

// draActor is the ClaimsActor.
func draActor(w *wiring) actor.Producer {
	m := draadapter.NewMetrics()
	if err := w.m.Register(m.Collectors()...); err != nil {
		w.log.Warn("DRA metrics not registered", "err", err)
	}
	cfg := dra.Config{
		Dialer:  draDialer{m: m},
		Store:   host.FileStore{Path: filepath.Join(w.o.RootDir, draCheckpointName)},
		Metrics: m,
		Clock:   w.clk,
	}
	if w.cluster != nil {
		cs := w.cluster.client.Clientset()
		cfg.Claims = draadapter.Claims{Client: cs}
		cfg.Wiper = draadapter.Wiper{Client: cs, Node: w.name}
	}
	return dra.New(cfg, w.log)
}

// draDialer makes adapters/dra's client the ClaimsActor's Driver.
type draDialer struct{ m *draadapter.Metrics }

func (d draDialer) Dial(driver, endpoint string, services []string, connected func(bool)) (dra.Driver, error) {
	c, err := draadapter.Dial(driver, endpoint, services, draCallTimeout, d.m.ObserveGRPC, connected)
	if err != nil {
		return nil, err
	}
	return draDriver{c}, nil
}

// draDriver maps the adapter's ErrNoHealth to the actor's.
type draDriver struct{ *draadapter.Client }

func (d draDriver) WatchHealth(ctx context.Context, report func(*drahealthv1.NodeWatchResourcesResponse)) error {
	err := d.Client.WatchHealth(ctx, report)
	if err == draadapter.ErrNoHealth {
		return dra.ErrNoHealth
	}
	return err
}

// startDRA watches the plugin registration dir (and makes <root-dir>/plugins
// for the drivers' own sockets). A dir that cannot be watched is logged: the
// node runs without DRA drivers.
func startDRA(ctx context.Context, w *wiring, t *tree) func() {
	if err := os.MkdirAll(filepath.Join(w.o.RootDir, draadapter.PluginsDir), 0o750); err != nil {
		w.log.Warn("DRA plugins dir not made", "err", err)
	}
	pid, sys := t.pid("dra"), t.sys
	wt := draadapter.NewWatcher(filepath.Join(w.o.RootDir, draadapter.RegistryDir),
		func(m *messages.DRADriverRegistered) { sys.Root.Send(pid, m) },
		func(m *messages.DRADriverDeregistered) { sys.Root.Send(pid, m) }, w.log)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := wt.Run(ctx); err != nil {
			w.log.Warn("DRA drivers cannot register", "err", err)
		}
	}()
	return func() { cancel(); <-done }
}
