package nvml_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actorlet/actorlet/actors/devices"
	"github.com/actorlet/actorlet/adapters/nvml"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

var (
	_ devices.Provider      = (*nvml.GPUs)(nil)
	_ devices.Describer     = (*nvml.GPUs)(nil)
	_ devices.Sampler       = (*nvml.GPUs)(nil)
	_ devices.FaultInjector = (*nvml.GPUs)(nil)
)

var uuidForm = regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// open opens a spec for a test and closes it at the end.
func open(t *testing.T, spec string, opts nvml.Options) *nvml.GPUs {
	t.Helper()
	if opts.EventWait == 0 {
		opts.EventWait = 20 * time.Millisecond // Watch sees its ctx end soon
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	g, err := nvml.Open(spec, opts)
	if err != nil {
		t.Fatalf("Open(%q): %v", spec, err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return g
}

// ids is the GPUs' UUIDs in index order (Watch's first list).
func ids(t *testing.T, g *nvml.GPUs) []string {
	t.Helper()
	var out []string
	for _, d := range firstList(t, g) {
		out = append(out, d.ID)
	}
	return out
}

// firstList runs Watch until its first update.
func firstList(t *testing.T, g *nvml.GPUs) []*pluginapi.Device {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var list []*pluginapi.Device
	err := g.Watch(ctx, func(devs []*pluginapi.Device, _ string) {
		if list == nil {
			list = devs
		}
		cancel()
	})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	return list
}

func TestDiscovery(t *testing.T) {
	tests := []struct {
		name     string
		spec     string
		count    int
		numa     []int64
		gpu0     string // annotation actorlet.io/gpu-0 after the UUID
		lastAnno string // annotation of the last GPU after the UUID
	}{
		{name: "dgxh100", spec: "mock:dgxh100", count: 8,
			numa: []int64{0, 0, 0, 0, 1, 1, 1, 1},
			gpu0: ",0000:1b:00.0,NVIDIA H100 80GB HBM3,81559,mig=disabled", lastAnno: ",0000:df:00.0,NVIDIA H100 80GB HBM3,81559,mig=disabled"},
		{name: "dgxa100", spec: "mock:dgxa100", count: 8,
			numa: []int64{0, 0, 0, 0, 1, 1, 1, 1},
			gpu0: ",0000:07:00.0,NVIDIA A100-SXM4-40GB,40960,mig=disabled", lastAnno: ",0000:bd:00.0,NVIDIA A100-SXM4-40GB,40960,mig=disabled"},
		{name: "dgxh100 count=2", spec: "mock:dgxh100?count=2", count: 2,
			numa: []int64{0, 0},
			gpu0: ",0000:1b:00.0,NVIDIA H100 80GB HBM3,81559,mig=disabled", lastAnno: ",0000:43:00.0,NVIDIA H100 80GB HBM3,81559,mig=disabled"},
		{name: "dgxh200", spec: "mock:dgxh200?count=1", count: 1, numa: []int64{0},
			gpu0: ",0000:1b:00.0,NVIDIA H200 141GB HBM3e,144384,mig=disabled", lastAnno: ",0000:1b:00.0,NVIDIA H200 141GB HBM3e,144384,mig=disabled"},
		{name: "dgxb200", spec: "mock:dgxb200?count=1", count: 1, numa: []int64{0},
			gpu0: ",0000:1b:00.0,NVIDIA B200 180GB HBM3e,184320,mig=disabled", lastAnno: ",0000:1b:00.0,NVIDIA B200 180GB HBM3e,184320,mig=disabled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := open(t, tt.spec, nvml.Options{})
			if g.ResourceName() != "nvidia.com/gpu" || g.Count() != tt.count {
				t.Fatalf("resource %q count %d, want nvidia.com/gpu %d", g.ResourceName(), g.Count(), tt.count)
			}
			list := firstList(t, g)
			if len(list) != tt.count {
				t.Fatalf("Watch's first list has %d devices, want %d", len(list), tt.count)
			}
			seen := map[string]bool{}
			for i, d := range list {
				if !uuidForm.MatchString(d.ID) || seen[d.ID] {
					t.Errorf("device %d ID %q: not a fresh GPU-... UUID", i, d.ID)
				}
				seen[d.ID] = true
				if d.Health != pluginapi.Healthy {
					t.Errorf("device %d health %q, want Healthy", i, d.Health)
				}
				if d.Topology == nil || len(d.Topology.Nodes) != 1 || d.Topology.Nodes[0].ID != tt.numa[i] {
					t.Errorf("device %d topology %v, want NUMA node %d", i, d.Topology, tt.numa[i])
				}
			}
			_, anno := g.Describe()
			if got, want := anno["actorlet.io/gpu-0"], list[0].ID+tt.gpu0; got != want {
				t.Errorf("gpu-0 annotation %q, want %q", got, want)
			}
			last := tt.count - 1
			if got, want := anno["actorlet.io/gpu-"+strconv.Itoa(last)], list[last].ID+tt.lastAnno; got != want {
				t.Errorf("gpu-%d annotation %q, want %q", last, got, want)
			}
			if len(anno) != tt.count {
				t.Errorf("%d annotations, want one per GPU: %v", len(anno), anno)
			}
		})
	}
}

func TestMockUUIDsAreStable(t *testing.T) {
	// A restarted actorlet on the same mock finds the same GPUs (its
	// checkpointed allocations name them).
	a := ids(t, open(t, "mock:dgxh100", nvml.Options{}))
	b := ids(t, open(t, "mock:dgxh100?count=3", nvml.Options{}))
	c := ids(t, open(t, "mock:dgxa100", nvml.Options{}))
	if !slices.Equal(a[:3], b) {
		t.Errorf("UUIDs differ between two opens: %v and %v", a[:3], b)
	}
	if slices.Contains(a, c[0]) {
		t.Errorf("dgxa100 and dgxh100 share UUID %s", c[0])
	}
}

func TestBadSpecs(t *testing.T) {
	tests := []struct {
		name, spec, want string
	}{
		{name: "empty", spec: "", want: `"mock:<server>`},
		{name: "unknown scheme", spec: "cuda", want: "dgxa100, dgxb200, dgxh100, dgxh200"},
		{name: "no server", spec: "mock:", want: "unknown simulated server"},
		{name: "unknown server", spec: "mock:dgx1", want: `unknown simulated server "dgx1"`},
		{name: "count zero", spec: "mock:dgxh100?count=0", want: "count"},
		{name: "count too big", spec: "mock:dgxh100?count=9", want: "has 8 GPUs"},
		{name: "count not a number", spec: "mock:dgxa100?count=two", want: "count"},
		{name: "bad period", spec: "mock:dgxh100?xid-every=often", want: "xid-every"},
		{name: "negative period", spec: "mock:dgxh100?xid-every=-1s", want: "must be positive"},
		{name: "bad xid", spec: "mock:dgxh100?xid=-3", want: "xid"},
		{name: "unknown parameter", spec: "mock:dgxh100?gpus=2", want: "unknown parameter"},
		{name: "bad query", spec: "mock:dgxh100?count=%zz", want: "query"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := nvml.Open(tt.spec, nvml.Options{})
			if err == nil {
				g.Close()
				t.Fatalf("Open(%q) succeeded", tt.spec)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open(%q): %v; want it to say %q", tt.spec, err, tt.want)
			}
			if errors.Is(err, nvml.ErrNoLibrary) || errors.Is(err, nvml.ErrNoDevices) {
				t.Errorf("Open(%q): %v reads as a machine without GPUs, not a bad spec", tt.spec, err)
			}
		})
	}
}

// devRoot makes a host /dev stand-in with plain files for nodes.
func devRoot(t *testing.T, nodes ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range nodes {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestAllocate(t *testing.T) {
	gpuNodes := []string{"nvidia0", "nvidia1", "nvidia2", "nvidia3"}
	control := []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}
	type node struct{ container, host string }
	tests := []struct {
		name    string
		nodes   []string // under DevRoot
		pick    []int    // GPU indexes asked for, in order
		ids     []string // raw IDs instead of pick
		want    []node   // host relative to DevRoot
		wantErr string
	}{
		{name: "one GPU", nodes: append(slices.Clone(gpuNodes), control...), pick: []int{0},
			want: []node{{"/dev/nvidia0", "nvidia0"}, {"/dev/nvidiactl", "nvidiactl"}, {"/dev/nvidia-uvm", "nvidia-uvm"}, {"/dev/nvidia-uvm-tools", "nvidia-uvm-tools"}}},
		{name: "two GPUs in the order given", nodes: append(slices.Clone(gpuNodes), control...), pick: []int{3, 1},
			want: []node{{"/dev/nvidia3", "nvidia3"}, {"/dev/nvidia1", "nvidia1"}, {"/dev/nvidiactl", "nvidiactl"}, {"/dev/nvidia-uvm", "nvidia-uvm"}, {"/dev/nvidia-uvm-tools", "nvidia-uvm-tools"}}},
		{name: "modeset when present", nodes: append(slices.Clone(gpuNodes), append(control, "nvidia-modeset")...), pick: []int{2},
			want: []node{{"/dev/nvidia2", "nvidia2"}, {"/dev/nvidiactl", "nvidiactl"}, {"/dev/nvidia-uvm", "nvidia-uvm"}, {"/dev/nvidia-uvm-tools", "nvidia-uvm-tools"}, {"/dev/nvidia-modeset", "nvidia-modeset"}}},
		{name: "missing control nodes left out", nodes: []string{"nvidia1"}, pick: []int{1},
			want: []node{{"/dev/nvidia1", "nvidia1"}}},
		{name: "missing GPU node", nodes: append([]string{"nvidia0"}, control...), pick: []int{0, 2}, wantErr: "nvidia2"},
		{name: "unknown ID", nodes: gpuNodes, ids: []string{"GPU-00000000-0000-0000-0000-000000000000"}, wantErr: "unknown GPU"},
		{name: "same GPU twice", nodes: gpuNodes, pick: []int{1, 1}, wantErr: "twice"},
		{name: "no ID", nodes: gpuNodes, ids: []string{}, wantErr: "no device ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := devRoot(t, tt.nodes...)
			g := open(t, "mock:dgxh100?count=4", nvml.Options{DevRoot: root})
			all := ids(t, g)
			asked := tt.ids
			if asked == nil {
				for _, i := range tt.pick {
					asked = append(asked, all[i])
				}
			}
			resp, err := g.Allocate(context.Background(), asked)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Allocate: %v, want an error saying %q", err, tt.wantErr)
				}
				if tt.wantErr == "unknown GPU" && !errors.Is(err, nvml.ErrUnknownDevice) {
					t.Errorf("Allocate: %v is not ErrUnknownDevice", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Allocate: %v", err)
			}
			if got, want := resp.Envs["NVIDIA_VISIBLE_DEVICES"], strings.Join(asked, ","); got != want || len(resp.Envs) != 1 {
				t.Errorf("envs %v, want only NVIDIA_VISIBLE_DEVICES=%s", resp.Envs, want)
			}
			var got []node
			for _, d := range resp.Devices {
				if d.Permissions != "rw" {
					t.Errorf("%s permissions %q, want rw", d.ContainerPath, d.Permissions)
				}
				rel, err := filepath.Rel(root, d.HostPath)
				if err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("host path %s not under DevRoot %s", d.HostPath, root)
				}
				got = append(got, node{d.ContainerPath, rel})
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("devices %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPreferredAllocation(t *testing.T) {
	g := open(t, "mock:dgxh100", nvml.Options{}) // NUMA 0: GPUs 0-3, NUMA 1: 4-7
	all := ids(t, g)
	pick := func(idx ...int) []string {
		var out []string
		for _, i := range idx {
			out = append(out, all[i])
		}
		return out
	}
	tests := []struct {
		name        string
		available   []string
		mustInclude []string
		size        int
		want        []string
		wantErr     bool
	}{
		{name: "one NUMA node", available: all, size: 2, want: pick(0, 1)},
		{name: "the node that holds them all", available: pick(0, 1, 4, 5, 6), size: 3, want: pick(4, 5, 6)},
		{name: "best fit leaves the big node whole", available: pick(0, 1, 2, 3, 5, 6), size: 2, want: pick(5, 6)},
		{name: "beside mustInclude", available: all, mustInclude: pick(5), size: 2, want: pick(5, 4)},
		{name: "spanning nodes", available: all, size: 5, want: pick(0, 1, 2, 3, 4)},
		{name: "mustInclude only", available: all, mustInclude: pick(6, 2), size: 2, want: pick(6, 2)},
		{name: "repeated IDs counted once", available: pick(4, 4, 5, 0), size: 2, want: pick(4, 5)},
		{name: "size too big", available: pick(0, 1), size: 3, wantErr: true},
		{name: "size zero", available: all, size: 0, wantErr: true},
		{name: "unknown ID", available: []string{"GPU-nope"}, size: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := g.PreferredAllocation(context.Background(), tt.available, tt.mustInclude, tt.size)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("PreferredAllocation = %v, want an error", got)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("PreferredAllocation = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if err := g.PreStart(context.Background(), all[:1]); err != nil {
		t.Errorf("PreStart: %v", err)
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		name string
		spec string
		want map[string]string
	}{
		{name: "dgxh100", spec: "mock:dgxh100", want: map[string]string{
			"nvidia.com/gpu.present":                  "true",
			"nvidia.com/gpu.count":                    "8",
			"nvidia.com/gpu.product":                  "NVIDIA-H100-80GB-HBM3",
			"nvidia.com/gpu.memory":                   "81559",
			"nvidia.com/gpu.family":                   "hopper",
			"nvidia.com/gpu.compute.major":            "9",
			"nvidia.com/gpu.compute.minor":            "0",
			"nvidia.com/gpu.machine":                  "DGXH100",
			"nvidia.com/mig.capable":                  "true",
			"nvidia.com/cuda.driver.major":            "550",
			"nvidia.com/cuda.driver.minor":            "54",
			"nvidia.com/cuda.driver.rev":              "15",
			"nvidia.com/cuda.driver-version.major":    "550",
			"nvidia.com/cuda.driver-version.minor":    "54",
			"nvidia.com/cuda.driver-version.revision": "15",
			"nvidia.com/cuda.driver-version.full":     "550.54.15",
			"nvidia.com/cuda.runtime.major":           "12",
			"nvidia.com/cuda.runtime.minor":           "4",
			"nvidia.com/cuda.runtime-version.major":   "12",
			"nvidia.com/cuda.runtime-version.minor":   "4",
			"nvidia.com/cuda.runtime-version.full":    "12.4",
		}},
		{name: "dgxa100 count=3", spec: "mock:dgxa100?count=3", want: map[string]string{
			"nvidia.com/gpu.count":         "3",
			"nvidia.com/gpu.product":       "NVIDIA-A100-SXM4-40GB",
			"nvidia.com/gpu.memory":        "40960",
			"nvidia.com/gpu.family":        "ampere",
			"nvidia.com/gpu.compute.major": "8",
			"nvidia.com/gpu.compute.minor": "0",
			"nvidia.com/gpu.machine":       "DGXA100",
		}},
		{name: "dgxb200", spec: "mock:dgxb200", want: map[string]string{
			"nvidia.com/gpu.family":                "blackwell",
			"nvidia.com/gpu.compute.major":         "10",
			"nvidia.com/cuda.driver-version.full":  "560.28.03",
			"nvidia.com/cuda.runtime-version.full": "12.6",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			labels, annotations := open(t, tt.spec, nvml.Options{}).Describe()
			for k, want := range tt.want {
				if labels[k] != want {
					t.Errorf("label %s = %q, want %q", k, labels[k], want)
				}
			}
			// The API server refuses a Node with a bad label.
			for k, v := range labels {
				if errs := validation.IsQualifiedName(k); len(errs) > 0 {
					t.Errorf("label key %q: %v", k, errs)
				}
				if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
					t.Errorf("label %s value %q: %v", k, v, errs)
				}
			}
			for k := range annotations {
				if errs := validation.IsQualifiedName(k); len(errs) > 0 {
					t.Errorf("annotation key %q: %v", k, errs)
				}
			}
		})
	}
}

func TestSample(t *testing.T) {
	g := open(t, "mock:dgxh100?count=2", nvml.Options{})
	all := ids(t, g)
	got, err := g.Sample(context.Background())
	if err != nil {
		t.Fatalf("Sample: %v", err)
	}
	want := map[string]map[string]float64{
		all[0]: {"DCGM_FI_DEV_GPU_UTIL": 0, "DCGM_FI_DEV_MEM_COPY_UTIL": 0, "DCGM_FI_DEV_FB_USED": 1, "DCGM_FI_DEV_FB_FREE": 81558,
			"DCGM_FI_DEV_GPU_TEMP": 30, "DCGM_FI_DEV_POWER_USAGE": 70, "DCGM_FI_DEV_XID_ERRORS": 0},
		all[1]: {"DCGM_FI_DEV_GPU_UTIL": 0, "DCGM_FI_DEV_MEM_COPY_UTIL": 0, "DCGM_FI_DEV_FB_USED": 1, "DCGM_FI_DEV_FB_FREE": 81558,
			"DCGM_FI_DEV_GPU_TEMP": 31, "DCGM_FI_DEV_POWER_USAGE": 70, "DCGM_FI_DEV_XID_ERRORS": 0},
	}
	if len(got) != len(want) {
		t.Fatalf("Sample = %v, want %v", got, want)
	}
	for id, fields := range want {
		for k, v := range fields {
			if g, ok := got[id][k]; !ok || g != v {
				t.Errorf("%s %s = %v (present %v), want %v", id, k, g, ok, v)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Sample(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Sample with an ended ctx: %v, want context.Canceled", err)
	}
}

func TestClosed(t *testing.T) {
	g, err := nvml.Open("mock:dgxa100?count=1", nvml.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := ids(t, g)[0]
	if err := g.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := g.Sample(context.Background()); !errors.Is(err, nvml.ErrClosed) {
		t.Errorf("Sample after Close: %v, want ErrClosed", err)
	}
	if err := g.Watch(context.Background(), func([]*pluginapi.Device, string) {}); !errors.Is(err, nvml.ErrClosed) {
		t.Errorf("Watch after Close: %v, want ErrClosed", err)
	}
	if err := g.InjectXid(id, 79); !errors.Is(err, nvml.ErrClosed) {
		t.Errorf("InjectXid after Close: %v, want ErrClosed", err)
	}
	// Discovery's figures stay readable.
	if labels, _ := g.Describe(); labels["nvidia.com/gpu.count"] != "1" {
		t.Errorf("Describe after Close: %v", labels)
	}
}
