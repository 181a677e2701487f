// Package metrics is actorlet's Prometheus adapter: its own registry with
// the Go and process collectors, the upstream kubelet's metric names, label
// sets and buckets (pkg/kubelet/metrics and the prober's metrics, v1.36),
// and actor metrics under actorlet_. Callers use typed methods with plain Go
// types; nothing here imports actors or messages.
package metrics

import (
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Label values used by the kubelet.
const (
	ContainerTypeContainer = "container"
	ContainerTypeInit      = "init_container"
	ContainerTypeEphemeral = "ephemeral_container"

	ProbeLiveness  = "Liveness"
	ProbeReadiness = "Readiness"
	ProbeStartup   = "Startup"

	ProbeResultSuccessful = "successful"
	ProbeResultFailed     = "failed"
	ProbeResultUnknown    = "unknown"

	ImageGCReasonSpace = "space"
	ImageGCReasonAge   = "age"
)

const (
	alpha              = "[ALPHA] " // component-base prefixes help by stability
	beta               = "[BETA] "
	kubeletSubsystem   = "kubelet"
	actorletNamespace  = "actorlet"
	labelOperationType = "operation_type"
	labelContainerType = "container_type"
	labelStatic        = "static"
	labelKind          = "kind"
	labelImageSize     = "image_size_in_bytes"
)

var (
	// Hand-picked, roughly exponential buckets of the pod startup metrics.
	podStartupBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
	imagePullBuckets  = []float64{1, 5, 10, 20, 30, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
	runtimeOpBuckets  = prometheus.ExponentialBuckets(0.005, 2.5, 14)
)

// Counter is a cheap handle on one counter series (an atomic add).
type Counter interface {
	Inc()
	Add(float64)
}

// Registry owns a prometheus.Registry and every actorlet metric.
type Registry struct {
	reg *prometheus.Registry

	runningPods        prometheus.Gauge
	runningPodsN       atomic.Int64 // runningPods' value, read back by RunningPods
	runningContainers  *prometheus.GaugeVec
	desiredPods        *prometheus.GaugeVec
	podStart           prometheus.Histogram
	podStartSLI        prometheus.Histogram
	podStartTotal      prometheus.Histogram
	podWorker          *prometheus.HistogramVec
	plegRelist         prometheus.Histogram
	plegInterval       prometheus.Histogram
	plegLastSeen       prometheus.Gauge
	startedPods        prometheus.Counter
	startedPodsErrors  prometheus.Counter
	startedCtrs        *prometheus.CounterVec
	startedCtrsErrors  *prometheus.CounterVec
	restartedPods      *prometheus.CounterVec
	runtimeOps         *prometheus.CounterVec
	runtimeOpsDuration *prometheus.HistogramVec
	runtimeOpsErrors   *prometheus.CounterVec
	evictions          *prometheus.CounterVec
	devices            *deviceMetrics
	cgroupErrors       *prometheus.CounterVec
	podResizes         *prometheus.CounterVec // resize.go
	imagePull          *prometheus.HistogramVec
	imageGC            *prometheus.CounterVec
	probeTotal         *prometheus.CounterVec
	probeDuration      *prometheus.HistogramVec

	actorRestarts *prometheus.CounterVec
	actorPanics   *prometheus.CounterVec
	actors        *prometheus.GaugeVec
	actorMessages *prometheus.CounterVec
	actorStats    *actorCollector
}

// New returns a Registry with every metric and the Go and process
// collectors registered.
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry()}
	// opts names a kubelet_ metric and marks its help ALPHA, as upstream.
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Name: prometheus.BuildFQName("", kubeletSubsystem, name), Help: alpha + help}
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts(opts(name, help)))
	}
	gaugeVec := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts(opts(name, help)), labels)
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts(opts(name, help)))
	}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts(opts(name, help)), labels)
	}
	histogramOpts := func(name, help string, buckets []float64) prometheus.HistogramOpts {
		o := opts(name, help)
		return prometheus.HistogramOpts{Name: o.Name, Help: o.Help, Buckets: buckets}
	}
	histogram := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(histogramOpts(name, help, buckets))
	}
	histogramVec := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(histogramOpts(name, help, buckets), labels)
	}

	r.runningPods = gauge("running_pods", "Number of pods that have a running pod sandbox")
	r.runningContainers = gaugeVec("running_containers", "Number of containers currently running", "container_state")
	r.desiredPods = gaugeVec("desired_pods", "The number of pods the kubelet is being instructed to run. static is true if the pod is not from the apiserver.", labelStatic)
	r.podStart = histogram("pod_start_duration_seconds", "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run", podStartupBuckets)
	r.podStartSLI = histogram("pod_start_sli_duration_seconds", "Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch", podStartupBuckets)
	r.podStartTotal = histogram("pod_start_total_duration_seconds", "Duration in seconds to start a pod since creation, including time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch", podStartupBuckets)
	r.podWorker = histogramVec("pod_worker_duration_seconds", "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync", prometheus.DefBuckets, labelOperationType)
	r.plegRelist = histogram("pleg_relist_duration_seconds", "Duration in seconds for relisting pods in PLEG.", prometheus.DefBuckets)
	r.plegInterval = histogram("pleg_relist_interval_seconds", "Interval in seconds between relisting in PLEG.", prometheus.DefBuckets)
	r.plegLastSeen = gauge("pleg_last_seen_seconds", "Timestamp in seconds when PLEG was last seen active.")
	r.startedPods = counter("started_pods_total", "Cumulative number of pods started")
	r.startedPodsErrors = counter("started_pods_errors_total", "Cumulative number of errors when starting pods")
	r.startedCtrs = counterVec("started_containers_total", "Cumulative number of containers started", labelContainerType)
	r.startedCtrsErrors = counterVec("started_containers_errors_total", "Cumulative number of errors when starting containers", labelContainerType, "code")
	r.restartedPods = counterVec("restarted_pods_total", "Number of pods that have been restarted because they were deleted and recreated with the same UID while the kubelet was watching them (common for static pods, extremely uncommon for API pods)", labelStatic)
	r.runtimeOps = counterVec("runtime_operations_total", "Cumulative number of runtime operations by operation type.", labelOperationType)
	r.runtimeOpsDuration = histogramVec("runtime_operations_duration_seconds", "Duration in seconds of runtime operations. Broken down by operation type.", runtimeOpBuckets, labelOperationType)
	r.runtimeOpsErrors = counterVec("runtime_operations_errors_total", "Cumulative number of runtime operation errors by operation type.", labelOperationType)
	r.evictions = counterVec("evictions", "Cumulative number of pod evictions by eviction signal", "eviction_signal")
	r.imagePull = histogramVec("image_pull_duration_seconds", "Duration in seconds to pull an image.", imagePullBuckets, labelImageSize)
	r.imageGC = counterVec("image_garbage_collected_total", "Total number of images garbage collected by the kubelet, whether through disk usage or image age.", "reason")

	r.probeTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "prober_probe_total",
		Help: beta + "Cumulative number of a liveness, readiness or startup probe for a container by result.",
	}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"})
	r.probeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "prober_probe_duration_seconds",
		Help:    alpha + "Duration in seconds for a probe response.",
		Buckets: prometheus.DefBuckets,
	}, []string{"probe_type", "container", "pod", "namespace"})

	a := func(name string) string { return prometheus.BuildFQName(actorletNamespace, "", name) }
	r.actorRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: a("actor_restarts_total"), Help: "Restarts of actors by their supervisor, by actor kind."}, []string{labelKind})
	r.actorPanics = prometheus.NewCounterVec(prometheus.CounterOpts{Name: a("actor_panics_total"), Help: "Panics recovered in actors, by actor kind."}, []string{labelKind})
	r.actors = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: a("actors"), Help: "Live actors, by actor kind."}, []string{labelKind})
	r.actorMessages = prometheus.NewCounterVec(prometheus.CounterOpts{Name: a("actor_messages_total"), Help: "Messages handled by actors, by actor kind."}, []string{labelKind})
	r.actorStats = newActorCollector(r.actors, r.actorMessages)

	r.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		r.runningPods, r.runningContainers, r.desiredPods,
		r.podStart, r.podStartSLI, r.podStartTotal, r.podWorker,
		r.plegRelist, r.plegInterval, r.plegLastSeen,
		r.startedPods, r.startedPodsErrors, r.startedCtrs, r.startedCtrsErrors, r.restartedPods,
		r.runtimeOps, r.runtimeOpsDuration, r.runtimeOpsErrors,
		r.evictions, r.imagePull, r.imageGC,
		r.probeTotal, r.probeDuration,
		r.actorRestarts, r.actorPanics, r.actorStats,
	)
	r.devices = newDeviceMetrics()
	r.reg.MustRegister(r.devices.collectors()...)
	r.cgroupErrors = newCgroupErrors()
	r.reg.MustRegister(r.cgroupErrors)
	r.podResizes = newPodResizes()
	r.reg.MustRegister(r.podResizes)
	return r
}

