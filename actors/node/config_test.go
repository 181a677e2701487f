package node

import (
	goruntime "runtime"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestConfigDefaults(t *testing.T) {
	got := Config{}.withDefaults()
	if got.HousekeepingPeriod != DefaultHousekeepingPeriod || got.DeviceWait != DefaultDeviceWait ||
		got.RespawnBackoff != DefaultRespawnBackoff || got.RespawnBackoffMax != DefaultRespawnBackoffMax {
		t.Errorf("defaults: housekeeping %s, device wait %s, respawn %s..%s", got.HousekeepingPeriod, got.DeviceWait,
			got.RespawnBackoff, got.RespawnBackoffMax)
	}
	if got.Clock == nil {
		t.Error("no clock by default")
	}
	if got.NodeLabels[v1.LabelOSStable] != goruntime.GOOS {
		t.Errorf("labels %v: want %s=%s", got.NodeLabels, v1.LabelOSStable, goruntime.GOOS)
	}
}

func TestConfigDefaultsKeepWhatIsSet(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	labels := map[string]string{v1.LabelOSStable: "plan9", "disk": "ssd"}
	in := Config{HousekeepingPeriod: time.Second, DeviceWait: 2 * time.Second, Clock: clk,
		RespawnBackoff: 3 * time.Second, RespawnBackoffMax: 4 * time.Second, NodeLabels: labels}
	got := in.withDefaults()
	if got.HousekeepingPeriod != time.Second || got.DeviceWait != 2*time.Second || got.Clock != clk ||
		got.RespawnBackoff != 3*time.Second || got.RespawnBackoffMax != 4*time.Second {
		t.Errorf("a set knob was changed: %+v", got)
	}
	if got.NodeLabels[v1.LabelOSStable] != "plan9" || got.NodeLabels["disk"] != "ssd" {
		t.Errorf("labels %v, want the configured ones", got.NodeLabels)
	}
}

// The caller's labels are not written when the OS label is added.
func TestConfigDefaultsCopyTheLabels(t *testing.T) {
	labels := map[string]string{"disk": "ssd"}
	got := Config{NodeLabels: labels}.withDefaults()
	if _, ok := labels[v1.LabelOSStable]; ok {
		t.Fatal("the caller's map was written")
	}
	if got.NodeLabels[v1.LabelOSStable] != goruntime.GOOS || got.NodeLabels["disk"] != "ssd" {
		t.Fatalf("labels %v", got.NodeLabels)
	}
}

// A back-off cap under the first delay is raised: the default cap, or the
// first delay when that is longer.
func TestConfigDefaultsRespawnCap(t *testing.T) {
	for _, tc := range []struct {
		base, cap, want time.Duration
	}{
		{base: time.Second, cap: 0, want: DefaultRespawnBackoffMax},
		{base: time.Second, cap: time.Millisecond, want: DefaultRespawnBackoffMax},
		{base: time.Hour, cap: time.Minute, want: time.Hour},
		{base: time.Second, cap: time.Hour, want: time.Hour},
	} {
		got := Config{RespawnBackoff: tc.base, RespawnBackoffMax: tc.cap}.withDefaults()
		if got.RespawnBackoffMax != tc.want {
			t.Errorf("base %s cap %s: cap %s, want %s", tc.base, tc.cap, got.RespawnBackoffMax, tc.want)
		}
	}
}

type desiredMetrics struct{ static, api int }

func (m *desiredMetrics) SetDesiredPods(static bool, n int) {
	if static {
		m.static = n
	} else {
		m.api = n
	}
}

func TestSettings(t *testing.T) {
	props := func(types.UID) *actor.Props { return nil }
	status := actor.NewPID("local", "status")
	m := &desiredMetrics{}
	s := newSettings(Config{NodeName: "n1"}, status, props, m, nil)
	if s.log == nil || s.NodeName != "n1" || s.HousekeepingPeriod != DefaultHousekeepingPeriod || s.status != status {
		t.Fatalf("settings %+v", s)
	}
	if s.devicesWired() {
		t.Error("devices wired without a DevicesActor")
	}
	s.reportDesired(3, 4)
	if m.static != 3 || m.api != 4 {
		t.Errorf("desired pods reported %+v, want static 3, api 4", *m)
	}
	noMetrics := newSettings(Config{Devices: actor.NewPID("local", "devices")}, status, props, nil, nil)
	noMetrics.reportDesired(1, 1) // no metrics: nothing to call
	if !noMetrics.devicesWired() {
		t.Error("devices not wired with a DevicesActor")
	}
}

// Missing wiring is refused at wiring time, by New.
func TestNewRefusesMissingWiring(t *testing.T) {
	props := func(types.UID) *actor.Props { return nil }
	for name, f := range map[string]func(){
		"no status":    func() { New(Config{}, nil, props, nil, nil) },
		"no pod props": func() { New(Config{}, actor.NewPID("local", "status"), nil, nil, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f()
		})
	}
}
