package status

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/messages"
)

// BenchmarkListAfterChange is the StatusActor's work inside its mailbox for
// a GET /pods of 10,000 pods when a pod changed since the last one (every
// poll while pods start): the list built again, sorted by namespace and
// name.
func BenchmarkListAfterChange(b *testing.B) {
	a := &Actor{pods: map[types.UID]*v1.Pod{}}
	for i := range 10000 {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%7), Name: fmt.Sprintf("pod-%05d", i), UID: types.UID(fmt.Sprint(i)),
				Labels: map[string]string{"app": "bench"}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "sim/preloaded/pause:1", Command: []string{"sleep", "3600"}}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: "127.1.2.3",
				ContainerStatuses: []v1.ContainerStatus{{Name: "main", Ready: true, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}},
		}
		a.pods[p.UID] = p
	}
	b.ReportAllocs()
	var l *messages.PodList
	for b.Loop() {
		a.handleUpdate(&messages.PodStatusUpdate{Pod: a.pods["42"]})
		l = a.list()
	}
	if len(l.Items) != 10000 {
		b.Fatalf("%d pods listed", len(l.Items))
	}
}