// InitActorKinds exports the actor counters of the given kinds at zero, so
// that a dashboard sees "no restarts" rather than "no data".
func (r *Registry) InitActorKinds(kinds ...string) {
	r.actorStats.addKinds(kinds...)
	for _, k := range kinds {
		r.actorRestarts.WithLabelValues(k)
		r.actorPanics.WithLabelValues(k)
		r.actorMessages.WithLabelValues(k)
	}
}

// Gatherer exposes the underlying registry (for tests and for bridging).
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Register adds further collectors to the registry.
func (r *Registry) Register(cs ...prometheus.Collector) error {
	var errs []error
	for _, c := range cs {
		if err := r.reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Handler serves the registry in the Prometheus exposition formats.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}

// SetRunningPods sets kubelet_running_pods (pods with a running sandbox).
func (r *Registry) SetRunningPods(n int) {
	r.runningPods.Set(float64(n))
	r.runningPodsN.Store(int64(n))
}

// RunningPods is the last value of kubelet_running_pods (the process's
// memory upkeep follows it).
func (r *Registry) RunningPods() int { return int(r.runningPodsN.Load()) }

// SetRunningContainers sets kubelet_running_containers for a container
// state ("running", "exited", "created", "unknown").
func (r *Registry) SetRunningContainers(state string, n int) {
	r.runningContainers.WithLabelValues(state).Set(float64(n))
}

// SetDesiredPods sets kubelet_desired_pods; static is true for pods not
// from the API server.
func (r *Registry) SetDesiredPods(static bool, n int) {
	r.desiredPods.WithLabelValues(strconv.FormatBool(static)).Set(float64(n))
}

// ObservePodStart observes kubelet_pod_start_duration_seconds: from the
// kubelet first seeing a pod to the pod running.
func (r *Registry) ObservePodStart(d time.Duration) { r.podStart.Observe(d.Seconds()) }

// ObservePodStartSLI observes kubelet_pod_start_sli_duration_seconds
// (creation to all containers started, excluding image pulls).
func (r *Registry) ObservePodStartSLI(d time.Duration) { r.podStartSLI.Observe(d.Seconds()) }

// ObservePodStartTotal observes kubelet_pod_start_total_duration_seconds
// (creation to all containers started, including image pulls).
func (r *Registry) ObservePodStartTotal(d time.Duration) { r.podStartTotal.Observe(d.Seconds()) }

// ObservePodWorker observes kubelet_pod_worker_duration_seconds for an
// operation type ("create", "update", "sync").
func (r *Registry) ObservePodWorker(op string, d time.Duration) {
	r.podWorker.WithLabelValues(op).Observe(d.Seconds())
}

// ObservePLEGRelist observes one relist's duration and, when interval > 0,
// the interval since the previous relist.
func (r *Registry) ObservePLEGRelist(d, interval time.Duration) {
	r.plegRelist.Observe(d.Seconds())
	if interval > 0 {
		r.plegInterval.Observe(interval.Seconds())
	}
}

// SetPLEGLastSeen sets kubelet_pleg_last_seen_seconds to t as Unix seconds.
func (r *Registry) SetPLEGLastSeen(t time.Time) {
	r.plegLastSeen.Set(float64(t.UnixNano()) / float64(time.Second))
}

// IncStartedPods counts a pod sandbox start.
func (r *Registry) IncStartedPods() { r.startedPods.Inc() }

// IncStartedPodsErrors counts a failed pod sandbox start.
func (r *Registry) IncStartedPodsErrors() { r.startedPodsErrors.Inc() }

// IncStartedContainers counts a container start; ctype is one of the
// ContainerType constants.
func (r *Registry) IncStartedContainers(ctype string) { r.startedCtrs.WithLabelValues(ctype).Inc() }

// IncStartedContainersErrors counts a failed container start with its
// error code (upstream uses the gRPC status code name, e.g. "Unknown").
func (r *Registry) IncStartedContainersErrors(ctype, code string) {
	r.startedCtrsErrors.WithLabelValues(ctype, code).Inc()
}

// IncRestartedPods counts a pod deleted and recreated with the same UID.
func (r *Registry) IncRestartedPods(static bool) {
	r.restartedPods.WithLabelValues(strconv.FormatBool(static)).Inc()
}

// ObserveRuntimeOp counts a CRI operation (e.g. "run_podsandbox",
// "create_container"), observes its duration and counts it as an error when
// err is not nil.
func (r *Registry) ObserveRuntimeOp(op string, d time.Duration, err error) {
	r.runtimeOps.WithLabelValues(op).Inc()
	r.runtimeOpsDuration.WithLabelValues(op).Observe(d.Seconds())
	if err != nil {
		r.runtimeOpsErrors.WithLabelValues(op).Inc()
	}
}

// IncEvictions counts a pod eviction for a signal ("memory.available", ...).
func (r *Registry) IncEvictions(signal string) { r.evictions.WithLabelValues(signal).Inc() }

// ObserveImagePull observes kubelet_image_pull_duration_seconds, labelled
// by the bucketed image size (0 means unknown: "N/A").
func (r *Registry) ObserveImagePull(d time.Duration, sizeBytes uint64) {
	r.imagePull.WithLabelValues(ImageSizeBucket(sizeBytes)).Observe(d.Seconds())
}

// IncImageGC counts garbage-collected images; reason is ImageGCReasonSpace
// or ImageGCReasonAge.
func (r *Registry) IncImageGC(reason string, n int) {
	r.imageGC.WithLabelValues(reason).Add(float64(n))
}

// ObserveProbe counts one probe result (probeType one of the Probe*
// constants, result one of the ProbeResult* constants) and, when d > 0,
// observes its duration.
func (r *Registry) ObserveProbe(probeType, result, container, pod, namespace, podUID string, d time.Duration) {
	r.probeTotal.WithLabelValues(probeType, result, container, pod, namespace, podUID).Inc()
	if d > 0 {
		r.probeDuration.WithLabelValues(probeType, container, pod, namespace).Observe(d.Seconds())
	}
}

// ForgetProbe deletes a probe's series (when its worker stops), so that
// label sets of deleted pods do not accumulate.
func (r *Registry) ForgetProbe(probeType, container, pod, namespace, podUID string) {
	for _, res := range []string{ProbeResultSuccessful, ProbeResultFailed, ProbeResultUnknown} {
		r.probeTotal.DeleteLabelValues(probeType, res, container, pod, namespace, podUID)
	}
	r.probeDuration.DeleteLabelValues(probeType, container, pod, namespace)
}

// IncActorRestart counts a restart of an actor of kind.
func (r *Registry) IncActorRestart(kind string) { r.actorRestarts.WithLabelValues(kind).Inc() }

// IncActorPanic counts a recovered panic in an actor of kind.
func (r *Registry) IncActorPanic(kind string) { r.actorPanics.WithLabelValues(kind).Inc() }

// SetActors sets the number of live actors of kind.
func (r *Registry) SetActors(kind string, n int) { r.actors.WithLabelValues(kind).Set(float64(n)) }

// SetActorCounts sets actorlet_actors for every kind in counts and zeroes
// kinds seen before but absent now.
func (r *Registry) SetActorCounts(counts map[string]int) {
	r.actors.Reset()
	for k, n := range counts {
		r.actors.WithLabelValues(k).Set(float64(n))
	}
}

// AddActorMessages adds n handled messages for kind.
func (r *Registry) AddActorMessages(kind string, n uint64) {
	r.actorMessages.WithLabelValues(kind).Add(float64(n))
}

// ActorMessages returns a handle on the message counter of kind, for hot
// paths (resolve once, then Inc is one atomic add).
func (r *Registry) ActorMessages(kind string) Counter {
	return r.actorMessages.WithLabelValues(kind)
}

type sizeBucket struct {
	above uint64
	label string
}

const (
	mib = 1024 * 1024
	gib = 1024 * mib
)

// As upstream: an image of more than the bound falls in the bucket.
var imageSizeBuckets = []sizeBucket{
	{100 * gib, "GT100GB"},
	{60 * gib, "60GB-100GB"},
	{40 * gib, "40GB-60GB"},
	{30 * gib, "30GB-40GB"},
	{20 * gib, "20GB-30GB"},
	{10 * gib, "10GB-20GB"},
	{5 * gib, "5GB-10GB"},
	{1 * gib, "1GB-5GB"},
	{500 * mib, "500MB-1GB"},
	{100 * mib, "100MB-500MB"},
	{10 * mib, "10MB-100MB"},
	{0, "0-10MB"},
}

// ImageSizeBucket returns the image_size_in_bytes label for a size in
// bytes; 0 (unknown) gives "N/A".
func ImageSizeBucket(size uint64) string {
	if size == 0 {
		return "N/A"
	}
	for _, b := range imageSizeBuckets {
		if size > b.above {
			return b.label
		}
	}
	return "0-10MB"
}
