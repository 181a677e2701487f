package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/ptr"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// cdiClass is the class of the driver's CDI devices: their kind is
// <driver-name>/dev.
const cdiClass = "dev"

// healthResend is how often the health stream repeats its report, well
// within the kubelet's 30 s staleness window.
const healthResend = 10 * time.Second

// driver implements kubeletplugin.DRAPlugin.
type driver struct {
	c      *config
	helper *kubeletplugin.Helper
	cancel context.CancelCauseFunc

	mu  sync.Mutex // serialises the state log and the CDI files
	log *os.File   // the state file, append only
}

var _ kubeletplugin.DRAPlugin = (*driver)(nil)

// record is one line of the state file.
type record struct {
	Time    time.Time `json:"time"`
	Op      string    `json:"op"` // registered, registration-failed, prepare, prepare-failed, prepare-abandoned, unprepare
	Claim   string    `json:"claim,omitempty"`
	UID     string    `json:"uid,omitempty"`
	Devices []string  `json:"devices,omitempty"`
	CDI     []string  `json:"cdi,omitempty"`
	// Again is true on a prepare of a claim whose CDI spec was already on
	// disk (a repeated call), and on an unprepare of a claim that was not
	// prepared.
	Again bool   `json:"again,omitempty"`
	Error string `json:"error,omitempty"`
}

// start opens the state file, starts the kubelet plugin helper (the
// registration socket in --registrar-dir, the DRA socket in --plugin-dir)
// and publishes the node's ResourceSlice. cancel ends the driver on a
// fatal background error.
func start(ctx context.Context, c *config, cs kubernetes.Interface, cancel context.CancelCauseFunc) (*driver, error) {
	for _, dir := range []string{c.registrarDir, c.pluginDir, c.cdiDir, filepath.Dir(c.stateFile)} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(c.stateFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("--state-file: %w", err)
	}
	d := &driver{c: c, log: f, cancel: cancel}
	d.helper, err = kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(c.driverName),
		kubeletplugin.NodeName(c.nodeName),
		kubeletplugin.KubeClient(cs),
		kubeletplugin.RegistrarDirectoryPath(c.registrarDir),
		kubeletplugin.PluginDataDirectoryPath(c.pluginDir),
		kubeletplugin.GRPCInterceptor(d.recordRegistration),
	)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start the kubelet plugin: %w", err)
	}
	if err := d.helper.PublishResources(ctx, d.resources()); err != nil {
		d.helper.Stop()
		_ = f.Close()
		return nil, fmt.Errorf("publish the ResourceSlice: %w", err)
	}
	return d, nil
}

// resources is the node's one pool, named after the node: --devices
// devices dev-0.. with an index and a model attribute.
func (d *driver) resources() resourceslice.DriverResources {
	devs := make([]resourceapi.Device, d.c.devices)
	for i := range devs {
		devs[i] = resourceapi.Device{
			Name: deviceName(i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"index": {IntValue: ptr.To(int64(i))},
				"model": {StringValue: ptr.To(d.c.model)},
			},
		}
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		d.c.nodeName: {Slices: []resourceslice.Slice{{Devices: devs}}},
	}}
}

func deviceName(i int) string { return "dev-" + strconv.Itoa(i) }

// knownDevice says whether name is one of the n devices.
func knownDevice(name string, n int) bool {
	i, err := strconv.Atoi(strings.TrimPrefix(name, "dev-"))
	return strings.HasPrefix(name, "dev-") && err == nil && i >= 0 && i < n && deviceName(i) == name
}

// EnvName is the environment variable the CDI spec sets for a device:
// DRA_<DEVICE>, the device name upper-cased with '-' as '_' (dev-0:
// DRA_DEV_0). Its value is <claim namespace>/<claim name>.
func EnvName(device string) string {
	return "DRA_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(device))
}

// specPath is the CDI spec file of a claim.
func (d *driver) specPath(uid types.UID) string {
	return filepath.Join(d.c.cdiDir, d.c.driverName+"-"+string(uid)+".json")
}

// PrepareResourceClaims writes one CDI spec per claim with one CDI device
// per allocated device of this driver, and answers their IDs.
func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	if d.c.prepareDelay > 0 {
		t := time.NewTimer(d.c.prepareDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			err := fmt.Errorf("prepare abandoned after %v: the caller gave up: %w", d.c.prepareDelay, context.Cause(ctx))
			d.mu.Lock()
			for _, claim := range claims {
				d.write(record{Op: "prepare-abandoned", Claim: claim.Namespace + "/" + claim.Name, UID: string(claim.UID), Error: err.Error()})
			}
			d.mu.Unlock()
			return nil, err
		case <-t.C:
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		r, err := d.prepare(claim)
		rec := record{Op: "prepare", Claim: claim.Namespace + "/" + claim.Name, UID: string(claim.UID)}
		if err != nil {
			rec.Op, rec.Error = "prepare-failed", err.Error()
			out[claim.UID] = kubeletplugin.PrepareResult{Err: err}
		} else {
			for _, dev := range r.result.Devices {
				rec.Devices = append(rec.Devices, dev.DeviceName)
				rec.CDI = append(rec.CDI, dev.CDIDeviceIDs...)
			}
			rec.Again = r.again
			out[claim.UID] = r.result
		}
		d.write(rec)
	}
	return out, nil
}

type prepared struct {
	result kubeletplugin.PrepareResult
	again  bool
}

