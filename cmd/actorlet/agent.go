package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/adapters/metrics"
)

// kubeletVersion is what the Node reports as its kubelet version: the
// upstream release whose behaviour actorlet follows (set with -ldflags -X).
var kubeletVersion = "v1.37.2-actorlet"

// versionLine is what --version prints: "actorlet <version> (<go>)", or,
// for a binary named kubelet (deploy/install.sh --as-kubelet), upstream's
// "Kubernetes <version>", which kubeadm's preflight check parses.
func versionLine(argv0 string) string {
	if filepath.Base(argv0) == "kubelet" {
		return "Kubernetes " + kubeletVersion
	}
	return versionString()
}

func runAgent(ctx context.Context, args []string) int {
	opts := defaultOptions()
	fs := pflag.NewFlagSet("actorlet", pflag.ContinueOnError)
	opts.addFlags(fs)
	fs.Usage = func() { agentUsage(stdout, fs) }
	if done, code := parseFlags(fs, args); done {
		return code
	}
	opts.gpuDeviceRootSet = fs.Changed("gpu-device-root")
	if opts.Version {
		fmt.Fprintln(stdout, versionLine(os.Args[0]))
		return exitOK
	}
	ignored, err := opts.applyConfigFile(fs.Changed) // config.go
	if err != nil {
		fmt.Fprintf(os.Stderr, "actorlet: --config: %v\n", err)
		return exitUsage
	}
	if err := opts.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "actorlet: invalid flags:\n%v\n", indent(err.Error()))
		return exitUsage
	}
	log := newLogger(opts)
	slog.SetDefault(log)
	contentionProfiling(opts)
	if len(ignored) > 0 {
		log.Warn("--config: these fields are not implemented by actorlet and are ignored", "config", opts.Config, "fields", strings.Join(ignored, ","))
	}
	if w := selinuxWarning(selinuxEnforceFile); w != "" { // selinux.go
		log.Warn(w)
	}
	if err := agent(ctx, opts, log); err != nil {
		log.Error("actorlet stopped", "err", err)
		return exitError
	}
	return exitOK
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

func newLogger(o *options) *slog.Logger {
	level := slog.LevelInfo
	if o.Verbosity >= 4 {
		level = slog.LevelDebug
	}
	ho := &slog.HandlerOptions{Level: level}
	if o.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, ho))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, ho))
}

// Contention sampling for --contention-profiling. Upstream's flag samples
// every blocking event (SetBlockProfileRate(1)); actorlet also samples one
// in contentionMutexFraction contended mutex unlocks for /debug/pprof/mutex
// (as the profiles in docs/BENCHMARKS.md "What serializes").
const (
	contentionBlockRate     = 1
	contentionMutexFraction = 5
)

// contentionProfiling turns the sampling on where the profiles are served.
func contentionProfiling(o *options) {
	if !o.ContentionProfiling || !o.EnableDebuggingHandlers {
		return
	}
	runtime.SetBlockProfileRate(contentionBlockRate)
	runtime.SetMutexProfileFraction(contentionMutexFraction)
}

func nodeName(o *options) (string, error) {
	if o.HostnameOverride != "" {
		return strings.ToLower(strings.TrimSpace(o.HostnameOverride)), nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("hostname: %w", err)
	}
	return strings.ToLower(h), nil
}

// nodeIP is --node-ip, else the first non-loopback IPv4 address, else
// 127.0.0.1.
func nodeIP(o *options) string {
	if o.NodeIP != "" {
		return o.NodeIP
	}
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

// agent connects the runtime (runtime.go) and, in cluster mode, the API
// server (cluster.go), spawns the actor tree (tree.go), serves the node API
// (listeners.go) and runs until ctx is done. Pods keep running when
// actorlet stops; a new actorlet adopts them.
func agent(ctx context.Context, o *options, log *slog.Logger) error {
	name, err := nodeName(o)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	m := metrics.New()
	rt, err := startRuntime(ctx, o, m, log)
	if err != nil {
		return err
	}
	defer func() { _ = rt.client.Close() }()
	cluster, err := newCluster(ctx, o, name, log)
	if err != nil {
		return err
	}
	defer cluster.close()
	if err := cluster.exportMetrics(m); err != nil {
		return err
	}
	gpus, err := openGPUs(o, log)
	if err != nil {
		return err
	}
	if gpus != nil {
		defer func() { _ = gpus.Close() }()
	}
	w := &wiring{o: o, name: name, hostIP: nodeIP(o), rt: rt, cluster: cluster, clk: clock.RealClock{}, log: log, m: m, gpus: gpus}
	if w.cgroups, err = planCgroups(ctx, o, rt, cgroupDriver(o, rt, log), log); err != nil { // cgroups.go
		return err
	}
	w.stats = newStats(ctx, w)
	secure, err := nodeAPISecurity(o, name, w.hostIP, cluster.kubeClient(), log)
	if err != nil {
		return fmt.Errorf("node API on --port: %w", err)
	}

	t, err := spawnTree(ctx, w)
	if err != nil {
		return err
	}
	log.Info("actorlet started", "node", name, "runtime", rt.name, "endpoint", rt.endpoint, "sources", t.sources)
	go runMemoryUpkeep(ctx, m.RunningPods, log)
	stopChaos := startChaos(ctx, o, t, log)
	defer stopChaos()
	devServers := startDeviceServers(ctx, w, t)
	defer devServers.stop()
	defer startDRA(ctx, w, t)()
	stopPodsAPI := startPodsAPI(ctx, w, t)
	defer stopPodsAPI()

	srv, err := newNodeAPI(w, t)
	if err != nil {
		return fmt.Errorf("node API: %w", err)
	}
	wait, errc := serve(ctx, srv, listeners(o, srv, secure), log)
	select {
	case <-ctx.Done():
		err = nil
	case err = <-errc:
	case <-t.gone:
		// The root gave up (docs/DESIGN.md: bounded restart intensity): a live
		// process without a tree would answer 503 forever. Exit non-zero
		// so that systemd restarts actorlet, which adopts what runs.
		err = t.cause()
	}
	cancel()
	log.Info("stopping actorlet (pods keep running)")
	t.stop(log)
	wait()
	return err
}
