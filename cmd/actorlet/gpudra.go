package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/spf13/pflag"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/actorlet/actorlet/actors/devices"
	"github.com/actorlet/actorlet/adapters/draplugin"
	"github.com/actorlet/actorlet/adapters/host"
	"github.com/actorlet/actorlet/adapters/nvml"
)

// The built-in GPUs through DRA (--gpu-allocation=dra, issue 29): the
// DevicesActor is the DRA driver gpu.nvidia.com of the node's GPUs. It
// publishes their ResourceSlice, serves the DRA gRPC on
// <root-dir>/plugins/gpu.nvidia.com/dra.sock and registers it through
// <root-dir>/plugins_registry as an external driver would; the GPUs are
// no longer the extended resource nvidia.com/gpu. docs/GPUS.md.

const (
	gpuAllocDevicePlugin = "device-plugin"
	gpuAllocDRA          = "dra"

	gpuDriverName   = "gpu.nvidia.com" // NVIDIA's DRA driver's name
	pluginsDir      = "plugins"
	pluginsRegistry = "plugins_registry"
	draCheckpoint   = "checkpoint.json"
)

// gpuDRAOptions are the flags of the GPUs' allocation path.
type gpuDRAOptions struct {
	GPUAllocation string
	CDISpecDir    string
}

func defaultGPUDRAOptions() gpuDRAOptions {
	return gpuDRAOptions{GPUAllocation: gpuAllocDevicePlugin, CDISpecDir: "/var/run/cdi"}
}

func (o *options) addGPUDRAFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.GPUAllocation, "gpu-allocation", o.GPUAllocation, "How pods get the built-in GPUs: device-plugin (the extended resource nvidia.com/gpu) "+
		"or dra (ResourceClaims of driver gpu.nvidia.com: the agent publishes the GPUs' ResourceSlice and prepares their claims by CDI spec; needs --kubeconfig).")
	fs.StringVar(&o.CDISpecDir, "cdi-spec-dir", o.CDISpecDir, "Directory the CDI specs of prepared GPU claims are written to (--gpu-allocation=dra); the runtime must read CDI specs from it.")
}

func (o *options) validateGPUDRA() error {
	switch o.GPUAllocation {
	case gpuAllocDevicePlugin:
		return nil
	case gpuAllocDRA:
		if o.Kubeconfig == "" {
			return fmt.Errorf("--gpu-allocation=dra needs --kubeconfig: ResourceSlices and ResourceClaims live in the API server")
		}
		if o.CDISpecDir == "" || !filepath.IsAbs(o.CDISpecDir) {
			return fmt.Errorf("--cdi-spec-dir %q: want an absolute path", o.CDISpecDir)
		}
		return nil
	}
	return fmt.Errorf("--gpu-allocation %q: want device-plugin or dra", o.GPUAllocation)
}

// gpuDRA is the DRA driver's parts around the DevicesActor.
type gpuDRA struct {
	o        *options
	nodeName string
	client   kubernetes.Interface
	byName   map[string]nvml.GPUInfo
	byUUID   map[string]nvml.GPUInfo
	pub      *draplugin.Publisher
	cdi      *draplugin.CDIWriter
	srv      *draplugin.Server
	log      *slog.Logger
}

// draConfig is the DevicesActor's DRA config (nil: the device plugin
// path); it makes w.dra.
func (w *wiring) draConfig() *devices.DRAConfig {
	if w.o.GPUAllocation != gpuAllocDRA || w.gpus == nil || w.cluster == nil {
		if w.o.GPUAllocation == gpuAllocDRA {
			w.log.Info("--gpu-allocation=dra: no GPUs, no DRA driver")
		}
		return nil
	}
	d, err := newGPUDRA(w.o, w.name, w.gpus, w.cluster.kubeClient().Clientset(), w.log)
	if err != nil {
		w.log.Error("GPU attributes unreadable: no DRA driver", "err", err)
		return nil
	}
	w.dra = d
	return d.config()
}

// newGPUDRA reads the GPUs' attributes and starts the slice publisher.
func newGPUDRA(o *options, nodeName string, gpus *nvml.GPUs, client kubernetes.Interface, log *slog.Logger) (*gpuDRA, error) {
	infos, err := gpus.GPUInfos()
	if err != nil {
		return nil, err
	}
	log = log.With("component", "gpu-dra")
	d := &gpuDRA{o: o, nodeName: nodeName, client: client, byName: map[string]nvml.GPUInfo{}, byUUID: map[string]nvml.GPUInfo{}, log: log}
	for _, g := range infos {
		d.byName[g.Name], d.byUUID[g.UUID] = g, g
	}
	d.pub = draplugin.NewPublisher(client, gpuDriverName, nodeName, log, nil)
	d.cdi = &draplugin.CDIWriter{Dir: o.CDISpecDir, Kind: devices.CDIKind, Node: gpus.GPUNode, Control: gpus.ControlNodes}
	return d, nil
}

func (d *gpuDRA) config() *devices.DRAConfig {
	return &devices.DRAConfig{
		Resource: nvml.GPUResource,
		Slices:   d,
		CDI:      d,
		Store:    host.FileStore{Path: filepath.Join(d.o.RootDir, pluginsDir, gpuDriverName, draCheckpoint)},
	}
}

