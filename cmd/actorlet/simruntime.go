package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/pflag"

	"github.com/actorlet/actorlet/runtimes/sim"
)

// runSimRuntime serves the simulated runtime as its own process, so any CRI
// client (the upstream kubelet included) can use it.
func runSimRuntime(ctx context.Context, args []string) int {
	fs := pflag.NewFlagSet("actorlet simruntime", pflag.ContinueOnError)
	listen := fs.String("listen", "unix:///run/actorlet/sim.sock", "Endpoint to serve CRI v1 on: unix:///path or tcp://127.0.0.1:port.")
	var cfg sim.Config
	cfg.AddFlags(fs)
	fs.Usage = func() { simRuntimeUsage(stdout, fs) }
	if done, code := parseFlags(fs, args); done {
		return code
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "actorlet simruntime: %v\n", err)
		return exitUsage
	}
	slog.Info("simulated CRI runtime listening", "endpoint", *listen)
	if err := sim.ListenAndServe(ctx, *listen, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "actorlet simruntime: %v\n", err)
		return exitError
	}
	return exitOK
}

// simConfigFromQuery reads sim options from an endpoint's query
// (sim://?start-latency=50ms&fault-rate=0.01), with the simruntime flags'
// names.
func simConfigFromQuery(rawQuery string) (sim.Config, error) {
	var cfg sim.Config
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return cfg, fmt.Errorf("sim options %q: %w", rawQuery, err)
	}
	fs := pflag.NewFlagSet("sim", pflag.ContinueOnError)
	fs.SetOutput(nopWriter{})
	cfg.AddFlags(fs)
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var args []string
	for _, k := range keys {
		for _, v := range q[k] {
			args = append(args, "--"+k+"="+v)
		}
	}
	if err := fs.Parse(args); err != nil {
		return cfg, fmt.Errorf("sim options: %w", err)
	}
	return cfg, cfg.Validate()
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// startEmbeddedSim serves the simulated runtime in-process on a socket under
// rootDir and returns its endpoint; the agent talks to it over real gRPC.
func startEmbeddedSim(ctx context.Context, rootDir, rawQuery string, log *slog.Logger) (*sim.Runtime, string, error) {
	cfg, err := simConfigFromQuery(rawQuery)
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(rootDir, 0o750); err != nil {
		return nil, "", fmt.Errorf("root dir: %w", err)
	}
	endpoint := "unix://" + filepath.Join(rootDir, "actorlet-sim.sock")
	l, err := sim.Listen(endpoint)
	if err != nil {
		return nil, "", err
	}
	rt := sim.New(cfg)
	go func() {
		if err := rt.Serve(l); err != nil {
			log.Error("embedded sim runtime stopped", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		rt.Close()
	}()
	log.Info("embedded simulated runtime serving", "endpoint", endpoint)
	return rt, endpoint, nil
}
