package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/actors/image"
	"github.com/actorlet/actorlet/actors/node"
	"github.com/actorlet/actorlet/actors/nodestatus"
	"github.com/actorlet/actorlet/actors/pleg"
	"github.com/actorlet/actorlet/actors/pod"
	"github.com/actorlet/actorlet/actors/probe"
	"github.com/actorlet/actorlet/actors/source"
	"github.com/actorlet/actorlet/actors/status"
	"github.com/actorlet/actorlet/actors/volume"
	"github.com/actorlet/actorlet/adapters/cri"
	"github.com/actorlet/actorlet/adapters/host"
	"github.com/actorlet/actorlet/adapters/httpapi"
	"github.com/actorlet/actorlet/adapters/kube"
	"github.com/actorlet/actorlet/adapters/manifest"
	"github.com/actorlet/actorlet/adapters/metrics"
	"github.com/actorlet/actorlet/adapters/prober"
	volumefiles "github.com/actorlet/actorlet/adapters/volume"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/supervisors"
	"k8s.io/apimachinery/pkg/types"
)

// kubeletVersion is what the Node reports as its kubelet version: the
// upstream release whose behaviour actorlet follows (set with -ldflags -X).
var kubeletVersion = "v1.36.4-actorlet"

func runAgent(ctx context.Context, args []string) int {
	opts := defaultOptions()
	fs := pflag.NewFlagSet("actorlet", pflag.ContinueOnError)
	opts.addFlags(fs)
	if done, code := parseFlags(fs, args); done {
		return code
	}
	if err := opts.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "actorlet: invalid flags:\n%v\n", indent(err.Error()))
		return exitUsage
	}
	log := newLogger(opts)
	slog.SetDefault(log)
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

