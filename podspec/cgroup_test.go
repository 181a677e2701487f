package podspec

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestCgroupParentDrivers(t *testing.T) {
	const uid = "2a6b3c1e-90f4-4d2b-8c1a-5e7f00aa11bb"
	uidU := strings.ReplaceAll(uid, "-", "_")
	guaranteed := v1.ResourceRequirements{Requests: res("500m", "64Mi"), Limits: res("500m", "64Mi")}
	burstable := v1.ResourceRequirements{Requests: res("100m", "")}
	tests := []struct {
		name   string
		req    v1.ResourceRequirements
		driver CgroupDriver
		want   string
	}{
		{name: "cgroupfs guaranteed", req: guaranteed, driver: CgroupDriverCgroupfs, want: "/kubepods/pod" + uid},
		{name: "cgroupfs burstable", req: burstable, driver: CgroupDriverCgroupfs, want: "/kubepods/burstable/pod" + uid},
		{name: "cgroupfs best effort", driver: CgroupDriverCgroupfs, want: "/kubepods/besteffort/pod" + uid},
		{name: "unset driver is cgroupfs", req: burstable, want: "/kubepods/burstable/pod" + uid},
		{name: "systemd guaranteed", req: guaranteed, driver: CgroupDriverSystemd,
			want: "/kubepods.slice/kubepods-pod" + uidU + ".slice"},
		{name: "systemd burstable", req: burstable, driver: CgroupDriverSystemd,
			want: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice"},
		{name: "systemd best effort", driver: CgroupDriverSystemd,
			want: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uidU + ".slice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := podWith(nil, tt.req)
			p.UID = uid
			if got := CgroupParent(p, tt.driver); got != tt.want {
				t.Errorf("CgroupParent = %s, want %s", got, tt.want)
			}
			if got := SandboxConfig(p, 0, "/var/log/pods", WithCgroupDriver(tt.driver)).Linux.CgroupParent; got != tt.want {
				t.Errorf("sandbox cgroup parent = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestParseCgroupDriver(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    CgroupDriver
		wantErr bool
	}{
		{name: "cgroupfs", in: "cgroupfs", want: CgroupDriverCgroupfs},
		{name: "systemd", in: "systemd", want: CgroupDriverSystemd},
		{name: "empty is cgroupfs", in: "", want: CgroupDriverCgroupfs},
		{name: "anything else", in: "Systemd", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCgroupDriver(tt.in)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "--cgroup-driver") {
					t.Fatalf("err %v, want one naming --cgroup-driver", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestRuntimeCgroupDriver(t *testing.T) {
	linux := func(d runtimeapi.CgroupDriver) *runtimeapi.LinuxRuntimeConfiguration {
		return &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: d}
	}
	tests := []struct {
		name     string
		flag     CgroupDriver
		runtime  *runtimeapi.LinuxRuntimeConfiguration
		want     CgroupDriver
		wantWarn bool
		wantErr  bool
	}{
		{name: "the runtime does not tell: the flag", flag: CgroupDriverSystemd, want: CgroupDriverSystemd},
		{name: "they agree", flag: CgroupDriverCgroupfs, runtime: linux(runtimeapi.CgroupDriver_CGROUPFS), want: CgroupDriverCgroupfs},
		{name: "they differ: the runtime's, with a warning", flag: CgroupDriverCgroupfs, runtime: linux(runtimeapi.CgroupDriver_SYSTEMD),
			want: CgroupDriverSystemd, wantWarn: true},
		{name: "unknown driver", flag: CgroupDriverCgroupfs, runtime: linux(runtimeapi.CgroupDriver(7)), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, warn, err := RuntimeCgroupDriver(tt.flag, tt.runtime)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want || (warn != "") != tt.wantWarn {
				t.Fatalf("got %q, warning %q; want %q, a warning %v", got, warn, tt.want, tt.wantWarn)
			}
		})
	}
}
