package node

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/actorlet/actorlet/podspec"
)

// Resource admission, as the upstream kubelet's predicate admit handler
// (pkg/kubelet/lifecycle/predicate.go, the scheduler's NodeResourcesFit):
// a pod of any source (file, URL, push, API) is admitted only if the pods
// already admitted leave room for its requests in the node's allocatable.
//
// Upstream treats static pods as critical: when one does not fit, its
// CriticalPodAdmissionHandler first evicts lower-priority pods to make room.
// actorlet does not preempt: a pod that does not fit is rejected whatever
// its source or priority (Failed with OutOf<resource>), and runs once it is
// sent again (a changed manifest, a new push) after room was made.

// admittedResources are the resources checked against Config.Allocatable
// (besides the pod count, against Config.MaxPods).
var admittedResources = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage}

// Admission reasons for resources: "OutOf" + the resource's name, as
// upstream.
const (
	ReasonOutOfPods             = "OutOfpods"
	ReasonOutOfCPU              = "OutOfcpu"
	ReasonOutOfMemory           = "OutOfmemory"
	ReasonOutOfEphemeralStorage = "OutOfephemeral-storage"
)

// podRequest is the pod's effective request of a resource
// (podspec.PodRequest).
func podRequest(p *v1.Pod, name v1.ResourceName) resource.Quantity {
	return podspec.PodRequest(p, name)
}

// seenAnnotation is the upstream kubelet's kubernetes.io/config.seen, the
// time a node-local source first saw a pod.
const seenAnnotation = "kubernetes.io/config.seen"

// admissionOrder is pods oldest first, as upstream admits them (by
// creation time; a static pod by the time its source first saw it), so
// that a NodeActor rebuilding its view after a restart admits the pods that
// were running before those that arrived later and were rejected: room
// goes to the same pods again. Pods with neither time keep their order,
// after the others.
func admissionOrder(pods []*v1.Pod) []*v1.Pod {
	out := slices.Clone(pods)
	when := func(p *v1.Pod) time.Time {
		if p == nil {
			return time.Time{}
		}
		if !p.CreationTimestamp.IsZero() {
			return p.CreationTimestamp.Time
		}
		t, _ := time.Parse(time.RFC3339Nano, p.Annotations[seenAnnotation])
		return t
	}
	slices.SortStableFunc(out, func(a, b *v1.Pod) int {
		ta, tb := when(a), when(b)
		switch {
		case ta.IsZero() || tb.IsZero():
			if ta.IsZero() == tb.IsZero() {
				return 0
			}
			if ta.IsZero() {
				return 1
			}
			return -1
		default:
			return ta.Compare(tb)
		}
	})
	return out
}
