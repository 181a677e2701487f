package nvml

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// These tests reach into the simulated driver to make it fail the ways a
// real one can.

var quiet = Options{EventWait: 20 * time.Millisecond, Log: slog.New(slog.DiscardHandler)}

// simulated builds a simulation and lets the test change its devices
// before Open's discovery.
func simulated(t *testing.T, spec string, change func(s *server.Server, devs []*server.Device)) (*GPUs, error) {
	t.Helper()
	sim, err := newSimulation(spec)
	if err != nil {
		t.Fatal(err)
	}
	var devs []*server.Device
	for _, d := range sim.server.Devices {
		devs = append(devs, d.(*server.Device))
	}
	if change != nil {
		change(sim.server, devs)
	}
	g, err := open(spec, sim.server, sim, quiet)
	if err == nil {
		t.Cleanup(func() { g.Close() })
	}
	return g, err
}

func mustSimulated(t *testing.T, spec string, change func(s *server.Server, devs []*server.Device)) *GPUs {
	t.Helper()
	g, err := simulated(t, spec, change)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return g
}

// watchOnce runs Watch until its n-th update and returns the updates.
func watchOnce(t *testing.T, g *GPUs, n int) ([][]*pluginapi.Device, []string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var lists [][]*pluginapi.Device
	var whys []string
	err := g.Watch(ctx, func(devs []*pluginapi.Device, why string) {
		lists = append(lists, devs)
		whys = append(whys, why)
		if len(lists) == n {
			cancel()
		}
	})
	if len(lists) < n && err == nil {
		t.Fatalf("Watch ended after %d updates, want %d", len(lists), n)
	}
	return lists, whys, err
}

func TestInitFailures(t *testing.T) {
	tests := []struct {
		name      string
		ret       nvml.Return
		noLibrary bool
		noDevices bool
	}{
		{name: "no library", ret: nvml.ERROR_LIBRARY_NOT_FOUND, noLibrary: true},
		{name: "no kernel driver", ret: nvml.ERROR_DRIVER_NOT_LOADED, noDevices: true},
		{name: "other failure", ret: nvml.ERROR_UNKNOWN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lib := &mock.Interface{InitFunc: func() nvml.Return { return tt.ret }}
			_, err := open("nvml", lib, nil, quiet)
			if err == nil {
				t.Fatal("open succeeded")
			}
			if errors.Is(err, ErrNoLibrary) != tt.noLibrary || errors.Is(err, ErrNoDevices) != tt.noDevices {
				t.Errorf("open: %v; ErrNoLibrary %v ErrNoDevices %v, want %v %v", err,
					errors.Is(err, ErrNoLibrary), errors.Is(err, ErrNoDevices), tt.noLibrary, tt.noDevices)
			}
			if !errors.Is(err, tt.ret) || !strings.Contains(err.Error(), tt.ret.Error()) {
				t.Errorf("open: %v does not carry NVML's %v", err, tt.ret)
			}
			if len(lib.ShutdownCalls()) != 0 {
				t.Error("Shutdown called after a failed Init (it kills the process with the real library)")
			}
		})
	}
}

func TestDiscoveryLeavesOutUnreadableGPUs(t *testing.T) {
	lost := func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	g := mustSimulated(t, "mock:dgxh100?count=3", func(_ *server.Server, devs []*server.Device) {
		devs[1].GetUUIDFunc = lost
	})
	if g.Count() != 2 {
		t.Errorf("%d GPUs, want 2 (GPU 1 has no UUID)", g.Count())
	}
	_, anno := g.Describe()
	if _, ok := anno["actorlet.io/gpu-1"]; ok || anno["actorlet.io/gpu-2"] == "" {
		t.Errorf("annotations %v, want GPUs 0 and 2 under their NVML index", anno)
	}

	var srv *server.Server
	_, err := simulated(t, "mock:dgxh100?count=2", func(s *server.Server, devs []*server.Device) {
		srv = s
		for _, d := range devs {
			d.GetUUIDFunc = lost
		}
	})
	if !errors.Is(err, ErrNoDevices) {
		t.Errorf("no readable GPU: %v, want ErrNoDevices", err)
	}
	if len(srv.ShutdownCalls()) != 1 {
		t.Errorf("Shutdown called %d times after a failed discovery, want 1", len(srv.ShutdownCalls()))
	}

	_, err = simulated(t, "mock:dgxh100", func(s *server.Server, _ []*server.Device) { s.Devices = nil })
	if !errors.Is(err, ErrNoDevices) {
		t.Errorf("0 GPUs: %v, want ErrNoDevices", err)
	}
}

