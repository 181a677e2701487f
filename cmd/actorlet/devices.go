package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/actors/devices"
	"github.com/actorlet/actorlet/adapters/deviceplugin"
	"github.com/actorlet/actorlet/adapters/host"
	"github.com/actorlet/actorlet/adapters/metrics"
	"github.com/actorlet/actorlet/adapters/nvml"
	"github.com/actorlet/actorlet/adapters/podresources"
	"github.com/actorlet/actorlet/messages"
)

// The node's devices (issue 13): the built-in GPUs (--gpus), device
// plugins registering on <root-dir>/device-plugins/kubelet.sock, and the
// pod resources API on <root-dir>/pod-resources/kubelet.sock, all around
// the DevicesActor.

const (
	gpusAuto = "auto" // NVML if the driver is there, else none
	gpusNone = "none"
	gpusNVML = "nvml"
	gpusMock = "mock:" // go-nvml's simulated servers: mock:dgxh100[?count=2&xid-every=10m]
)

// Upstream's names under the root dir: the device plugins' dir (the
// registration socket, the plugins' sockets) and the device manager's
// checkpoint in it.
const (
	devicePluginsDir = "device-plugins"
	checkpointName   = "kubelet_internal_checkpoint"
)

// validGPUs checks --gpus' form (a mock server's name is checked when it
// is opened, at start).
func validGPUs(spec string) error {
	switch {
	case spec == gpusAuto, spec == gpusNone, spec == gpusNVML, strings.HasPrefix(spec, gpusMock) && len(spec) > len(gpusMock):
		return nil
	}
	return fmt.Errorf("--gpus %q: want auto, none, nvml or mock:<dgxa100|dgxh100|dgxh200|dgxb200>[?count=N&xid-every=D]", spec)
}

// openGPUs opens the built-in GPUs. A machine without the NVIDIA driver or
// without GPUs gets one log line and none; so does NVML failing on a real
// machine (the node runs its other pods). A simulated server that cannot
// be opened is a bad flag: an error.
func openGPUs(o *options, log *slog.Logger) (*nvml.GPUs, error) {
	spec := o.GPUs
	if spec == gpusNone {
		log.Info("GPUs off (--gpus=none)")
		return nil, nil
	}
	if spec == gpusAuto {
		spec = gpusNVML
	}
	devRoot := o.GPUDeviceRoot
	standIns := strings.HasPrefix(spec, gpusMock) && !o.gpuDeviceRootSet
	if standIns {
		devRoot = filepath.Join(o.RootDir, "mock-gpus", "dev")
	}
	g, err := nvml.Open(spec, nvml.Options{DevRoot: devRoot, Log: log.With("component", "nvml")})
	switch {
	case err == nil:
		if standIns {
			if err := makeStandIns(devRoot, g.Count()); err != nil {
				_ = g.Close()
				return nil, fmt.Errorf("--gpus %s: stand-in device nodes: %w", spec, err)
			}
		}
		labels, _ := g.Describe()
		log.Info("GPUs found", "gpus", g.Count(), "source", spec, "product", labels["nvidia.com/gpu.product"], "device-root", devRoot)
		return g, nil
	case strings.HasPrefix(spec, gpusMock):
		return nil, fmt.Errorf("--gpus %s: %w", spec, err)
	case errors.Is(err, nvml.ErrNoLibrary), errors.Is(err, nvml.ErrNoDevices):
		log.Info("no GPUs: carrying on with none", "reason", err)
	default:
		log.Warn("GPUs unusable: carrying on with none", "err", err)
	}
	return nil, nil
}

// makeStandIns makes the device nodes of n simulated GPUs under dir
// (nvidia0.., nvidiactl, nvidia-uvm, nvidia-uvm-tools), so that their pods
// run on a real runtime too: character devices with /dev/null's numbers
// when actorlet may make them (root), else empty files (enough for the
// simulated runtime). Kept when present.
func makeStandIns(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}
	for i := range n {
		names = append(names, fmt.Sprintf("nvidia%d", i))
	}
	null := int(unix.Mkdev(1, 3))
	for _, name := range names {
		p := filepath.Join(dir, name)
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, null); err == nil {
			continue
		}
		if err := os.WriteFile(p, nil, 0o666); err != nil {
			return err
		}
	}
	return nil
}

// devicesActor is the DevicesActor: the built-in GPUs, device plugins,
// allocations checkpointed under <root-dir>/device-plugins.
func devicesActor(w *wiring) actor.Producer {
	var providers []devices.Provider
	if w.gpus != nil {
		providers = append(providers, w.gpus)
	}
	subs := []*actor.PID{w.pid("node")}
	if w.cluster != nil {
		subs = append(subs, w.pid("nodestatus"))
	}
	return devices.New(devices.Config{
		Providers:    providers,
		Dialer:       pluginDialer{log: w.log.With("component", "device-plugin")},
		Store:        host.FileStore{Path: filepath.Join(w.o.RootDir, devicePluginsDir, checkpointName)},
		Subscribers:  subs,
		Events:       w.cluster.recorder(w.log),
		Metrics:      deviceMetrics{w.m},
		Clock:        w.clk,
		SamplePeriod: w.o.DeviceMetricsPeriod,
		OpTimeout:    w.o.RuntimeRequestTimeout,
		DRA:          w.draConfig(),
	}, w.log)
}

