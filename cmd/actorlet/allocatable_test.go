package main

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestEvictionHard checks the thresholds kept out of both the admission
// allocatable and the Node's: upstream's defaults, memory.available<100Mi
// and nodefs.available<10%.
func TestEvictionHard(t *testing.T) {
	tests := []struct {
		name     string
		capacity v1.ResourceList
		want     v1.ResourceList
	}{
		{
			name:     "memory and the root dir's filesystem",
			capacity: v1.ResourceList{v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourceEphemeralStorage: resource.MustParse("100Gi")},
			want:     v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi"), v1.ResourceEphemeralStorage: resource.MustParse("10Gi")},
		},
		{
			name:     "no filesystem figure: memory only",
			capacity: v1.ResourceList{v1.ResourceMemory: resource.MustParse("8Gi")},
			want:     v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := defaultOptions().evictionHard(tc.capacity)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for name, q := range tc.want {
				if g, ok := got[name]; !ok || g.Cmp(q) != 0 {
					t.Errorf("%s: got %v, want %s", name, got[name], q.String())
				}
			}
		})
	}
	// The shared default must not be changed through a returned value.
	o := defaultOptions()
	got := o.evictionHard(nil)
	q := got[v1.ResourceMemory]
	q.Add(resource.MustParse("1Gi"))
	got[v1.ResourceMemory] = q
	if again := o.evictionHard(nil)[v1.ResourceMemory]; again.Cmp(resource.MustParse("100Mi")) != 0 {
		t.Fatalf("the default threshold changed to %s", again.String())
	}
}
