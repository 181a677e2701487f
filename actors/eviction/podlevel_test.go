package eviction

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// A pod's pod-level memory request (spec.resources) is what its usage is
// measured against, as upstream ranks by PodRequests: a pod within its
// pod-level request goes after one above its containers' small requests.
func TestRankingByPodLevelRequests(t *testing.T) {
	podLevel := pod("pod-level-within", "", "")
	podLevel.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}}
	ctrLevel := pod("containers-above", "100Mi", "")
	stats := statsOf(summary{pods: []statsapi.PodStats{podMem(podLevel, 800*mi), podMem(ctrLevel, 300*mi)}}.build())
	pods := []*v1.Pod{&podLevel, &ctrLevel}
	rankPods(pods, SignalMemoryAvailable, stats, false)
	if got := pods[0].Name + "," + pods[1].Name; got != "containers-above,pod-level-within" {
		t.Fatalf("ranking %s: the pod within its pod-level request went first", got)
	}
}
