package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestGracePeriod(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	withGrace := func(g int64) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{TerminationGracePeriodSeconds: i64(g)}}
	}
	tests := []struct {
		name     string
		pod      *v1.Pod
		override *int64
		want     int64
	}{
		{name: "no pod, no override: default", want: 30},
		{name: "pod without one: default", pod: &v1.Pod{}, want: 30},
		{name: "pod's", pod: withGrace(45), want: 45},
		{name: "override wins", pod: withGrace(45), override: i64(10), want: 10},
		{name: "zero raised to the minimum", pod: withGrace(0), want: 2},
		{name: "override raised to the minimum", override: i64(1), want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := GracePeriod(tt.pod, tt.override); got != tt.want {
				t.Fatalf("got %d, want %d", got, tt.want)
			}
		})
	}
}