func TestMIGModes(t *testing.T) {
	g := mustSimulated(t, "mock:dgxa100?count=2", func(_ *server.Server, devs []*server.Device) {
		_, _ = devs[1].SetMigMode(nvml.DEVICE_MIG_ENABLE)
	})
	labels, anno := g.Describe()
	if !strings.HasSuffix(anno["actorlet.io/gpu-0"], ",mig=disabled") || !strings.HasSuffix(anno["actorlet.io/gpu-1"], ",mig=enabled") {
		t.Errorf("annotations %v, want GPU 0 mig=disabled, GPU 1 mig=enabled", anno)
	}
	if labels["nvidia.com/mig.capable"] != "true" {
		t.Errorf("mig.capable %q, want true", labels["nvidia.com/mig.capable"])
	}

	g = mustSimulated(t, "mock:dgxa100?count=1", func(_ *server.Server, devs []*server.Device) {
		devs[0].GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
	})
	if labels, _ := g.Describe(); labels["nvidia.com/mig.capable"] != "false" {
		t.Errorf("GPU without MIG: mig.capable %q, want false", labels["nvidia.com/mig.capable"])
	}
}

func TestWatchWithoutEvents(t *testing.T) {
	tests := []struct {
		name   string
		change func(s *server.Server, devs []*server.Device)
	}{
		{name: "no event set", change: func(s *server.Server, _ []*server.Device) {
			s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
		}},
		{name: "no supported event", change: func(_ *server.Server, devs []*server.Device) {
			for _, d := range devs {
				d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
			}
		}},
		{name: "only other events", change: func(_ *server.Server, devs []*server.Device) {
			for _, d := range devs {
				d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return nvml.EventTypePState, nvml.SUCCESS }
			}
		}},
		{name: "registration not supported", change: func(_ *server.Server, devs []*server.Device) {
			for _, d := range devs {
				d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustSimulated(t, "mock:dgxh100?count=2", tt.change)
			// Watch gives the list, then waits for its ctx: nil.
			lists, whys, err := watchOnce(t, g, 1)
			if err != nil {
				t.Fatalf("Watch: %v", err)
			}
			for _, d := range lists[0] {
				if d.Health != pluginapi.Healthy {
					t.Errorf("%s %s, want healthy (events not supported)", d.ID, d.Health)
				}
			}
			if whys[0] != "" {
				t.Errorf("why %q", whys[0])
			}
		})
	}
}

func TestWatchRegistrationFailureMarksGPU(t *testing.T) {
	g := mustSimulated(t, "mock:dgxh100?count=2", func(_ *server.Server, devs []*server.Device) {
		devs[0].RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.ERROR_GPU_IS_LOST }
	})
	lists, whys, err := watchOnce(t, g, 1)
	if err != nil {
		t.Fatal(err)
	}
	if lists[0][0].Health != pluginapi.Unhealthy || lists[0][1].Health != pluginapi.Healthy {
		t.Errorf("first list %v, want GPU 0 unhealthy only", lists[0])
	}
	if want := lists[0][0].ID + ": register for health events: ERROR_GPU_IS_LOST"; whys[0] != want {
		t.Errorf("why %q, want %q", whys[0], want)
	}
}

func TestWatchEventMachineryFails(t *testing.T) {
	t.Run("create", func(t *testing.T) {
		g := mustSimulated(t, "mock:dgxh100?count=1", func(s *server.Server, _ []*server.Device) {
			s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_UNKNOWN }
		})
		err := g.Watch(context.Background(), func([]*pluginapi.Device, string) {})
		if !errors.Is(err, nvml.ERROR_UNKNOWN) {
			t.Errorf("Watch: %v, want the NVML error", err)
		}
	})
	t.Run("wait", func(t *testing.T) {
		var freed bool
		g := mustSimulated(t, "mock:dgxh100?count=1", func(s *server.Server, _ []*server.Device) {
			s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
				return &mock.EventSet{
					WaitFunc: func(uint32) (nvml.EventData, nvml.Return) { return nvml.EventData{}, nvml.ERROR_UNKNOWN },
					FreeFunc: func() nvml.Return { freed = true; return nvml.SUCCESS },
				}, nvml.SUCCESS
			}
			for _, d := range s.Devices {
				d.(*server.Device).RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
			}
		})
		_, _, err := watchOnce(t, g, 2) // the first list, then the failed wait
		if !errors.Is(err, nvml.ERROR_UNKNOWN) || !strings.Contains(err.Error(), "wait for NVML events") {
			t.Errorf("Watch: %v, want the wait error", err)
		}
		if !freed {
			t.Error("event set not freed")
		}
	})
}

