package source

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRelevantTrustsTheGeneration(t *testing.T) {
	pod := func(gen int64, image, phase string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u", Generation: gen},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image}}},
			Status:     v1.PodStatus{Phase: v1.PodPhase(phase)},
		}
	}
	tests := []struct {
		name string
		a, b *v1.Pod
		want bool
	}{
		{name: "a status update: same generation", a: pod(1, "img:1", "Pending"), b: pod(1, "img:1", "Running"), want: false},
		{name: "a spec update: the generation moved", a: pod(1, "img:1", "Running"), b: pod(2, "img:2", "Running"), want: true},
		{name: "no generation (an API server before 1.33): the specs are compared", a: pod(0, "img:1", "Running"), b: pod(0, "img:2", "Running"), want: true},
		{name: "no generation, the same spec", a: pod(0, "img:1", "Pending"), b: pod(0, "img:1", "Running"), want: false},
		{name: "a new generation with the same spec", a: pod(1, "img:1", "Running"), b: pod(2, "img:1", "Running"), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := relevant(tt.a, tt.b); got != tt.want {
				t.Errorf("relevant = %v, want %v", got, tt.want)
			}
		})
	}
}
