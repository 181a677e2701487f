package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/actors/nodestatus"
	"github.com/actorlet/actorlet/actors/pod"
	"github.com/actorlet/actorlet/actors/source"
	"github.com/actorlet/actorlet/actors/status"
	"github.com/actorlet/actorlet/actors/volume"
	"github.com/actorlet/actorlet/adapters/host"
	"github.com/actorlet/actorlet/adapters/kube"
	"github.com/actorlet/actorlet/adapters/metrics"
)

// clusterParts is what cluster mode (--kubeconfig) adds to the agent: the
// API server client, the watch-based cache of ConfigMaps and Secrets, and
// the event recorder. A nil *clusterParts is standalone mode; its methods
// say what each mode gives the actor tree, so the mode is decided once, in
// newCluster.
type clusterParts struct {
	client  *kube.Client
	objects *kube.ObjectCache
	events  *kube.Events
	certs   *kube.PodCertificates // podCertificate projections (podcert.go)
	bundles *kube.TrustBundles    // clusterTrustBundle projections
	node    liveNode              // the node's own Node object (nodewatch.go)
}

// newCluster connects to the API server named by --kubeconfig, or returns
// nil (standalone mode) without one. An API server that does not answer yet
// is not fatal: registration and the pod watch retry until it does. With
// --bootstrap-kubeconfig the node's client certificate is obtained first
// (it waits until the CSR is issued).
func newCluster(ctx context.Context, o *options, nodeName string, log *slog.Logger) (*clusterParts, error) {
	if o.Kubeconfig == "" {
		return nil, nil
	}
	kc, err := nodeClient(ctx, o, nodeName, log) // bootstrap.go: TLS bootstrap, client certificate rotation
	if err != nil {
		return nil, fmt.Errorf("cluster mode: %w", err)
	}
	if v, err := kc.Check(ctx); err != nil {
		log.Error("API server not reachable yet, retrying in the background", "err", err)
	} else {
		log.Info("API server reachable", "version", v)
	}
	objects := kc.NewObjectCache(0)
	go objects.Run(ctx)
	return &clusterParts{client: kc, objects: objects, events: kc.NewEvents(clock.RealClock{}, log),
		certs: kc.NewPodCertificates(ctx), bundles: kc.NewTrustBundles(ctx)}, nil
}

// close stops the event recorder (the object cache stops with ctx).
func (c *clusterParts) close() {
	if c == nil {
		return
	}
	c.events.Stop()
}

// exportMetrics adds cluster mode's own metrics to m: the events the
// recorder dropped.
func (c *clusterParts) exportMetrics(m *metrics.Registry) error {
	if c == nil {
		return nil
	}
	return m.SetEventsDropped(c.events.Dropped)
}

// kubeClient is the API server client for the node API's webhook
// authentication and authorization; nil in standalone mode.
func (c *clusterParts) kubeClient() *kube.Client {
	if c == nil {
		return nil
	}
	return c.client
}

// statusActor writes pod status to the API server (and mirror pods for
// static pods); in standalone mode status is only kept and served.
func (c *clusterParts) statusActor(w *wiring) actor.Producer {
	if c == nil {
		return status.New(w.pid("node"), status.WithMetrics(w.m))
	}
	return status.NewWithAPI(w.pid("node"), c.client, status.WriterConfig{Timeout: w.o.RuntimeRequestTimeout}, w.clk, w.log,
		status.WithMetrics(w.m), status.WithEvents(c.recorder(w.log)))
}

// volumeAPI gives projected, ConfigMap and Secret volumes their service
// account tokens, ConfigMaps and Secrets; nil in standalone mode.
func (c *clusterParts) volumeAPI() volume.API {
	if c == nil {
		return nil
	}
	return clusterObjects{c.client, c.objects}
}

// configSource gives env its ConfigMaps and Secrets; nil in standalone
// mode.
func (c *clusterParts) configSource() pod.ConfigSource {
	if c == nil {
		return nil
	}
	return c.objects
}

// recorder records pod events as Event objects; in standalone mode they
// go to the log.
func (c *clusterParts) recorder(log *slog.Logger) pod.Recorder {
	if c == nil {
		return kube.LogRecorder{Log: log}
	}
	return c.events
}

// apiSource is the pod source of the pods bound to this node (cluster mode
// only). It watches them through the object cache, which counts the
// ConfigMaps and Secrets each pod references: an object's watch ends with
// the last pod that references it.
func (c *clusterParts) apiSource(w *wiring) actor.Producer {
	return source.NewAPI(w.pid("node"), w.pid("status"), c.objects, w.log)
}

// nodeStatusActor registers the Node, reports its status and renews its
// Lease (cluster mode only).
func (c *clusterParts) nodeStatusActor(w *wiring) actor.Producer {
	o := w.o
	kubeReserved, _ := parseResources(o.KubeReserved) // validated with the flags
	systemReserved, _ := parseResources(o.SystemReserved)
	return nodestatus.New(nodestatus.Config{
		NodeName: w.name, NodeIP: w.hostIP, Hostname: w.name, Labels: o.NodeLabels, MaxPods: int(o.MaxPods),
		KubeReserved: kubeReserved, SystemReserved: systemReserved, EvictionHard: o.evictionHard,
		UpdateFrequency: o.NodeStatusUpdateFrequency, ReportFrequency: o.NodeStatusReportFrequency,
		LeaseDuration:  time.Duration(o.NodeLeaseDurationSeconds) * time.Second,
		KubeletVersion: kubeletVersion, RuntimeVersion: w.rt.version, Port: o.Port, Status: w.pid("status"),
		Events: c.events, Devices: w.pid("devices"), Eviction: w.pid("eviction"),
		RegisterWithTaints: o.RegisterWithTaints, Images: w.rt.client, MaxImages: o.NodeStatusMaxImages,
	}, c.client, c.client, &host.Machine{RootDir: o.RootDir}, w.pid("pleg"), w.clk, w.log)
}

// clusterObjects gives volumes their tokens from the API server and their
// ConfigMaps and Secrets from the watch-based cache.
type clusterObjects struct {
	client  *kube.Client
	objects *kube.ObjectCache
}

func (c clusterObjects) CreateToken(ctx context.Context, ns, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return c.client.CreateToken(ctx, ns, sa, req)
}

func (c clusterObjects) ConfigMap(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
	return c.objects.ConfigMap(ctx, ns, name)
}

func (c clusterObjects) Secret(ctx context.Context, ns, name string) (*v1.Secret, error) {
	return c.objects.Secret(ctx, ns, name)
}