// agent wires the adapters and the actor tree and runs until ctx is done.
// Pods keep running when actorlet stops; a new actorlet adopts them.
func agent(ctx context.Context, o *options, log *slog.Logger) error {
	name, err := nodeName(o)
	if err != nil {
		return err
	}
	hostIP := nodeIP(o)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	endpoint := o.ContainerRuntimeEndpoint
	if kind, rest, _ := parseEndpoint(endpoint); kind == "sim" {
		endpoint, err = startEmbeddedSim(ctx, o.RootDir, strings.TrimPrefix(rest, "?"), log)
		if err != nil {
			return fmt.Errorf("embedded sim runtime: %w", err)
		}
	}

	m := metrics.New()
	m.InitActorKinds(supervisors.KindNode, supervisors.KindPod, supervisors.KindProbe, supervisors.KindPLEG,
		supervisors.KindImage, supervisors.KindStatus, supervisors.KindSource)
	rt, err := cri.Dial(ctx, endpoint, o.RuntimeRequestTimeout, cri.WithObserver(m.ObserveRuntimeOp))
	if err != nil {
		return fmt.Errorf("runtime %s: %w", endpoint, err)
	}
	defer func() { _ = rt.Close() }()
	runtimeName, runtimeVersion, err := waitForRuntime(ctx, rt, log)
	if err != nil {
		return err
	}

	var kc *kube.Client
	if o.Kubeconfig != "" {
		kc, err = kube.New(name, kube.Options{Kubeconfig: o.Kubeconfig, QPS: o.KubeAPIQPS, Burst: int(o.KubeAPIBurst),
			EventQPS: o.EventQPS, EventBurst: int(o.EventBurst),
			UserAgent: "actorlet/" + kubeletVersion + " (" + name + ")"})
		if err != nil {
			return fmt.Errorf("cluster mode: %w", err)
		}
		if v, err := kc.Check(ctx); err != nil {
			// Not fatal: registration and the pod watch retry until it answers.
			log.Error("API server not reachable yet, retrying in the background", "err", err)
		} else {
			log.Info("API server reachable", "version", v)
		}
	}
	secure, err := nodeAPISecurity(o, name, hostIP, kc, log)
	if err != nil {
		return fmt.Errorf("node API on --port: %w", err)
	}

	clk := clock.RealClock{}
	reg := supervisors.NewRegistry(clk)
	m.SetActorStats(supervisors.HandlingBuckets, func() []metrics.ActorKindStats {
		ks := reg.KindStats()
		out := make([]metrics.ActorKindStats, len(ks))
		for i, k := range ks {
			out[i] = metrics.ActorKindStats(k)
		}
		return out
	})
	strategy := supervisors.NewStrategy(supervisors.StrategyConfig{}, clk, log, m.IncActorRestart)
	mws := supervisors.Middlewares(reg, log, func(kind string, _ any, _ []byte) { m.IncActorPanic(kind) })
	props := func(p actor.Producer) *actor.Props {
		return actor.PropsFromProducer(p, actor.WithReceiverMiddleware(mws...), actor.WithSupervisor(strategy))
	}

	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return log.With("lib", "protoactor")
	}))
	pidOf := func(child string) *actor.PID {
		return actor.NewPID(sys.Address(), supervisors.RootName+"/"+child)
	}
	nodePID, statusPID, imagesPID, plegPID, pushPID :=
		pidOf("node"), pidOf("status"), pidOf("images"), pidOf("pleg"), pidOf("source-push")

	pr := prober.New()
	nodeAllocatable := allocatable(ctx, o, log)
	podDeps := pod.Deps{
		Runtime: rt, Images: imagesPID, Status: statusPID, Clock: clk, Log: log, Metrics: m,
		Config: pod.Config{
			RuntimeName: runtimeName, HostIP: hostIP, PodLogsDir: o.PodLogsDir,
			BackoffBase: o.BackoffInitial, BackoffMax: o.BackoffMax,
			SyncPeriod: o.SyncFrequency, OpTimeout: o.RuntimeRequestTimeout,
			ThrottleStarts:     o.MaxParallelPodStarts > 0,
			ProbeCheckpointDir: filepath.Join(o.RootDir, "probes"), // readiness survives restarts
			PodsDir:            filepath.Join(o.RootDir, "pods"),   // termination-log files, managed /etc/hosts
			NodeAllocatable:    nodeAllocatable,                    // downward API for unset limits
		},
		Volumes: pidOf("volumes"),
		Events:  kube.LogRecorder{Log: log},
		Probes: pod.Probing{
			Handlers: probe.Handlers{Exec: rt, HTTP: pr, TCP: pr, GRPC: pr},
			Metrics:  m,
			Props:    props,
		},
	}
	sources := []string{messages.SourcePush}
	sourcePIDs := []*actor.PID{pushPID}
	statusProducer := status.New(nodePID)
	if kc != nil {
		statusProducer = status.NewWithAPI(nodePID, kc, status.WriterConfig{Timeout: o.RuntimeRequestTimeout}, clk, log)
	}
	children := []supervisors.Child{
		{Name: "status", Props: props(statusProducer)},
		{Name: "images", Props: props(image.New(rt, clk, image.Config{
			BackoffBase: o.ImagePullBackoffInitial, BackoffCap: o.ImagePullBackoffMax, PullTimeout: o.RuntimeRequestTimeout,
		}, log))},
	}
	if o.PodManifestPath != "" {
		sources = append(sources, messages.SourceFile)
		sourcePIDs = append(sourcePIDs, pidOf("source-file"))
		lister := &manifest.DirLister{Dir: o.PodManifestPath, NodeName: name}
		children = append(children, supervisors.Child{Name: "source-file",
			Props: props(source.NewFile(nodePID, lister, o.FileCheckFrequency, clk, log))})
	}
	if o.ManifestURL != "" {
		sources = append(sources, messages.SourceURL)
		sourcePIDs = append(sourcePIDs, pidOf("source-url"))
		lister := &manifest.URLLister{URL: o.ManifestURL, NodeName: name, Client: &http.Client{Timeout: 30 * time.Second}}
		children = append(children, supervisors.Child{Name: "source-url",
			Props: props(source.NewURL(nodePID, lister, o.HTTPCheckFrequency, clk, log))})
	}
	var volumeAPI volume.API
	if kc != nil {
		objects := kc.NewObjectCache(0)
		go objects.Run(ctx)
		volumeAPI = clusterObjects{kc, objects}
		podDeps.ConfigSource = objects
		recorder, stopRecorder := kc.Recorder()
		defer stopRecorder()
		podDeps.Events = recorder
	}
	children = append(children, supervisors.Child{Name: "volumes", Props: props(volume.New(volumefiles.Files{}, volumeAPI,
		volume.Config{PodsDir: filepath.Join(o.RootDir, "pods"), Timeout: o.RuntimeRequestTimeout}, clk, log))})
	if kc != nil {
		sources = append(sources, messages.SourceAPI)
		sourcePIDs = append(sourcePIDs, pidOf("source-api"))
		children = append(children, supervisors.Child{Name: "source-api", Props: props(source.NewAPI(nodePID, statusPID, kc, log))})
	}
	podProps := func(uid types.UID) *actor.Props { return props(pod.New(uid, podDeps)) }
	children = append(children,
		supervisors.Child{Name: "node", Props: props(node.New(node.Config{
			NodeName: name, MaxPods: int(o.MaxPods), Sources: sources, SourcePIDs: sourcePIDs,
			Allocatable:       nodeAllocatable,
			NodeLabels:        nodestatus.Labels(name, o.NodeLabels),
			MaxParallelStarts: int(o.MaxParallelPodStarts),
		}, statusPID, podProps, m, log))},
		supervisors.Child{Name: "pleg", Props: props(pleg.New(nodePID, rt, clk, pleg.Config{
			Period: o.PLEGRelistPeriod, Threshold: o.PLEGThreshold, Timeout: o.RuntimeRequestTimeout,
		}, m, log))},
		supervisors.Child{Name: "source-push", Props: props(source.NewPush(nodePID, name, log))},
	)
	if kc != nil {
		kubeReserved, _ := parseResources(o.KubeReserved) // validated with the flags
		systemReserved, _ := parseResources(o.SystemReserved)
		children = append(children, supervisors.Child{Name: "nodestatus", Props: props(nodestatus.New(nodestatus.Config{
			NodeName: name, NodeIP: hostIP, Hostname: name, Labels: o.NodeLabels, MaxPods: int(o.MaxPods),
			KubeReserved: kubeReserved, SystemReserved: systemReserved,
			UpdateFrequency: o.NodeStatusUpdateFrequency, ReportFrequency: o.NodeStatusReportFrequency,
			LeaseDuration:  time.Duration(o.NodeLeaseDurationSeconds) * time.Second,
			KubeletVersion: kubeletVersion, RuntimeVersion: runtimeVersion, Port: o.Port, Status: statusPID,
		}, kc, kc, &host.Machine{RootDir: o.RootDir}, plegPID, clk, log))})
	}
	root, err := supervisors.SpawnRoot(sys, strategy, mws, children)
	if err != nil {
		return fmt.Errorf("actor tree: %w", err)
	}
	log.Info("actorlet started", "node", name, "runtime", runtimeName, "endpoint", endpoint, "sources", sources)

	if o.ChaosKillRate > 0 {
		kinds, _ := supervisors.ParseKinds(o.ChaosKinds) // validated with the flags
		log.Warn("chaos enabled", "rate", o.ChaosKillRate, "kinds", kinds, "seed", o.ChaosSeed)
		seed := o.ChaosSeed
		if seed == 0 {
			seed = time.Now().UnixNano()
		}
		chaosCtx, chaosCancel := ctx, context.CancelFunc(func() {})
		if o.ChaosDuration > 0 {
			chaosCtx, chaosCancel = context.WithTimeout(ctx, o.ChaosDuration)
		}
		defer chaosCancel()
		supervisors.StartChaos(chaosCtx, sys, reg, supervisors.ChaosConfig{Rate: o.ChaosKillRate, Seed: seed, Kinds: kinds}, log)
	}

	var debug http.Handler
	if o.EnableDebuggingHandlers {
		debug = httpapi.NewDebug(reg)
	}
	srv, err := httpapi.New(httpapi.Config{
		Debug:  debug,
		System: sys, Status: statusPID, Push: pushPID, PLEG: plegPID,
		Decode:  pushDecoder(name),
		Metrics: m.Handler(),
		ContainerLogs: httpapi.NewContainerLogs(o.PodLogsDir,
			httpapi.StatusResolver(sys, statusPID, 0), log.With("component", "container-logs")),
		Streaming: httpapi.NewStreaming(httpapi.StatusResolver(sys, statusPID, 0), rt,
			log.With("component", "streaming")),
		Logger: log,
		Clock:  clk,
	})
	if err != nil {
		return fmt.Errorf("node API: %w", err)
	}
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	serve := func(port int32, addr string, h http.Handler, what string, tlsCfg *tls.Config) {
		if port == 0 {
			return
		}
		hp := net.JoinHostPort(addr, strconv.Itoa(int(port)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			log.Info("serving", "api", what, "address", hp, "tls", tlsCfg != nil)
			var err error
			if tlsCfg != nil {
				err = srv.ListenAndServeTLS(ctx, hp, h, tlsCfg)
			} else {
				err = srv.ListenAndServe(ctx, hp, h)
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s on %s: %w", what, hp, err)
			}
		}()
	}
	serve(o.Port, o.Address, secure.auth.Wrap(srv.Main()), "node API", secure.tls)
	serve(o.ReadOnlyPort, o.Address, srv.ReadOnly(), "read-only node API", nil)
	serve(o.HealthzPort, o.HealthzBindAddress, srv.Healthz(), "healthz", nil)

	select {
	case <-ctx.Done():
		err = nil
	case err = <-errc:
	}
	cancel()
	log.Info("stopping actorlet (pods keep running)")
	if stopErr := supervisors.Stop(sys, root); stopErr != nil {
		log.Warn("stop actor tree", "err", stopErr)
	}
	wg.Wait()
	return err
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

// allocatable is the node's cpu and memory minus --kube-reserved and
// --system-reserved: what API pods are admitted against.
func allocatable(ctx context.Context, o *options, log *slog.Logger) v1.ResourceList {
	_, capacity, err := (&host.Machine{}).Info(ctx)
	if err != nil {
		log.Warn("machine capacity unknown, admitting pods without a cpu/memory check", "err", err)
		return nil
	}
	kube, _ := parseResources(o.KubeReserved) // validated with the flags
	sys, _ := parseResources(o.SystemReserved)
	out := v1.ResourceList{}
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		q, ok := capacity[name]
		if !ok {
			continue
		}
		for _, r := range []v1.ResourceList{kube, sys} {
			if rq, ok := r[name]; ok {
				q.Sub(rq)
			}
		}
		out[name] = q
	}
	return out
}

// waitForRuntime asks the runtime for its version until it answers (as the
// upstream kubelet waits for its runtime) and returns the runtime's name.
func waitForRuntime(ctx context.Context, rt *cri.Client, log *slog.Logger) (name, version string, err error) {
	delay := 100 * time.Millisecond
	for {
		v, err := rt.Version(ctx)
		if err == nil {
			log.Info("runtime ready", "name", v.RuntimeName, "version", v.RuntimeVersion, "api", v.RuntimeApiVersion)
			return v.RuntimeName, v.RuntimeName + "://" + v.RuntimeVersion, nil
		}
		log.Warn("waiting for the container runtime", "err", err)
		select {
		case <-ctx.Done():
			return "", "", fmt.Errorf("container runtime not ready: %w", err)
		case <-time.After(delay):
		}
		if delay < 5*time.Second {
			delay *= 2
		}
	}
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
		return p, nil
	}
}
