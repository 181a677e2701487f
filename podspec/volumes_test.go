package podspec

import (
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func mem(s string) v1.ResourceList { return v1.ResourceList{v1.ResourceMemory: resource.MustParse(s)} }

func ctr(name string, limits v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Limits: limits}}
}

func TestPodMemoryLimit(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	sidecar := ctr("side", mem("64Mi"))
	sidecar.RestartPolicy = &always
	tests := []struct {
		name   string
		spec   v1.PodSpec
		want   int64
		wantOK bool
	}{
		{name: "no limits", spec: v1.PodSpec{Containers: []v1.Container{ctr("a", nil)}}},
		{name: "one container without a limit: none", spec: v1.PodSpec{Containers: []v1.Container{ctr("a", mem("128Mi")), ctr("b", nil)}}},
		{name: "sum of the containers", spec: v1.PodSpec{Containers: []v1.Container{ctr("a", mem("128Mi")), ctr("b", mem("64Mi"))}},
			want: 192 << 20, wantOK: true},
		{name: "an init container larger than the sum", spec: v1.PodSpec{
			InitContainers: []v1.Container{ctr("i", mem("1Gi"))}, Containers: []v1.Container{ctr("a", mem("128Mi"))}},
			want: 1 << 30, wantOK: true},
		{name: "an init container without a limit: none", spec: v1.PodSpec{
			InitContainers: []v1.Container{ctr("i", nil)}, Containers: []v1.Container{ctr("a", mem("128Mi"))}}},
		{name: "sidecars count with the containers, overhead added", spec: v1.PodSpec{
			InitContainers: []v1.Container{sidecar}, Containers: []v1.Container{ctr("a", mem("128Mi"))}, Overhead: mem("1Mi")},
			want: 193 << 20, wantOK: true},
		{name: "pod-level limit wins", spec: v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: mem("32Mi")},
			Containers: []v1.Container{ctr("a", nil)}}, want: 32 << 20, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := PodMemoryLimit(&v1.Pod{Spec: tt.spec})
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("PodMemoryLimit = %d, %v; want %d, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestEmptyDirMemorySize(t *testing.T) {
	size := func(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
	limited := v1.PodSpec{Containers: []v1.Container{ctr("a", mem("256Mi"))}}
	unlimited := v1.PodSpec{Containers: []v1.Container{ctr("a", nil)}}
	tests := []struct {
		name        string
		spec        v1.PodSpec
		sizeLimit   *resource.Quantity
		allocatable v1.ResourceList
		want        int64
	}{
		{name: "node allocatable by default", spec: unlimited, allocatable: mem("8Gi"), want: 8 << 30},
		{name: "the pod's memory limit if lower", spec: limited, allocatable: mem("8Gi"), want: 256 << 20},
		{name: "the sizeLimit if lower still", spec: limited, sizeLimit: size("10Mi"), allocatable: mem("8Gi"), want: 10 << 20},
		{name: "a sizeLimit above the pod's limit is ignored", spec: limited, sizeLimit: size("1Gi"), allocatable: mem("8Gi"), want: 256 << 20},
		{name: "a sizeLimit above allocatable is ignored", spec: unlimited, sizeLimit: size("16Gi"), allocatable: mem("8Gi"), want: 8 << 30},
		{name: "no allocatable known: the sizeLimit", spec: unlimited, sizeLimit: size("10Mi"), want: 10 << 20},
		{name: "nothing known: the kernel's default", spec: unlimited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: tt.spec}
			if got := EmptyDirMemorySize(pod, &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: tt.sizeLimit}, tt.allocatable); got != tt.want {
				t.Errorf("EmptyDirMemorySize = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestFsUser(t *testing.T) {
	id := func(v int64) *int64 { return &v }
	withUser := func(name string, u *int64) v1.Container {
		return v1.Container{Name: name, SecurityContext: &v1.SecurityContext{RunAsUser: u}}
	}
	tests := []struct {
		name string
		spec v1.PodSpec
		want *int64
	}{
		{name: "no user set", spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}},
		{name: "the pod's user", spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{RunAsUser: id(1234)},
			Containers: []v1.Container{{Name: "a"}, {Name: "b"}}}, want: id(1234)},
		{name: "every container the same", spec: v1.PodSpec{InitContainers: []v1.Container{withUser("i", id(7))},
			Containers: []v1.Container{withUser("a", id(7))}}, want: id(7)},
		{name: "two users: none", spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{RunAsUser: id(1)},
			Containers: []v1.Container{{Name: "a"}, withUser("b", id(2))}}},
		{name: "one container without a user: none", spec: v1.PodSpec{Containers: []v1.Container{withUser("a", id(7)), {Name: "b"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FsUser(&v1.Pod{Spec: tt.spec})
			if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Errorf("FsUser = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFileMode(t *testing.T) {
	m := func(v int32) *int32 { return &v }
	tests := []struct {
		name         string
		item, volume *int32
		want         os.FileMode
	}{
		{name: "default 0644", want: 0o644},
		{name: "the volume's defaultMode", volume: m(0o400), want: 0o400},
		{name: "the item's mode first", item: m(0o600), volume: m(0o400), want: 0o600},
		{name: "only permission bits", item: m(0o4777), want: 0o777},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FileMode(tt.item, tt.volume); got != tt.want {
				t.Errorf("FileMode = %o, want %o", got, tt.want)
			}
		})
	}
}
