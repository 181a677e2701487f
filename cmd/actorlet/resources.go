package main

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/actorlet/actorlet/actors/gc"
	"github.com/actorlet/actorlet/actors/image"
	"github.com/actorlet/actorlet/adapters/host"
	"github.com/actorlet/actorlet/adapters/stats"
)

// The node's resources (issue 12): the stats provider behind
// /stats/summary and /metrics/resource (and the EvictionActor's
// observations), image garbage collection in the ImageActor, container
// garbage collection in the gc actor.

// nodeSource is where the node's own figures come from: the simulated
// node of the embedded sim runtime (its memory, disk and pids, which its
// containers consume on command), else this machine.
func nodeSource(w *wiring) interface {
	stats.NodeSource
	image.FsInfoer
} {
	if w.rt.sim != nil {
		return w.rt.sim
	}
	return &host.Stats{RootDir: w.o.RootDir}
}

// newStats makes the stats provider and starts its background volume
// measurements (until ctx ends).
func newStats(ctx context.Context, w *wiring) *stats.Provider {
	p := stats.New(stats.Config{
		NodeName: w.name, Runtime: w.rt.client, Node: nodeSource(w), System: &host.Stats{RootDir: w.o.RootDir},
		RootDir: w.o.RootDir, PodLogsDir: w.o.PodLogsDir, Logger: w.log.With("component", "stats"),
	})
	go p.Run(ctx)
	return p
}

// summary is the stats provider's Summary, nil-safe for the node API.
func (w *wiring) summary() func(ctx context.Context) (*statsapi.Summary, error) {
	if w.stats == nil {
		return nil
	}
	return w.stats.Summary
}

// imageConfig is the ImageActor's configuration from the flags.
func imageConfig(o *options) image.Config {
	c := image.DefaultConfig()
	c.BackoffBase, c.BackoffCap, c.StatusTimeout = o.ImagePullBackoffInitial, o.ImagePullBackoffMax, o.RuntimeRequestTimeout
	c.HighThresholdPercent, c.LowThresholdPercent = int(o.ImageGCHighThreshold), int(o.ImageGCLowThreshold)
	c.MinimumGCAge, c.MaximumGCAge = o.ImageMinimumGCAge, o.ImageMaximumGCAge
	return c
}

func imageActor(w *wiring) actor.Producer {
	return image.New(w.rt.client, w.clk, imageConfig(w.o), w.log, image.WithGC(image.GC{
		Images: w.rt.client, Containers: w.rt.client, Fs: image.FsFromInfo(w.rt.client, nodeSource(w)),
		Metrics: w.m, Events: w.cluster.recorder(w.log), NodeName: w.name,
	}))
}

// gcActor collects dead containers and sandboxes (upstream's container
// GC and its default policy).
func gcActor(w *wiring) actor.Producer {
	return gc.New(w.rt.client, w.clk, gc.Config{PodLogsDir: w.o.PodLogsDir, Timeout: w.o.RuntimeRequestTimeout}, w.log)
}
