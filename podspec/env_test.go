package podspec

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "x", "B": "y"}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	tests := []struct{ name, in, want string }{
		{name: "simple", in: "$(A)/$(B)", want: "x/y"},
		{name: "escaped", in: "$$(A)", want: "$(A)"},
		{name: "unknown kept", in: "$(C)", want: "$(C)"},
		{name: "unterminated", in: "a$(A", want: "a$(A"},
		{name: "lone dollar", in: "a$b$", want: "a$b$"},
		{name: "double dollar", in: "$$", want: "$"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Expand(tt.in, lookup); got != tt.want {
				t.Fatalf("Expand(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestExpandCommand(t *testing.T) {
	env := []v1.EnvVar{
		{Name: "DIR", Value: "/data"},
		{Name: "REF", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
	}
	tests := []struct {
		name string
		cmd  []string
		want []string
	}{
		{name: "literal env expanded", cmd: []string{"ls", "$(DIR)/x"}, want: []string{"ls", "/data/x"}},
		{name: "references are not expanded", cmd: []string{"echo", "$(REF)"}, want: []string{"echo", "$(REF)"}},
		{name: "empty", cmd: nil, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExpandCommand(tt.cmd, env); !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFieldRef(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1",
			Labels: map[string]string{"app": "web", "tier": "front"}, Annotations: map[string]string{"a": "1"}},
		Spec: v1.PodSpec{NodeName: "n1", ServiceAccountName: "sa"},
	}
	tests := []struct {
		name    string
		path    string
		want    string
		wantErr bool
	}{
		{name: "name", path: "metadata.name", want: "web"},
		{name: "namespace", path: "metadata.namespace", want: "default"},
		{name: "uid", path: "metadata.uid", want: "u1"},
		{name: "node", path: "spec.nodeName", want: "n1"},
		{name: "service account", path: "spec.serviceAccountName", want: "sa"},
		{name: "pod IP", path: "status.podIP", want: "10.0.0.7"},
		{name: "host IP", path: "status.hostIPs", want: "192.0.2.1"},
		{name: "one label", path: "metadata.labels['tier']", want: "front"},
		{name: "missing label", path: "metadata.labels['nope']", want: ""},
		{name: "all labels", path: "metadata.labels", want: "app=\"web\"\ntier=\"front\""},
		{name: "one annotation", path: "metadata.annotations['a']", want: "1"},
		{name: "unsupported", path: "spec.containers", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FieldRef(pod, tt.path, "10.0.0.7", "192.0.2.1")
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("got %q, %v; want %q (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestResourceFieldRefUnsetLimitIsNodeAllocatable(t *testing.T) {
	alloc := v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("1500m"),
		v1.ResourceMemory:           resource.MustParse("3Gi"),
		v1.ResourceEphemeralStorage: resource.MustParse("10Gi"),
	}
	set := &v1.Container{Resources: v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
	}}
	unset := &v1.Container{}
	tests := []struct {
		name     string
		c        *v1.Container
		resource string
		divisor  string
		alloc    v1.ResourceList
		want     string
		wantErr  bool
	}{
		{name: "set limit wins", c: set, resource: "limits.memory", divisor: "1Mi", alloc: alloc, want: "64"},
		{name: "cpu request in millicores", c: set, resource: "requests.cpu", divisor: "1m", alloc: alloc, want: "250"},
		{name: "unset memory limit is allocatable", c: unset, resource: "limits.memory", divisor: "1Mi", alloc: alloc, want: "3072"},
		{name: "unset cpu limit is allocatable, rounded up", c: unset, resource: "limits.cpu", divisor: "1", alloc: alloc, want: "2"},
		{name: "unset storage limit is allocatable", c: unset, resource: "limits.ephemeral-storage", divisor: "1Gi", alloc: alloc, want: "10"},
		{name: "unset request is 0", c: unset, resource: "requests.memory", divisor: "1", alloc: alloc, want: "0"},
		{name: "no allocatable known: memory 0", c: unset, resource: "limits.memory", divisor: "1", want: "0"},
		{name: "unsupported resource", c: unset, resource: "limits.gpu", divisor: "1", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResourceFieldRef(tt.c, &v1.ResourceFieldSelector{Resource: tt.resource, Divisor: resource.MustParse(tt.divisor)}, tt.alloc)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("got %q, %v; want %q (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestHostsFile(t *testing.T) {
	tests := []struct {
		name  string
		pod   *v1.Pod
		podIP string
		want  []string
		not   []string
	}{
		{
			name: "host aliases",
			pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
				Spec: v1.PodSpec{HostAliases: []v1.HostAlias{{IP: "10.9.9.9", Hostnames: []string{"db", "db.local"}}}}},
			podIP: "10.0.0.7",
			want:  []string{"127.0.0.1\tlocalhost\n", "10.0.0.7\tweb\n", "# Entries added by HostAliases.\n10.9.9.9\tdb\tdb.local\n"},
		},
		{
			name:  "hostname and subdomain",
			pod:   &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns"}, Spec: v1.PodSpec{Hostname: "h", Subdomain: "svc"}},
			podIP: "10.0.0.8",
			want:  []string{"10.0.0.8\th.svc.ns.svc.cluster.local\th\n"},
			not:   []string{"HostAliases"},
		},
		{
			name: "no pod IP yet",
			pod:  &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}},
			want: []string{"# Kubernetes-managed hosts file.\n"},
			not:  []string{"\tweb\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(HostsFile(tt.pod, tt.podIP, "cluster.local", nil))
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("hosts file lacks %q:\n%s", w, got)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(got, n) {
					t.Errorf("hosts file has %q:\n%s", n, got)
				}
			}
		})
	}
}
