package main

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	adapterscgroup "github.com/actorlet/actorlet/adapters/cgroup"
	"github.com/actorlet/actorlet/runtimes/sim"
)

// The cgroup fields of a KubeletConfiguration set the options (upstream
// names), are no longer named as not implemented, and the flags beat them.
func TestCgroupConfigFields(t *testing.T) {
	o, ignored, err := loadConfig(t, writeConfig(t, configHeader+`cgroupsPerQOS: false
cgroupRoot: /actorlet-x
enforceNodeAllocatable: []
systemReservedCgroup: /system.slice
kubeReservedCgroup: /kube.slice
podPidsLimit: 512
cpuCFSQuota: false
cpuCFSQuotaPeriod: 50ms
failCgroupV1: false
`), "--pod-max-pids", "100")
	if err != nil {
		t.Fatal(err)
	}
	if len(ignored) != 0 {
		t.Errorf("cgroup fields named as not implemented: %v", ignored)
	}
	c := o.cgroupOptions
	if c.CgroupsPerQOS || c.CgroupRoot != "/actorlet-x" || len(c.EnforceNodeAllocatable) != 0 || c.SystemReservedCgroup != "/system.slice" ||
		c.KubeReservedCgroup != "/kube.slice" || c.PodMaxPids != 100 || c.CPUCFSQuota || c.CPUCFSQuotaPeriod != 50*time.Millisecond || c.FailCgroupV1 {
		t.Errorf("options from the file: %+v", c)
	}
	if errs := o.validateCgroups(); len(errs) > 0 {
		t.Errorf("valid file refused: %v", errs)
	}
	eff := o.effectiveKubeletConfig()
	if *eff.PodPidsLimit != 100 || *eff.CgroupsPerQOS || *eff.FailCgroupV1 || eff.CPUCFSQuotaPeriod.Duration != 50*time.Millisecond {
		t.Errorf("/configz: podPidsLimit %d cgroupsPerQOS %v failCgroupV1 %v period %v", *eff.PodPidsLimit, *eff.CgroupsPerQOS, *eff.FailCgroupV1, eff.CPUCFSQuotaPeriod)
	}
	// v1beta1's defaults: failCgroupV1 true since v1.35, pods enforced.
	o, _, err = loadConfig(t, writeConfig(t, configHeader))
	if err != nil {
		t.Fatal(err)
	}
	if !o.FailCgroupV1 || !o.CgroupsPerQOS || !slices.Equal(o.EnforceNodeAllocatable, []string{"pods"}) || o.PodMaxPids != -1 ||
		!o.CPUCFSQuota || o.CPUCFSQuotaPeriod != 100*time.Millisecond {
		t.Errorf("v1beta1 defaults: %+v", o.cgroupOptions)
	}
}

func TestCgroupFlagDefaultsAndValidation(t *testing.T) {
	o := defaultOptions()
	if !o.FailCgroupV1 || !o.CgroupsPerQOS || !slices.Equal(o.EnforceNodeAllocatable, []string{"pods"}) {
		t.Errorf("flag defaults: %+v", o.cgroupOptions)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--cgroups-per-qos=false"}, `cgroupsPerQOS (--cgroups-per-qos) must be set to true when "pods" contained in enforceNodeAllocatable`},
		{[]string{"--enforce-node-allocatable=pods,system-reserved"}, "systemReservedCgroup (--system-reserved-cgroup) must be specified"},
		{[]string{"--enforce-node-allocatable=kube-reserved"}, "kubeReservedCgroup (--kube-reserved-cgroup) must be specified"},
		{[]string{"--enforce-node-allocatable=pods,bogus"}, `option "bogus" specified for enforceNodeAllocatable`},
		{[]string{"--cpu-cfs-quota-period=2s"}, "must be between 1ms and 1sec"},
		{[]string{"--pod-max-pids=-5"}, "--pod-max-pids must be -1"},
		{[]string{"--cgroup-root=relative"}, "must be an absolute cgroup path"},
		{[]string{"--cgroup-driver=systemd", "--cgroup-root=/actorlet"}, "it must be a slice"},
		{[]string{"--system-reserved-cgroup=system.slice", "--enforce-node-allocatable=system-reserved"}, "must be an absolute cgroup name"},
		{[]string{"--system-reserved=pid=1000,cpu=bad"}, `cpu="bad"`},
	} {
		o := defaultOptions()
		fs := pflag.NewFlagSet("actorlet", pflag.ContinueOnError)
		o.addFlags(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		err := o.validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.args, err, tt.want)
		}
	}
	o = defaultOptions()
	fs := pflag.NewFlagSet("actorlet", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse([]string{"--cgroups-per-qos=false", "--enforce-node-allocatable=", "--system-reserved=pid=1000"}); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Errorf("cgroups-per-qos off without enforcement refused: %v", err)
	}
}

// failCgroupV1 as upstream: on a cgroup v1 host the agent that would
// manage real cgroups refuses to start with upstream's message; off, or
// on a v2 host, it starts.
func TestFailCgroupV1(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	if err := checkCgroupV1(false, log); err != nil {
		t.Errorf("--fail-cgroupv1=false refused: %v", err)
	}
	err := checkCgroupV1(true, log)
	h, herr := adapterscgroup.DetectHost("")
	if herr != nil {
		t.Fatal(herr)
	}
	if h.Version == 2 {
		if err != nil {
			t.Errorf("cgroup v2 host refused: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "kubelet is configured to not run on a host using cgroup v1") {
		t.Errorf("cgroup v1 host: %v", err)
	}
}

// The sim runtime manages no host cgroups: failCgroupV1 does not refuse
// it, and until it has a cgroup tree the agent runs without a CgroupActor
// (named at start).
func TestSimRuntimeCgroupPlan(t *testing.T) {
	o := defaultOptions()
	o.RootDir = t.TempDir()
	rt := &runtimeConn{sim: sim.New(sim.Config{})}
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(io.MultiWriter(&logs), nil))
	plan, err := planCgroups(context.Background(), o, rt, "cgroupfs", log)
	if err != nil {
		t.Fatalf("sim runtime refused: %v", err)
	}
	if plan != nil {
		if plan.cfg.Manager == nil {
			t.Fatal("a plan without a Manager")
		}
		return // the sim's cgroup tree is wired
	}
	if !strings.Contains(logs.String(), "pod cgroups are not managed") {
		t.Errorf("unmanaged pod cgroups not named at start: %s", logs.String())
	}
}