// scripted makes the GPUs' event set return these events, then time out.
func scripted(events ...nvml.EventData) func(s *server.Server, _ []*server.Device) {
	return func(s *server.Server, _ []*server.Device) {
		s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
			next := 0
			return &mock.EventSet{
				WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
					if next < len(events) {
						next++
						return events[next-1], nvml.SUCCESS
					}
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				},
				FreeFunc: func() nvml.Return { return nvml.SUCCESS },
			}, nvml.SUCCESS
		}
		for _, d := range s.Devices {
			d.(*server.Device).RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
		}
	}
}

func TestWatchEvents(t *testing.T) {
	noUUID := &mock.Device{GetUUIDFunc: func() (string, nvml.Return) { return "", nvml.ERROR_INVALID_ARGUMENT }}
	stranger := &mock.Device{GetUUIDFunc: func() (string, nvml.Return) { return "GPU-not-ours", nvml.SUCCESS }}
	tests := []struct {
		name    string
		events  func(devs []nvml.Device) []nvml.EventData
		updates int
		wantBad []int
		wantWhy string // after the UUID or "all GPUs"
	}{
		{name: "double-bit ECC", updates: 2, wantBad: []int{1}, wantWhy: ": double-bit ECC error",
			events: func(devs []nvml.Device) []nvml.EventData {
				return []nvml.EventData{{Device: devs[1], EventType: nvml.EventTypeDoubleBitEccError}}
			}},
		{name: "a GPU without UUID: all", updates: 2, wantBad: []int{0, 1}, wantWhy: "all GPUs: Xid 79 (GPU has fallen off the bus)",
			events: func([]nvml.Device) []nvml.EventData {
				return []nvml.EventData{{Device: noUUID, EventType: nvml.EventTypeXidCriticalError, EventData: 79}}
			}},
		{name: "other GPUs and types ignored", updates: 2, wantBad: []int{0}, wantWhy: ": Xid 31337",
			events: func(devs []nvml.Device) []nvml.EventData {
				return []nvml.EventData{
					{Device: stranger, EventType: nvml.EventTypeXidCriticalError, EventData: 79},
					{Device: devs[1], EventType: nvml.EventTypePState},
					{Device: devs[1], EventType: nvml.EventTypeXidCriticalError, EventData: 109},
					{Device: devs[0], EventType: nvml.EventTypeXidCriticalError, EventData: 31337},
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var evs []nvml.EventData
			g := mustSimulated(t, "mock:dgxh100?count=2", func(s *server.Server, devs []*server.Device) {
				evs = tt.events(s.Devices)
				scripted(evs...)(s, devs)
			})
			lists, whys, err := watchOnce(t, g, tt.updates)
			if err != nil {
				t.Fatal(err)
			}
			last := lists[len(lists)-1]
			var bad []int
			for i, d := range last {
				if d.Health == pluginapi.Unhealthy {
					bad = append(bad, i)
				}
			}
			if len(bad) != len(tt.wantBad) || (len(bad) > 0 && bad[0] != tt.wantBad[0]) {
				t.Errorf("unhealthy %v, want %v", bad, tt.wantBad)
			}
			if why := whys[len(whys)-1]; !strings.HasSuffix(why, tt.wantWhy) {
				t.Errorf("why %q, want it to end %q", why, tt.wantWhy)
			}
		})
	}
}

func TestSampleLeavesOutFailedQueries(t *testing.T) {
	g := mustSimulated(t, "mock:dgxa100?count=1", func(_ *server.Server, devs []*server.Device) {
		devs[0].GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		devs[0].GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST }
	})
	s, err := g.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := s[g.gpus[0].uuid]
	for _, k := range []string{MetricGPUTemp, MetricGPUUtil, MetricMemCopyUtil} {
		if _, ok := m[k]; ok {
			t.Errorf("%s present after its query failed: %v", k, m)
		}
	}
	if m[MetricPowerUsage] != 55 || m[MetricFBFree] != 40959 {
		t.Errorf("sample %v, want power 55 W and 40959 MiB free", m)
	}
}

func TestNormalizeBusID(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{name: "NVML form", in: "00000000:1B:00.0", want: "0000:1b:00.0"},
		{name: "legacy form", in: "0000:1B:00.0", want: "0000:1b:00.0"},
		{name: "empty", in: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := normalizeBusID(tt.in); got != tt.want {
				t.Errorf("normalizeBusID(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestLabelValue(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{name: "spaces", in: "NVIDIA H100 80GB HBM3", want: "NVIDIA-H100-80GB-HBM3"},
		{name: "odd characters", in: "Tesla (R) K80/2", want: "Tesla-_R_-K80_2"},
		{name: "ends", in: " -DGX- ", want: "DGX"},
		{name: "long", in: strings.Repeat("a", 70), want: strings.Repeat("a", 63)},
		{name: "empty", in: "", want: "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := labelValue(tt.in, "unknown"); got != tt.want {
				t.Errorf("labelValue(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