func (d *driver) prepare(claim *resourceapi.ResourceClaim) (prepared, error) {
	if name := d.c.failPrepareFor; name != "" && (claim.Name == name || reservedFor(claim, name)) {
		return prepared{}, fmt.Errorf("dradriver: --fail-prepare-for=%s refuses claim %s/%s", name, claim.Namespace, claim.Name)
	}
	if claim.Status.Allocation == nil {
		return prepared{}, fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)
	}
	vendor := d.c.driverName
	spec := &cdispec.Spec{Kind: vendor + "/" + cdiClass}
	var res kubeletplugin.PrepareResult
	for _, a := range claim.Status.Allocation.Devices.Results {
		if a.Driver != d.c.driverName {
			continue
		}
		if a.Pool != d.c.nodeName || !knownDevice(a.Device, d.c.devices) {
			return prepared{}, fmt.Errorf("claim %s/%s: device %s/%s is not one of this node's", claim.Namespace, claim.Name, a.Pool, a.Device)
		}
		// The claim's UID in the name: a CDI ID is never reused, so a
		// runtime's cached spec never answers for another claim.
		name := string(claim.UID) + "-" + a.Device
		spec.Devices = append(spec.Devices, cdispec.Device{
			Name: name,
			ContainerEdits: cdispec.ContainerEdits{
				Env: []string{EnvName(a.Device) + "=" + claim.Namespace + "/" + claim.Name},
			},
		})
		res.Devices = append(res.Devices, kubeletplugin.Device{
			Requests:     []string{a.Request},
			PoolName:     a.Pool,
			DeviceName:   a.Device,
			CDIDeviceIDs: []string{spec.Kind + "=" + name},
		})
	}
	if len(spec.Devices) == 0 {
		return prepared{result: res}, nil
	}
	v, err := cdispec.MinimumRequiredVersion(spec)
	if err != nil {
		return prepared{}, fmt.Errorf("CDI spec version: %w", err)
	}
	spec.Version = v
	b, err := json.Marshal(spec)
	if err != nil {
		return prepared{}, err
	}
	path := d.specPath(claim.UID)
	old, err := os.ReadFile(path)
	again := err == nil && string(old) == string(b)
	if err := writeAtomic(path, b); err != nil {
		return prepared{}, fmt.Errorf("write CDI spec: %w", err)
	}
	return prepared{result: res, again: again}, nil
}

func reservedFor(claim *resourceapi.ResourceClaim, pod string) bool {
	return slices.ContainsFunc(claim.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool {
		return r.Resource == "pods" && r.Name == pod
	})
}

// writeAtomic writes through a temporary file and a rename, so a runtime
// never reads half a spec.
func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// UnprepareResourceClaims removes the claims' CDI specs. A claim not
// prepared is no error (the call is idempotent), recorded with again.
func (d *driver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		err := os.Remove(d.specPath(claim.UID))
		rec := record{Op: "unprepare", Claim: claim.Namespace + "/" + claim.Name, UID: string(claim.UID)}
		switch {
		case errors.Is(err, os.ErrNotExist):
			rec.Again = true
		case err != nil:
			rec.Error = err.Error()
			out[claim.UID] = fmt.Errorf("remove CDI spec: %w", err)
		}
		if _, ok := out[claim.UID]; !ok {
			out[claim.UID] = nil
		}
		d.write(rec)
	}
	return out, nil
}

// write appends rec to the state file (the caller holds d.mu). A failed
// write is logged: the tests that read the file then fail on what is
// missing.
func (d *driver) write(rec record) {
	rec.Time = time.Now().UTC()
	b, err := json.Marshal(rec)
	if err == nil {
		_, err = d.log.Write(append(b, '\n'))
	}
	if err != nil {
		klog.ErrorS(err, "dradriver: write the state file", "path", d.c.stateFile)
	}
	klog.InfoS("dradriver "+rec.Op, "claim", rec.Claim, "uid", rec.UID, "devices", rec.Devices, "cdi", rec.CDI, "again", rec.Again, "error", rec.Error)
}

// recordRegistration records the kubelet's answer to the registration
// (NotifyRegistrationStatus) in the state file: op registered, or
// registration-failed with the kubelet's error, so a test can wait until
// the agent has taken the driver in.
func (d *driver) recordRegistration(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if st, ok := req.(*registerapi.RegistrationStatus); ok && strings.HasSuffix(info.FullMethod, "/NotifyRegistrationStatus") {
		rec := record{Op: "registered"}
		if !st.PluginRegistered {
			rec.Op, rec.Error = "registration-failed", st.Error
		}
		d.mu.Lock()
		d.write(rec)
		d.mu.Unlock()
	}
	return handler(ctx, req)
}

// HandleError logs a background error; a fatal one ends the driver.
func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	runtime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.cancel(fmt.Errorf("%s: %w", msg, err))
	}
}

// WatchHealthStatus reports every device Healthy, or Unhealthy where
// --unhealthy names it, and repeats the report within the kubelet's
// staleness window until ctx ends.
func (d *driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	t := time.NewTicker(healthResend)
	defer t.Stop()
	for {
		var rep kubeletplugin.DeviceHealthReport
		for i := range d.c.devices {
			h := kubeletplugin.DeviceHealth{PoolName: d.c.nodeName, DeviceName: deviceName(i), Health: kubeletplugin.HealthStatusHealthy, LastUpdated: time.Now()}
			if slices.Contains(d.c.unhealthy, h.DeviceName) {
				h.Health, h.Message = kubeletplugin.HealthStatusUnhealthy, "marked unhealthy by --unhealthy"
			}
			rep.Devices = append(rep.Devices, h)
		}
		select {
		case <-ctx.Done():
			return nil
		case reports <- rep:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
