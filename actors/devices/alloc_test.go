package devices

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
)

func TestIsExtended(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  v1.ResourceName
		want bool
	}{
		{name: "a vendor's GPU", res: "nvidia.com/gpu", want: true},
		{name: "a vendor's sub-domain", res: "gpu.intel.com/i915", want: true},
		{name: "cpu", res: "cpu"},
		{name: "memory", res: "memory"},
		{name: "ephemeral storage", res: "ephemeral-storage"},
		{name: "hugepages", res: "hugepages-2Mi"},
		{name: "the kubernetes.io domain", res: "kubernetes.io/batch"},
		{name: "a kubernetes.io sub-domain", res: "foo.kubernetes.io/bar"},
		{name: "a quota name", res: "requests.nvidia.com/gpu"},
		{name: "not a qualified name", res: "example.com/a b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isExtended(tc.res); got != tc.want {
				t.Errorf("isExtended(%q) = %v, want %v", tc.res, got, tc.want)
			}
		})
	}
}

func qty(n string) apiresource.Quantity { return apiresource.MustParse(n) }

func TestPodNeeds(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	served := func(r string) bool { return r == "gpu" }
	for _, tc := range []struct {
		name string
		pod  v1.PodSpec
		want []containerNeed
	}{
		{name: "limits of extended resources; native ignored",
			pod: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Limits: v1.ResourceList{"nvidia.com/gpu": qty("2"), v1.ResourceCPU: qty("1")}}}}},
			want: []containerNeed{{name: "c", req: map[string]int{"nvidia.com/gpu": 2}}}},
		{name: "requests where there is no limit",
			pod: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{"example.com/foo": qty("3")}}}}},
			want: []containerNeed{{name: "c", req: map[string]int{"example.com/foo": 3}}}},
		{name: "the limit wins over the request",
			pod: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{"example.com/foo": qty("3")}, Limits: v1.ResourceList{"example.com/foo": qty("1")}}}}},
			want: []containerNeed{{name: "c", req: map[string]int{"example.com/foo": 1}}}},
		{name: "a served resource counts even without a domain",
			pod: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Limits: v1.ResourceList{"gpu": qty("1")}}}}},
			want: []containerNeed{{name: "c", req: map[string]int{"gpu": 1}}}},
		{name: "init containers first, sidecars marked, containers without any left out",
			pod: v1.PodSpec{
				Containers: []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{"nvidia.com/gpu": qty("1")}}},
					{Name: "plain"}},
				InitContainers: []v1.Container{
					{Name: "setup", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{"nvidia.com/gpu": qty("1")}}},
					{Name: "side", RestartPolicy: &always, Resources: v1.ResourceRequirements{Limits: v1.ResourceList{"nvidia.com/gpu": qty("1")}}},
				}},
			want: []containerNeed{
				{name: "setup", init: true, req: map[string]int{"nvidia.com/gpu": 1}},
				{name: "side", init: true, sidecar: true, req: map[string]int{"nvidia.com/gpu": 1}},
				{name: "main", req: map[string]int{"nvidia.com/gpu": 1}},
			}},
		{name: "zero asks for nothing",
			pod: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Limits: v1.ResourceList{"nvidia.com/gpu": qty("0")}}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := podNeeds(&v1.Pod{Spec: tc.pod}, served)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("podNeeds = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMakePlan(t *testing.T) {
	gpu := func(n int) map[string]int { return map[string]int{"nvidia.com/gpu": n} }
	four := map[string][]string{"nvidia.com/gpu": {"g0", "g1", "g2", "g3"}}
	two := map[string][]string{"nvidia.com/gpu": {"g0", "g1"}}
	for _, tc := range []struct {
		name    string
		needs   []containerNeed
		free    map[string][]string
		prefer  preferFunc
		want    plan
		wantErr string
	}{
		{name: "one device, in ID order", needs: []containerNeed{{name: "c", req: gpu(1)}}, free: four,
			want: plan{"c": {"nvidia.com/gpu": {"g0"}}}},
		{name: "two containers, two devices each", needs: []containerNeed{{name: "a", req: gpu(2)}, {name: "b", req: gpu(2)}}, free: four,
			want: plan{"a": {"nvidia.com/gpu": {"g0", "g1"}}, "b": {"nvidia.com/gpu": {"g2", "g3"}}}},
		{name: "not enough", needs: []containerNeed{{name: "c", req: gpu(3)}}, free: two,
			wantErr: "requested number of devices unavailable for nvidia.com/gpu. Requested: 3, Available: 2"},
		{name: "not enough for the second container", needs: []containerNeed{{name: "a", req: gpu(1)}, {name: "b", req: gpu(2)}}, free: two,
			wantErr: "Requested: 2, Available: 1"},
		{name: "an unregistered resource", needs: []containerNeed{{name: "c", req: map[string]int{"example.com/foo": 1}}}, free: two,
			wantErr: "cannot allocate unregistered device example.com/foo"},
		{name: "an init container's devices are reused by the app container",
			needs: []containerNeed{{name: "init", init: true, req: gpu(2)}, {name: "main", req: gpu(2)}}, free: two,
			want: plan{"init": {"nvidia.com/gpu": {"g0", "g1"}}, "main": {"nvidia.com/gpu": {"g0", "g1"}}}},
		{name: "reused first, then free ones",
			needs: []containerNeed{{name: "init", init: true, req: gpu(1)}, {name: "main", req: gpu(2)}}, free: two,
			want: plan{"init": {"nvidia.com/gpu": {"g0"}}, "main": {"nvidia.com/gpu": {"g0", "g1"}}}},
		{name: "init containers reuse each other's",
			needs: []containerNeed{{name: "i1", init: true, req: gpu(1)}, {name: "i2", init: true, req: gpu(1)}, {name: "main", req: gpu(1)}},
			free:  map[string][]string{"nvidia.com/gpu": {"g0"}},
			want:  plan{"i1": {"nvidia.com/gpu": {"g0"}}, "i2": {"nvidia.com/gpu": {"g0"}}, "main": {"nvidia.com/gpu": {"g0"}}}},
		{name: "a sidecar keeps its devices",
			needs: []containerNeed{{name: "side", init: true, sidecar: true, req: gpu(1)}, {name: "main", req: gpu(2)}}, free: two,
			wantErr: "Requested: 2, Available: 1"},
		{name: "two app containers do not share",
			needs: []containerNeed{{name: "init", init: true, req: gpu(1)}, {name: "a", req: gpu(1)}, {name: "b", req: gpu(1)}}, free: two,
			want: plan{"init": {"nvidia.com/gpu": {"g0"}}, "a": {"nvidia.com/gpu": {"g0"}}, "b": {"nvidia.com/gpu": {"g1"}}}},
		{name: "the provider's preference", needs: []containerNeed{{name: "c", req: gpu(2)}}, free: four,
			prefer: func(_ string, available, must []string, size int) []string {
				if len(available) != 4 || len(must) != 0 || size != 2 {
					return nil
				}
				return []string{"g3", "g1"}
			},
			want: plan{"c": {"nvidia.com/gpu": {"g1", "g3"}}}},
		{name: "a preference naming unknown, duplicate or too many devices is trimmed", needs: []containerNeed{{name: "c", req: gpu(2)}}, free: four,
			prefer: func(string, []string, []string, int) []string { return []string{"zz", "g2", "g2", "g3", "g0"} },
			want:   plan{"c": {"nvidia.com/gpu": {"g2", "g3"}}}},
		{name: "reusable devices are a must for the preference",
			needs: []containerNeed{{name: "init", init: true, req: gpu(1)}, {name: "main", req: gpu(2)}}, free: four,
			prefer: func(_ string, available, must []string, size int) []string {
				switch {
				case len(must) == 0:
					return []string{"g2"}
				case len(must) == 1 && must[0] == "g2" && size == 2 && len(available) == 4:
					return []string{"g3", "g2"}
				}
				return nil
			},
			want: plan{"init": {"nvidia.com/gpu": {"g2"}}, "main": {"nvidia.com/gpu": {"g2", "g3"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := makePlan(tc.needs, tc.free, tc.prefer)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan = %v, want %v", got, tc.want)
			}
		})
	}
}