// pluginDialer makes deviceplugin.Dial the DevicesActor's Dialer.
type pluginDialer struct{ log *slog.Logger }

func (d pluginDialer) Dial(ctx context.Context, resource, endpoint string, preStart, preferred bool) (devices.Provider, func() error, error) {
	p, err := deviceplugin.Dial(ctx, resource, endpoint, preStart, preferred, d.log)
	if err != nil {
		return nil, nil, err
	}
	return p, p.Close, nil
}

// deviceMetrics gives the DevicesActor's metrics to the registry.
type deviceMetrics struct{ m *metrics.Registry }

func (d deviceMetrics) SetDeviceSample(resource, id string, o devices.Owner, values map[string]float64) {
	d.m.SetDeviceSample(resource, id, o.Namespace, o.Pod, o.Container, values)
}
func (d deviceMetrics) DeleteDeviceSample(resource, id string) { d.m.DeleteDeviceSample(resource, id) }
func (d deviceMetrics) SetDevices(resource string, capacity, allocatable, allocated int) {
	d.m.SetDevices(resource, capacity, allocatable, allocated)
}
func (d deviceMetrics) IncDeviceUnhealthy(resource string) { d.m.IncDeviceUnhealthy(resource) }

// deviceServers are the gRPC servers around the DevicesActor: the device
// plugin registration and the pod resources API. A server that cannot
// start (a root dir too long for a socket path, a read-only dir) is
// logged; the node runs without it.
type deviceServers struct {
	reg *deviceplugin.Registration
	pr  *podresources.Server
	dra *gpuDRA
}

func startDeviceServers(ctx context.Context, w *wiring, t *tree) deviceServers {
	var s deviceServers
	devs, sys := t.pid("devices"), t.sys
	s.reg = deviceplugin.NewRegistration(filepath.Join(w.o.RootDir, devicePluginsDir),
		func(m *messages.DevicePluginRegistered) { sys.Root.Send(devs, m) }, w.log)
	if err := s.reg.Start(ctx); err != nil {
		w.log.Warn("device plugin registration not served: plugins cannot register", "err", err)
		s.reg = nil
	}
	if s.dra = w.dra; s.dra != nil {
		s.dra.start(sys, devs)
	}
	src := podResourcesSource{sys: sys, status: t.pid("status"), devices: devs, timeout: 10 * time.Second}
	s.pr = podresources.New(podresources.SocketPath(w.o.RootDir), src, w.log)
	if err := s.pr.Start(ctx); err != nil {
		w.log.Warn("pod resources API not served", "err", err)
		s.pr = nil
	}
	return s
}

func (s deviceServers) stop() {
	if s.reg != nil {
		s.reg.Stop()
	}
	if s.pr != nil {
		s.pr.Stop()
	}
	s.dra.stop()
}

// podResourcesSource answers the pod resources API from the StatusActor
// (the pods) and the DevicesActor (their devices).
type podResourcesSource struct {
	sys             *actor.ActorSystem
	status, devices *actor.PID
	timeout         time.Duration
}

func (p podResourcesSource) ask(ctx context.Context, pid *actor.PID, msg any) (any, error) {
	timeout := p.timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	res, err := p.sys.Root.RequestFuture(pid, msg, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pid.Id, err)
	}
	return res, nil
}

func (p podResourcesSource) Pods(ctx context.Context) ([]*v1.Pod, error) {
	res, err := p.ask(ctx, p.status, &messages.GetPods{})
	if err != nil {
		return nil, err
	}
	switch m := res.(type) {
	case *messages.PodList:
		return m.Items, nil
	case *messages.StatusUnavailable:
		return nil, fmt.Errorf("pod status unavailable: %s", m.Reason)
	}
	return nil, fmt.Errorf("unexpected answer %T", res)
}

func (p podResourcesSource) Devices(ctx context.Context, uid types.UID) ([]messages.PodDevices, error) {
	res, err := p.ask(ctx, p.devices, &messages.GetPodDevices{UID: uid})
	if err != nil {
		return nil, err
	}
	m, ok := res.(*messages.PodDevicesList)
	if !ok {
		return nil, fmt.Errorf("unexpected answer %T", res)
	}
	return m.Pods, nil
}

func (p podResourcesSource) Allocatable(ctx context.Context) (map[v1.ResourceName][]string, error) {
	res, err := p.ask(ctx, p.devices, &messages.GetAllocatableDevices{})
	if err != nil {
		return nil, err
	}
	m, ok := res.(*messages.AllocatableDevices)
	if !ok {
		return nil, fmt.Errorf("unexpected answer %T", res)
	}
	return m.Devices, nil
}