// SetDevices publishes the GPUs (devices.SliceSink), in index order.
func (d *gpuDRA) SetDevices(devs []devices.SliceDevice) {
	gs := make([]nvml.GPUInfo, 0, len(devs))
	healthy := map[string]bool{}
	for _, dev := range devs {
		if g, ok := d.byUUID[dev.ID]; ok {
			gs = append(gs, g)
			healthy[dev.ID] = dev.Healthy
		}
	}
	slices.SortFunc(gs, func(a, b nvml.GPUInfo) int { return a.Index - b.Index })
	out := make([]draplugin.SliceDevice, len(gs))
	for i, g := range gs {
		out[i] = draplugin.GPUDevice(g, healthy[g.UUID])
	}
	d.pub.Set(out)
}

// Write and Remove are the claims' CDI specs (devices.CDISpecs).
func (d *gpuDRA) Write(c devices.ClaimRef, devs []devices.PreparedDevice) error {
	out := make([]draplugin.Device, len(devs))
	for i, dev := range devs {
		out[i] = draplugin.Device{Requests: dev.Requests, Pool: dev.Pool, Name: dev.Device, ID: dev.ID, CDIDevices: dev.CDIDevices}
	}
	return d.cdi.Write(string(c.UID), out)
}

func (d *gpuDRA) Remove(c devices.ClaimRef) error { return d.cdi.Remove(string(c.UID)) }

// start serves the driver's sockets (the node's DRA manager registers it
// from <root-dir>/plugins_registry).
func (d *gpuDRA) start(sys *actor.ActorSystem, devs *actor.PID) {
	client := d.client
	d.srv = draplugin.New(draplugin.Config{
		Driver:      gpuDriverName,
		NodeName:    d.nodeName,
		PluginDir:   filepath.Join(d.o.RootDir, pluginsDir, gpuDriverName),
		RegistryDir: filepath.Join(d.o.RootDir, pluginsRegistry),
		Claims: func(ctx context.Context, ns, name string) (*resourceapi.ResourceClaim, error) {
			return client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Resolve: func(name string) (string, bool) {
			g, ok := d.byName[name]
			return g.UUID, ok
		},
		Preparer: actorPreparer{sys: sys, pid: devs, timeout: d.o.RuntimeRequestTimeout},
		Log:      d.log,
	})
	if err := d.srv.Start(); err != nil {
		d.log.Error("DRA driver not served: GPU claims cannot be prepared", "err", err)
		d.srv = nil
	}
}

func (d *gpuDRA) stop() {
	if d == nil {
		return
	}
	if d.srv != nil {
		d.srv.Stop()
	}
	d.pub.Close()
}

// actorPreparer asks the DevicesActor by message and waits for its answer
// at most timeout (or the call's deadline): the gRPC handlers never hold
// the actor's mailbox.
type actorPreparer struct {
	sys     *actor.ActorSystem
	pid     *actor.PID
	timeout time.Duration
}

func (p actorPreparer) ask(ctx context.Context, msg any) (any, error) {
	timeout := p.timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, context.DeadlineExceeded
	}
	res, err := p.sys.Root.RequestFuture(p.pid, msg, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("DevicesActor: %w", err)
	}
	return res, nil
}

func (p actorPreparer) Prepare(ctx context.Context, claims []draplugin.Claim) (map[string]draplugin.Result, error) {
	m := &devices.PrepareClaims{}
	for _, c := range claims {
		cp := devices.ClaimToPrepare{ClaimRef: devices.ClaimRef{UID: types.UID(c.UID), Namespace: c.Namespace, Name: c.Name}}
		for _, d := range c.Devices {
			cp.Devices = append(cp.Devices, devices.ClaimDevice{Requests: d.Requests, Pool: d.Pool, Device: d.Name, ID: d.ID})
		}
		m.Claims = append(m.Claims, cp)
	}
	res, err := p.ask(ctx, m)
	if err != nil {
		return nil, err
	}
	ans, ok := res.(*devices.ClaimsPrepared)
	if !ok {
		return nil, fmt.Errorf("DevicesActor: unexpected answer %T", res)
	}
	out := make(map[string]draplugin.Result, len(ans.Results))
	for uid, r := range ans.Results {
		dr := draplugin.Result{Err: r.Err}
		for _, d := range r.Devices {
			dr.Devices = append(dr.Devices, draplugin.Device{Requests: d.Requests, Pool: d.Pool, Name: d.Device, ID: d.ID, CDIDevices: d.CDIDevices})
		}
		out[string(uid)] = dr
	}
	return out, nil
}

func (p actorPreparer) Unprepare(ctx context.Context, claims []draplugin.Claim) (map[string]error, error) {
	m := &devices.UnprepareClaims{}
	for _, c := range claims {
		m.Claims = append(m.Claims, devices.ClaimRef{UID: types.UID(c.UID), Namespace: c.Namespace, Name: c.Name})
	}
	res, err := p.ask(ctx, m)
	if err != nil {
		return nil, err
	}
	ans, ok := res.(*devices.ClaimsUnprepared)
	if !ok {
		return nil, fmt.Errorf("DevicesActor: unexpected answer %T", res)
	}
	out := make(map[string]error, len(ans.Results))
	for uid, err := range ans.Results {
		out[string(uid)] = err
	}
	return out, nil
}
