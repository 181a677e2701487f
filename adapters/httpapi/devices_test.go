package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/messages"
)

func TestDevicesView(t *testing.T) {
	var faults []string
	e := setup(t, func(c *Config) {
		c.Devices = c.System.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			switch m := ctx.Message().(type) {
			case *messages.GetDeviceCapacity:
				ctx.Respond(&messages.DeviceCapacity{Capacity: map[v1.ResourceName]int64{"nvidia.com/gpu": 2},
					Allocatable: map[v1.ResourceName]int64{"nvidia.com/gpu": 1}, Labels: map[string]string{"nvidia.com/gpu.count": "2"}, Ready: true})
			case *messages.GetAllocatableDevices:
				ctx.Respond(&messages.AllocatableDevices{Devices: map[v1.ResourceName][]string{"nvidia.com/gpu": {"GPU-a"}}})
			case *messages.GetPodDevices:
				ctx.Respond(&messages.PodDevicesList{Pods: []messages.PodDevices{{UID: "u1", Namespace: "default", Name: "train",
					Containers: map[string]map[v1.ResourceName][]string{"main": {"nvidia.com/gpu": {"GPU-a"}}}}}})
			case *messages.InjectDeviceFault:
				if m.DeviceID != "GPU-a" {
					ctx.Respond(&messages.DeviceFaultInjected{Err: "no simulated device " + m.DeviceID})
					return
				}
				faults = append(faults, m.DeviceID)
				ctx.Respond(&messages.DeviceFaultInjected{})
			}
		}))
	})
	code, body, _ := do(t, e.srv.ReadOnly(), "GET", "/devices", "")
	if code != http.StatusOK {
		t.Fatalf("GET /devices: %d %s", code, body)
	}
	var view DevicesView
	if err := json.Unmarshal([]byte(body), &view); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if view.Capacity["nvidia.com/gpu"] != 2 || view.Allocatable["nvidia.com/gpu"] != 1 || len(view.Healthy["nvidia.com/gpu"]) != 1 ||
		len(view.Pods) != 1 || view.Pods[0].Containers["main"]["nvidia.com/gpu"][0] != "GPU-a" || view.Labels["nvidia.com/gpu.count"] != "2" {
		t.Fatalf("view %+v", view)
	}
	if code, _, _ := do(t, e.srv.ReadOnly(), "POST", "/devices/fault?device=GPU-a&xid=79", ""); code == http.StatusOK {
		t.Fatal("fault injection served on the read-only port")
	}
	for _, tt := range []struct {
		name, query string
		code        int
	}{
		{"injected", "device=GPU-a&xid=79", http.StatusOK},
		{"no such simulated device", "device=GPU-z&xid=79", http.StatusBadRequest},
		{"bad xid", "device=GPU-a&xid=x", http.StatusBadRequest},
		{"no device", "xid=79", http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body, _ := do(t, e.srv.Main(), "POST", "/devices/fault?"+tt.query, "")
			if code != tt.code {
				t.Fatalf("%d %s, want %d", code, body, tt.code)
			}
			if code != http.StatusOK && !strings.Contains(body, "device fault") {
				t.Fatalf("error body %q does not say what failed", body)
			}
		})
	}
	if len(faults) != 1 {
		t.Fatalf("faults injected: %v", faults)
	}
}

func TestDevicesNotServedWithoutTheActor(t *testing.T) {
	e := setup(t, nil)
	if code, _, _ := do(t, e.srv.ReadOnly(), "GET", "/devices", ""); code != http.StatusNotFound {
		t.Fatalf("GET /devices without a devices actor: %d, want 404", code)
	}
}
