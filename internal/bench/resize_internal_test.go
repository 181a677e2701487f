package bench

import (
	"encoding/json"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// donePod is a pod whose container "main" shows s as done.
func donePod(s resizeStep) *v1.Pod {
	req := s.requirements()
	return &v1.Pod{Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{
		Name:               "main",
		State:              v1.ContainerState{Running: &v1.ContainerStateRunning{}},
		AllocatedResources: req.Requests,
		Resources:          &req,
	}}}}
}

func TestResizeDone(t *testing.T) {
	s := resizeSteps[1]
	if ok, why := resizeDone(donePod(s), s); !ok {
		t.Fatalf("a pod showing the resize is not done: %s", why)
	}
	tests := []struct {
		name   string
		change func(p *v1.Pod)
		why    string
	}{
		{"pending", func(p *v1.Pod) {
			p.Status.Conditions = []v1.PodCondition{{Type: resizeCondPending, Status: v1.ConditionTrue, Reason: "Deferred"}}
		}, "condition PodResizePending (Deferred"},
		{"in progress", func(p *v1.Pod) {
			p.Status.Conditions = []v1.PodCondition{{Type: resizeCondInProgress, Status: v1.ConditionTrue}}
		}, "condition PodResizeInProgress"},
		{"old allocation", func(p *v1.Pod) {
			p.Status.ContainerStatuses[0].AllocatedResources = resizeSteps[0].requirements().Requests
		}, "allocatedResources cpu 10m, want 15m"},
		{"no status resources", func(p *v1.Pod) { p.Status.ContainerStatuses[0].Resources = nil }, "status resources missing"},
		{"old limit", func(p *v1.Pod) {
			p.Status.ContainerStatuses[0].Resources.Limits[v1.ResourceMemory] = resource.MustParse("64Mi")
		}, "status limits memory 64Mi, want 96Mi"},
		{"not running", func(p *v1.Pod) { p.Status.ContainerStatuses[0].State = v1.ContainerState{} }, "not running"},
		{"no container", func(p *v1.Pod) { p.Status.ContainerStatuses = nil }, "no status of container main"},
	}
	for _, tc := range tests {
		p := donePod(s)
		tc.change(p)
		ok, why := resizeDone(p, s)
		if ok || !strings.Contains(why, tc.why) {
			t.Errorf("%s: done=%v %q, want not done %q", tc.name, ok, why, tc.why)
		}
	}
	// A CPU request read back from cgroup shares rounds by a millicore.
	p := donePod(s)
	p.Status.ContainerStatuses[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("14m")
	if ok, why := resizeDone(p, s); !ok {
		t.Errorf("14m for 15m: %s", why)
	}
	p.Status.ContainerStatuses[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("10m")
	if ok, _ := resizeDone(p, s); ok {
		t.Error("10m for 15m counted as done")
	}
}

func TestResizePatchAndPod(t *testing.T) {
	var got struct {
		Spec v1.PodSpec `json:"spec"`
	}
	if err := json.Unmarshal(resizeSteps[2].patch(), &got); err != nil {
		t.Fatal(err)
	}
	c := got.Spec.Containers[0]
	if c.Name != "main" || c.Resources.Requests.Cpu().String() != "12m" || c.Resources.Limits.Memory().String() != "80Mi" {
		t.Fatalf("patch: %+v", c)
	}
	p := resizePod("x", "n", "img", true)
	if p.Spec.NodeName != "n" || len(p.Spec.Containers[0].ResizePolicy) != 2 || *p.Spec.AutomountServiceAccountToken {
		t.Fatalf("pod: %+v", p.Spec)
	}
	for _, rp := range p.Spec.Containers[0].ResizePolicy {
		if rp.RestartPolicy != v1.NotRequired {
			t.Fatalf("resize policy %+v", rp)
		}
	}
	// Every step keeps the pod Burstable with limits above requests.
	for i, s := range resizeSteps {
		r := s.requirements()
		if r.Requests.Cpu().Cmp(*r.Limits.Cpu()) >= 0 || r.Requests.Memory().Cmp(*r.Limits.Memory()) >= 0 {
			t.Errorf("step %d: %+v", i, s)
		}
	}
}

func TestResizeOptions(t *testing.T) {
	bad := []struct {
		o   Options
		err string
	}{
		{Options{Scenario: ScenarioResize, ResizeAgent: "kubelet"}, "--resize-agent"},
		{Options{Scenario: ScenarioResize, ResizeRuntime: "crio"}, "--resize-runtime"},
		{Options{Scenario: ScenarioResize, ResizeRounds: -1}, "--resize-rounds"},
		{Options{Scenario: ScenarioResize, Endpoint: "https://127.0.0.1:1"}, "--endpoint"},
		{Options{Scenario: ScenarioStandaloneSim, ResizeRounds: 2}, "are for --scenario resize"},
	}
	for _, tc := range bad {
		tc.o.Binary = "/bin/true"
		if err := tc.o.defaults(); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.err)
		}
	}
	o := Options{Scenario: ScenarioResize, ResizeAgent: "upstream", Binary: "/bin/true"}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.Pods != 100 || o.ResizeRounds != 2 || o.ResizeAgent != AgentUpstream || o.ResizeRuntime != ResizeRuntimeSim || o.ResizeTimeout.Seconds() != 60 || o.APIQPS != 50 {
		t.Fatalf("defaults: %+v", o)
	}
}
