package podspec

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestIsSidecarAndProbed(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "proxy", RestartPolicy: &always}, {Name: "migrate"}},
		Containers:     []v1.Container{{Name: "app"}, {Name: "log"}},
	}}
	tests := []struct {
		name string
		c    *v1.Container
		want bool
	}{
		{name: "restartable init container", c: &pod.Spec.InitContainers[0], want: true},
		{name: "plain init container", c: &pod.Spec.InitContainers[1]},
		{name: "regular container", c: &pod.Spec.Containers[0]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsSidecar(tt.c); got != tt.want {
				t.Fatalf("IsSidecar = %v, want %v", got, tt.want)
			}
		})
	}
	var names []string
	for _, c := range Probed(pod) {
		names = append(names, c.Name)
	}
	if want := []string{"proxy", "app", "log"}; !slices.Equal(names, want) {
		t.Fatalf("Probed = %v, want %v", names, want)
	}
}
