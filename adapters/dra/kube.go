package dra

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// Claims reads ResourceClaims (resource.k8s.io/v1) with the node's
// credentials.
type Claims struct {
	Client kubernetes.Interface
}

// GetClaim reads one ResourceClaim.
func (c Claims) GetClaim(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error) {
	return c.Client.ResourceV1().ResourceClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

// Wiper deletes the node's ResourceSlices, as upstream's kubelet does at
// start (every driver: none has registered yet) and when a driver stayed
// away past a grace period.
type Wiper struct {
	Client kubernetes.Interface
	Node   string
}

// WipeSlices deletes the node's ResourceSlices of driver ("": of every
// driver). None to delete is no error.
func (w Wiper) WipeSlices(ctx context.Context, driver string) error {
	sel := fields.Set{resourceapi.ResourceSliceSelectorNodeName: w.Node}
	if driver != "" {
		sel[resourceapi.ResourceSliceSelectorDriver] = driver
	}
	err := w.Client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: sel.String()})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Metrics are upstream's DRA metrics (dra_operations_duration_seconds,
// dra_grpc_operations_duration_seconds, dra_resource_claims_in_use) and
// actorlet's count of failed driver calls by driver
// (actorlet_dra_driver_errors_total).
type Metrics struct {
	ops      *prometheus.HistogramVec
	grpc     *prometheus.HistogramVec
	inUse    *prometheus.GaugeVec
	errors   *prometheus.CounterVec
	inUseSet map[string]bool
}

// NewMetrics makes the collectors (register them with Collectors).
func NewMetrics() *Metrics {
	buckets := prometheus.ExponentialBucketsRange(.1, 40, 15)
	return &Metrics{
		ops: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dra_operations_duration_seconds",
			Help: "[ALPHA] Latency histogram in seconds for the duration of handling all ResourceClaims referenced by a pod when the pod starts or stops. Identified by the name of the operation (PrepareResources or UnprepareResources) and separated by the success of the operation.", Buckets: buckets},
			[]string{"operation_name", "is_error"}),
		grpc: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dra_grpc_operations_duration_seconds",
			Help: "[ALPHA] Duration in seconds of the DRA gRPC operations", Buckets: buckets},
			[]string{"driver_name", "method_name", "grpc_status_code"}),
		inUse: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dra_resource_claims_in_use",
			Help: "[ALPHA] The number of ResourceClaims that are currently in use on the node, by driver name (driver_name label value) and across all drivers (special value <any> for driver_name). Note that the sum of all by-driver counts is not the total number of in-use ResourceClaims because the same ResourceClaim might use devices from different drivers."},
			[]string{"driver_name"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "actorlet_dra_driver_errors_total",
			Help: "Failed calls of DRA drivers (NodePrepareResources, NodeUnprepareResources, not registered, timed out), by driver and operation."},
			[]string{"driver", "operation"}),
		inUseSet: map[string]bool{},
	}
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.ops, m.grpc, m.inUse, m.errors}
}

// ObserveOperation records one PrepareResources or UnprepareResources of a pod.
func (m *Metrics) ObserveOperation(op string, d time.Duration, failed bool) {
	isErr := "false"
	if failed {
		isErr = "true"
	}
	m.ops.WithLabelValues(op, isErr).Observe(d.Seconds())
}

// ObserveGRPC records one gRPC call of a driver (Dial's observe).
func (m *Metrics) ObserveGRPC(driver, method string, d time.Duration, err error) {
	m.grpc.WithLabelValues(driver, method, status.Code(err).String()).Observe(d.Seconds())
}

// IncDriverError counts a failed driver operation.
func (m *Metrics) IncDriverError(driver, op string) { m.errors.WithLabelValues(driver, op).Inc() }

// SetClaimsInUse sets the claims in use by driver ("<any>": all claims);
// drivers no longer listed drop to zero. Called from one actor only.
func (m *Metrics) SetClaimsInUse(byDriver map[string]int) {
	for d := range m.inUseSet {
		if _, ok := byDriver[d]; !ok {
			m.inUse.WithLabelValues(d).Set(0)
		}
	}
	for d, n := range byDriver {
		m.inUseSet[d] = true
		m.inUse.WithLabelValues(d).Set(float64(n))
	}
}
