package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/adapters/httpapi"
	"github.com/actorlet/actorlet/adapters/manifest"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
	"github.com/actorlet/actorlet/supervisors"
)

// newNodeAPI builds the node API on the running tree: pods, push, health,
// metrics, container logs, exec/attach/port-forward, and with
// --enable-debugging-handlers the debug pages (/debug/actors, pprof).
func newNodeAPI(w *wiring, t *tree) (*httpapi.Server, error) {
	var debug, configz http.Handler
	if w.o.EnableDebuggingHandlers {
		debug = httpapi.NewDebug(t.reg)
		// /configz: the effective configuration (config.go); a debugging
		// handler upstream too.
		var err error
		if configz, err = httpapi.NewConfigz(w.o.effectiveKubeletConfig()); err != nil {
			return nil, err
		}
	}
	status := t.pid("status")
	return httpapi.New(httpapi.Config{
		Debug: debug, Configz: configz,
		System: t.sys, Status: status, Push: t.pid("source-push"), PLEG: t.pid("pleg"), Devices: t.pid("devices"),
		StatsSummary: w.summary(),
		Decode:       pushDecoder(w.name),
		Metrics:      w.m.Handler(),
		ContainerLogs: httpapi.NewContainerLogs(w.o.PodLogsDir,
			httpapi.StatusResolver(t.sys, status, 0), w.log.With("component", "container-logs")),
		Streaming: httpapi.NewStreaming(httpapi.StatusResolver(t.sys, status, 0), w.rt.client,
			w.log.With("component", "streaming")),
		Logger:             w.log,
		Clock:              w.clk,
		Singletons:         singletons(w, t),
		HealthProbeTimeout: w.o.HealthzProbeTimeout,
	})
}

// singletons are the actors of the tree /healthz probes: every actor
// treeActors spawns in this configuration (the PodActors and ProbeActors
// under the node come and go with their pods and are not probed).
func singletons(w *wiring, t *tree) []httpapi.Singleton {
	on, _, _ := plan(treeActors(w))
	out := make([]httpapi.Singleton, 0, len(on))
	for _, a := range on {
		out = append(out, httpapi.Singleton{Name: a.name, PID: t.pid(a.name)})
	}
	return out
}

// listener is one HTTP server of the agent.
type listener struct {
	what    string // for the log
	addr    string // host:port
	handler http.Handler
	tls     *tls.Config // nil: plain HTTP
}

// nodeAPIHandlers are the node API's handlers, one per port.
type nodeAPIHandlers interface {
	Main() http.Handler
	ReadOnly() http.Handler
	Healthz() http.Handler
}

// listeners are the servers the flags ask for: the node API on --port
// (TLS, authentication and authorization), the read-only API on
// --read-only-port and /healthz on --healthz-port; a port of 0 is off.
func listeners(o *options, h nodeAPIHandlers, secure nodeAPI) []listener {
	all := []struct {
		port int32
		l    listener
	}{
		{o.Port, listener{what: "node API", addr: o.Address, handler: secure.auth.Wrap(h.Main()), tls: secure.tls}},
		{o.ReadOnlyPort, listener{what: "read-only node API", addr: o.Address, handler: h.ReadOnly()}},
		{o.HealthzPort, listener{what: "healthz", addr: o.HealthzBindAddress, handler: h.Healthz()}},
	}
	var out []listener
	for _, x := range all {
		if x.port == 0 {
			continue
		}
		x.l.addr = net.JoinHostPort(x.l.addr, strconv.Itoa(int(x.port)))
		out = append(out, x.l)
	}
	return out
}

// serve serves each listener until ctx is done, logging "serving" once the
// port is open. errc reports a server that failed (a port in use included);
// wait returns once every server has stopped.
func serve(ctx context.Context, srv *httpapi.Server, ls []listener, log *slog.Logger) (wait func(), errc <-chan error) {
	var wg sync.WaitGroup
	errs := make(chan error, len(ls))
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ln, err := net.Listen("tcp", l.addr)
			if err != nil {
				errs <- fmt.Errorf("%s on %s: %w", l.what, l.addr, err)
				return
			}
			if ctx.Err() != nil { // another listener failed meanwhile: stopping
				_ = ln.Close()
				return
			}
			// Logged once, when the port is really open.
			log.Info("serving", "api", l.what, "address", ln.Addr().String(), "tls", l.tls != nil)
			if l.tls != nil {
				ln = tls.NewListener(ln, l.tls)
			}
			if err := srv.Serve(ctx, ln, l.handler); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("%s on %s: %w", l.what, l.addr, err)
			}
		}()
	}
	return wg.Wait, errs
}

// pushDecoder decodes, validates and defaults one manifest POSTed to the
// node API, as the file source does for a manifest file.
func pushDecoder(nodeName string) func([]byte) (*v1.Pod, error) {
	return func(b []byte) (*v1.Pod, error) {
		pods, err := manifest.Decode(b)
		if err != nil {
			return nil, err
		}
		if len(pods) != 1 {
			return nil, fmt.Errorf("want exactly one pod, got %d", len(pods))
		}
		p := pods[0]
		manifest.ApplyDefaults(p, messages.SourcePush, nodeName, "push")
		if err := manifest.Validate(p); err != nil {
			return nil, err
		}
		if err := podspec.CheckStaticPod(p); err != nil { // a pushed pod is a static pod
			return nil, err
		}
		return p, nil
	}
}

// The debug page reads the supervisors' registry directly.
var _ httpapi.ActorSource = (*supervisors.Registry)(nil)
