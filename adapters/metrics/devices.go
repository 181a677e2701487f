package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Device gauges. The per-device samples of GPUs use DCGM exporter's metric
// names and its pod labels (pod, namespace, container: the pod holding the
// device, empty when free), so dashboards built for DCGM exporter read
// actorlet's /metrics as they are; UUID is the device ID and resource the
// extended resource ("nvidia.com/gpu").
var dcgmHelp = map[string]string{
	"DCGM_FI_DEV_GPU_UTIL":      "GPU utilization (in %).",
	"DCGM_FI_DEV_MEM_COPY_UTIL": "Memory utilization (in %).",
	"DCGM_FI_DEV_FB_USED":       "Framebuffer memory used (in MiB).",
	"DCGM_FI_DEV_FB_FREE":       "Framebuffer memory free (in MiB).",
	"DCGM_FI_DEV_GPU_TEMP":      "GPU temperature (in C).",
	"DCGM_FI_DEV_POWER_USAGE":   "Power draw (in W).",
	"DCGM_FI_DEV_XID_ERRORS":    "Value of the last XID error encountered.",
}

var deviceLabels = []string{"UUID", "resource", "pod", "namespace", "container"}

// deviceMetrics are the device gauges; the last labels of each device are
// kept to delete its series when its owner changes.
type deviceMetrics struct {
	mu        sync.Mutex
	samples   map[string]*prometheus.GaugeVec // by DCGM name
	owners    map[string][]string             // resource/device -> label values last set
	devices   *prometheus.GaugeVec
	unhealthy *prometheus.CounterVec
}

func newDeviceMetrics() *deviceMetrics {
	d := &deviceMetrics{samples: map[string]*prometheus.GaugeVec{}, owners: map[string][]string{}}
	for name, help := range dcgmHelp {
		d.samples[name] = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, deviceLabels)
	}
	d.devices = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: prometheus.BuildFQName(actorletNamespace, "", "devices"),
		Help: "Devices of an extended resource: all (capacity), healthy (allocatable) and allocated to pods.",
	}, []string{"resource", "state"})
	d.unhealthy = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: prometheus.BuildFQName(actorletNamespace, "", "device_unhealthy_total"),
		Help: "Devices that turned unhealthy (a GPU's critical Xid, a plugin's report), by resource.",
	}, []string{"resource"})
	return d
}

func (d *deviceMetrics) collectors() []prometheus.Collector {
	out := []prometheus.Collector{d.devices, d.unhealthy}
	for _, g := range d.samples {
		out = append(out, g)
	}
	return out
}

// SetDeviceSample sets the DCGM-named gauges of one device; names that are
// not DCGM exporter's fields actorlet knows are ignored. The pod,
// namespace and container are the device's owner ("" when free).
func (r *Registry) SetDeviceSample(resource, deviceID, namespace, pod, container string, values map[string]float64) {
	d := r.devices
	labels := []string{deviceID, resource, pod, namespace, container}
	d.mu.Lock()
	defer d.mu.Unlock()
	key := resource + "/" + deviceID
	if old, ok := d.owners[key]; ok && !equal(old, labels) {
		for _, g := range d.samples {
			g.DeleteLabelValues(old...)
		}
	}
	d.owners[key] = labels
	for name, v := range values {
		if g, ok := d.samples[name]; ok {
			g.WithLabelValues(labels...).Set(v)
		}
	}
}

// DeleteDeviceSample drops the gauges of a device gone.
func (r *Registry) DeleteDeviceSample(resource, deviceID string) {
	d := r.devices
	d.mu.Lock()
	defer d.mu.Unlock()
	key := resource + "/" + deviceID
	if old, ok := d.owners[key]; ok {
		for _, g := range d.samples {
			g.DeleteLabelValues(old...)
		}
		delete(d.owners, key)
	}
}

// SetDevices sets actorlet_devices of a resource.
func (r *Registry) SetDevices(resource string, capacity, allocatable, allocated int) {
	r.devices.devices.WithLabelValues(resource, "capacity").Set(float64(capacity))
	r.devices.devices.WithLabelValues(resource, "allocatable").Set(float64(allocatable))
	r.devices.devices.WithLabelValues(resource, "allocated").Set(float64(allocated))
}

// IncDeviceUnhealthy counts a device of resource that turned unhealthy.
func (r *Registry) IncDeviceUnhealthy(resource string) {
	r.devices.unhealthy.WithLabelValues(resource).Inc()
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
