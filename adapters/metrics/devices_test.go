package metrics

import (
	"strings"
	"testing"
)

func TestDeviceSamplesFollowTheirOwner(t *testing.T) {
	r := New()
	r.SetDeviceSample("nvidia.com/gpu", "GPU-1", "", "", "", map[string]float64{"DCGM_FI_DEV_GPU_UTIL": 0, "DCGM_FI_DEV_FB_USED": 0, "not_dcgm": 3})
	r.SetDeviceSample("nvidia.com/gpu", "GPU-1", "default", "train", "main", map[string]float64{"DCGM_FI_DEV_GPU_UTIL": 87, "DCGM_FI_DEV_FB_USED": 40960})
	r.SetDevices("nvidia.com/gpu", 8, 7, 1)
	r.IncDeviceUnhealthy("nvidia.com/gpu")
	lines := strings.Split(scrape(t, r), "\n")
	for _, want := range []string{
		`DCGM_FI_DEV_GPU_UTIL{UUID="GPU-1",container="main",namespace="default",pod="train",resource="nvidia.com/gpu"} 87`,
		`DCGM_FI_DEV_FB_USED{UUID="GPU-1",container="main",namespace="default",pod="train",resource="nvidia.com/gpu"} 40960`,
		`actorlet_devices{resource="nvidia.com/gpu",state="allocatable"} 7`,
		`actorlet_devices{resource="nvidia.com/gpu",state="allocated"} 1`,
		`actorlet_devices{resource="nvidia.com/gpu",state="capacity"} 8`,
		`actorlet_device_unhealthy_total{resource="nvidia.com/gpu"} 1`,
	} {
		if !hasLine(lines, want) {
			t.Errorf("no line %s", want)
		}
	}
	for _, l := range lines {
		if strings.Contains(l, `pod=""`) || strings.Contains(l, "not_dcgm") {
			t.Errorf("stale or unknown series: %s", l)
		}
	}
	r.DeleteDeviceSample("nvidia.com/gpu", "GPU-1")
	if out := scrape(t, r); strings.Contains(out, `UUID="GPU-1"`) {
		t.Fatal("series left after the device went")
	}
}
