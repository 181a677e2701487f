package eviction

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/actorlet/actorlet/podspec"
)

// Local ephemeral storage limits, as upstream's localStorageEviction
// (LocalStorageCapacityIsolation, on by default): every pass, before the
// thresholds, each pod over one of its limits is evicted at once.
const (
	// The eviction_signal label of kubelet_evictions for each limit.
	signalEmptyDirFsLimit           = "emptydirfs.limit"
	signalEphemeralPodFsLimit       = "ephemeralpodfs.limit"
	signalEphemeralContainerFsLimit = "ephemeralcontainerfs.limit"
	// limitGracePeriod is upstream's immediateEvictionGracePeriodSeconds.
	limitGracePeriod = int64(1)

	emptyDirMessageFmt                  = "Usage of EmptyDir volume %q exceeds the limit %q. "
	podEphemeralStorageMessageFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	containerEphemeralStorageMessageFmt = "Container %s exceeded its local ephemeral storage limit %q. "
)

// limitViolation is a pod over one of its local storage limits.
type limitViolation struct {
	pod     *v1.Pod
	signal  string
	message string
}

// localStorageViolations are the pods over a local storage limit, in the
// order given, each once with the first limit it breaks, checked as
// upstream in this order: an emptyDir volume's sizeLimit (its measured
// usage, whatever its medium), the pod's ephemeral storage (containers'
// writable layers, logs and local ephemeral volumes, as the Summary sums
// it) against the sum of its containers' limits.ephemeral-storage (upstream's
// PodLimits: checked as soon as one container sets one), then each
// container's logs (and writable layer, unless the image filesystem is
// dedicated) against its own limit. Pods without stats break nothing.
func localStorageViolations(pods []*v1.Pod, stats statsFunc, dedicatedImageFs bool) []limitViolation {
	var out []limitViolation
	for _, p := range pods {
		ps, ok := stats(p)
		if !ok {
			continue
		}
		if sig, msg, over := overLimit(p, ps, dedicatedImageFs); over {
			out = append(out, limitViolation{pod: p, signal: sig, message: msg})
		}
	}
	return out
}

// overLimit is the first local storage limit p breaks.
func overLimit(p *v1.Pod, ps statsapi.PodStats, dedicatedImageFs bool) (signal, msg string, over bool) {
	if name, limit, ok := emptyDirOverLimit(p, ps); ok {
		return signalEmptyDirFsLimit, fmt.Sprintf(emptyDirMessageFmt, name, limit.String()), true
	}
	if limit, ok := podEphemeralLimit(p); ok {
		used := resource.Quantity{}
		if e := ps.EphemeralStorage; e != nil && e.UsedBytes != nil {
			used = bytesQ(*e.UsedBytes)
		}
		if used.Cmp(limit) > 0 {
			return signalEphemeralPodFsLimit, fmt.Sprintf(podEphemeralStorageMessageFmt, limit.String()), true
		}
	}
	if name, limit, ok := containerOverLimit(p, ps, dedicatedImageFs); ok {
		return signalEphemeralContainerFsLimit, fmt.Sprintf(containerEphemeralStorageMessageFmt, name, limit.String()), true
	}
	return "", "", false
}

// emptyDirOverLimit is the first emptyDir volume of p (spec order) using
// more than its positive sizeLimit.
func emptyDirOverLimit(p *v1.Pod, ps statsapi.PodStats) (string, resource.Quantity, bool) {
	used := map[string]uint64{}
	for _, v := range ps.VolumeStats {
		if v.UsedBytes != nil {
			used[v.Name] = *v.UsedBytes
		}
	}
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Sign() <= 0 {
			continue
		}
		n, ok := used[v.Name]
		if !ok {
			continue
		}
		if q := bytesQ(n); q.Cmp(*v.EmptyDir.SizeLimit) > 0 {
			return v.Name, *v.EmptyDir.SizeLimit, true
		}
	}
	return "", resource.Quantity{}, false
}

// podEphemeralLimit is the pod's limit of ephemeral-storage as upstream's
// PodLimits: the sum over its containers and sidecars, or its largest
// init container (with the sidecars before it) when larger, plus the
// overhead when non-zero; false when no container sets one.
func podEphemeralLimit(p *v1.Pod) (resource.Quantity, bool) {
	sum, set, _ := podspec.PodResource(p, v1.ResourceEphemeralStorage, true)
	return sum, set
}

// containerOverLimit is the first container (stats order) using more
// than its non-zero limits.ephemeral-storage: its logs, and its writable
// layer unless the image filesystem is dedicated.
func containerOverLimit(p *v1.Pod, ps statsapi.PodStats, dedicatedImageFs bool) (string, resource.Quantity, bool) {
	limits := map[string]resource.Quantity{}
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]; ok && !q.IsZero() {
			limits[c.Name] = q
		}
	}
	for _, cs := range ps.Containers {
		limit, ok := limits[cs.Name]
		if !ok {
			continue
		}
		var n uint64
		if cs.Logs != nil && cs.Logs.UsedBytes != nil {
			n += *cs.Logs.UsedBytes
		}
		if !dedicatedImageFs && cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil {
			n += *cs.Rootfs.UsedBytes
		}
		if q := bytesQ(n); q.Cmp(limit) > 0 {
			return cs.Name, limit, true
		}
	}
	return "", resource.Quantity{}, false
}
