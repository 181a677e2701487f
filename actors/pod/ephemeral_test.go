package pod

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/podspec"
)

func withEphemeral(pod *v1.Pod, names ...string) *v1.Pod {
	for _, n := range names {
		c := specCtr(n)
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, v1.EphemeralContainer{
			EphemeralContainerCommon: v1.EphemeralContainerCommon(c),
		})
	}
	return pod
}

// TestComputeStatusEphemeral checks ephemeralContainerStatuses as upstream
// shows them: the default waiting reason before the container exists, then
// its state; never ready, no started field; the pod's phase and readiness
// do not depend on them.
func TestComputeStatusEphemeral(t *testing.T) {
	app, init1 := specCtr("app"), specCtr("init1")
	always := v1.RestartPolicyAlways
	tests := []struct {
		name      string
		pod       *v1.Pod
		rt        *rtFixture
		ephemeral map[string]string // describeContainer by name
		phase     v1.PodPhase
		ready     v1.ConditionStatus
	}{
		{
			name:      "not started yet: ContainerCreating",
			pod:       withEphemeral(specPod(always, nil, app), "debugger"),
			rt:        newRT().sandbox("sb0", 0, true).running("sb0", "app", 0),
			ephemeral: map[string]string{"debugger": "waiting:ContainerCreating"},
			phase:     v1.PodRunning, ready: v1.ConditionTrue,
		},
		{
			name:      "not started yet in a pod with init containers: PodInitializing",
			pod:       withEphemeral(specPod(always, []v1.Container{init1}, app), "debugger"),
			rt:        newRT().sandbox("sb0", 0, true).exited("sb0", "init1", 0, 0, time.Minute).running("sb0", "app", 0),
			ephemeral: map[string]string{"debugger": "waiting:PodInitializing"},
			phase:     v1.PodRunning, ready: v1.ConditionTrue,
		},
		{
			name:      "running: not ready, not counted for the pod",
			pod:       withEphemeral(specPod(always, nil, app), "debugger"),
			rt:        newRT().sandbox("sb0", 0, true).running("sb0", "app", 0).running("sb0", "debugger", 0),
			ephemeral: map[string]string{"debugger": "running"},
			phase:     v1.PodRunning, ready: v1.ConditionTrue,
		},
		{
			name: "exited: terminated, the pod stays Running and ready",
			pod:  withEphemeral(specPod(always, nil, app), "debugger", "second"),
			rt: newRT().sandbox("sb0", 0, true).running("sb0", "app", 0).exited("sb0", "debugger", 0, 1, time.Second).
				running("sb0", "second", 0),
			ephemeral: map[string]string{"debugger": "terminated:Error(1)", "second": "running"},
			phase:     v1.PodRunning, ready: v1.ConditionTrue,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := computeStatus(statusInput{pod: tt.pod, snap: tt.rt.snap, runtimeName: "containerd", now: fixtureNow})
			if len(st.EphemeralContainerStatuses) != len(tt.ephemeral) {
				t.Fatalf("%d ephemeral statuses, want %d", len(st.EphemeralContainerStatuses), len(tt.ephemeral))
			}
			for i, cs := range st.EphemeralContainerStatuses {
				if cs.Name != tt.pod.Spec.EphemeralContainers[i].Name {
					t.Errorf("status %d is %s, want the spec's order", i, cs.Name)
				}
				if got := describeContainer(cs); got != tt.ephemeral[cs.Name] {
					t.Errorf("ephemeral %s: %q, want %q", cs.Name, got, tt.ephemeral[cs.Name])
				}
				if cs.Started != nil || cs.Ready {
					t.Errorf("ephemeral %s: started %v ready %v, want unset and false", cs.Name, cs.Started, cs.Ready)
				}
			}
			if st.Phase != tt.phase {
				t.Errorf("phase = %s, want %s", st.Phase, tt.phase)
			}
			if c, _ := findCondition(st, v1.PodReady); c.Status != tt.ready {
				t.Errorf("Ready = %s, want %s", c.Status, tt.ready)
			}
		})
	}
}

// TestComputeStatusSetupFailed: a failed mount shows the pod's default
// waiting reason (PodInitializing in a pod with init containers) with why.
func TestComputeStatusSetupFailed(t *testing.T) {
	app, init1 := specCtr("app"), specCtr("init1")
	always := v1.RestartPolicyAlways
	tests := []struct {
		name string
		pod  *v1.Pod
		want string
	}{
		{name: "no init containers", pod: specPod(always, nil, app), want: ReasonContainerCreating},
		{name: "with init containers", pod: specPod(always, []v1.Container{init1}, app), want: ReasonPodInitializing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			waits := map[string]waitInfo{}
			for _, c := range append(append([]v1.Container{}, tt.pod.Spec.InitContainers...), tt.pod.Spec.Containers...) {
				waits[c.Name] = waitInfo{reason: ReasonContainerCreating, message: "FailedMount: no such secret"}
			}
			st := computeStatus(statusInput{pod: tt.pod, snap: newRT().sandbox("sb0", 0, true).snap, waits: waits, now: fixtureNow})
			for _, cs := range append(st.InitContainerStatuses, st.ContainerStatuses...) {
				if w := cs.State.Waiting; w == nil || w.Reason != tt.want || w.Message != "FailedMount: no such secret" {
					t.Errorf("%s waiting = %+v, want %s with the message", cs.Name, w, tt.want)
				}
			}
		})
	}
}

// TestPlanEphemeral checks when an ephemeral container is started: once,
// before init containers, never again once it ran, joining its target's
// process namespace.
func TestPlanEphemeral(t *testing.T) {
	app, init1 := specCtr("app"), specCtr("init1")
	always, never := v1.RestartPolicyAlways, v1.RestartPolicyNever
	targeted := withEphemeral(specPod(always, nil, app), "debugger")
	targeted.Spec.EphemeralContainers[0].TargetContainerName = "app"
	tests := []struct {
		name   string
		pod    *v1.Pod
		rt     *rtFixture
		want   planWant
		target string
	}{
		{
			name: "added to a running pod: started",
			pod:  withEphemeral(specPod(always, nil, app), "debugger"),
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "app", 0),
			want: planWant{kind: actStartContainer, container: "debugger"},
		},
		{
			name: "started before a blocked init container",
			pod:  withEphemeral(specPod(always, []v1.Container{init1}, app), "debugger"),
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "init1", 0),
			want: planWant{kind: actStartContainer, container: "debugger"},
		},
		{
			name: "running: nothing to do",
			pod:  withEphemeral(specPod(always, nil, app), "debugger"),
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "app", 0).running("sb0", "debugger", 0),
			want: planWant{kind: actNone},
		},
		{
			name: "exited with an error: never restarted, even with restartPolicy Always",
			pod:  withEphemeral(specPod(always, nil, app), "debugger"),
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "app", 0).exited("sb0", "debugger", 0, 1, time.Hour),
			want: planWant{kind: actNone},
		},
		{
			name: "created, not started: started",
			pod:  withEphemeral(specPod(never, nil, app), "debugger"),
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "app", 0).created("sb0", "debugger", 0),
			want: planWant{kind: actStartContainer, container: "debugger", createdID: "sb0-debugger-0"},
		},
		{
			name:   "with a target: joins the target's process namespace",
			pod:    targeted,
			rt:     newRT().sandbox("sb0", 0, true).running("sb0", "app", 0),
			want:   planWant{kind: actStartContainer, container: "debugger"},
			target: "sb0-app-0",
		},
		{
			name: "a running main container is not touched",
			pod:  withEphemeral(specPod(always, nil, app), "debugger"),
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "app", 0).set(withHash(podspec.ContainerHash(&app))).running("sb0", "debugger", 0),
			want: planWant{kind: actNone},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planner{pod: tt.pod, snap: tt.rt.snap, sandboxOf: tt.rt.sandboxOf, phase: v1.PodRunning,
				now: fixtureNow, base: testBase, max: testMax}.plan()
			checkPlan(t, tt.rt, got, tt.want)
			if got.act.kind == actStartContainer && (!got.act.ephemeral || got.act.targetID != tt.target) {
				t.Errorf("ephemeral = %v target = %q, want true %q", got.act.ephemeral, got.act.targetID, tt.target)
			}
		})
	}
}

// TestPlanSidecarStartup: the containers after a sidecar wait for its
// startup probe, as upstream (computeInitContainerActions).
func TestPlanSidecarStartup(t *testing.T) {
	app, init1 := specCtr("app"), specCtr("init1")
	sidecar := specSidecar("proxy")
	sidecar.StartupProbe = &v1.Probe{}
	always := v1.RestartPolicyAlways
	tests := []struct {
		name    string
		rt      *rtFixture
		started bool
		want    planWant
	}{
		{
			name: "startup probe not passed: the next init container waits",
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "proxy", 0),
			want: planWant{kind: actNone},
		},
		{
			name:    "startup probe passed: the next init container starts",
			rt:      newRT().sandbox("sb0", 0, true).running("sb0", "proxy", 0),
			started: true,
			want:    planWant{kind: actStartContainer, container: "init1", isInit: true},
		},
		{
			name: "restarted sidecar of an initialized pod holds up nothing",
			rt: newRT().sandbox("sb0", 0, true).running("sb0", "proxy", 1).exited("sb0", "init1", 0, 0, time.Hour).
				running("sb0", "app", 0),
			want: planWant{kind: actNone},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := specPod(always, []v1.Container{sidecar, init1}, app)
			probe := func(c *v1.Container, _ string) (bool, bool) { return c.Name != "proxy" || tt.started, true }
			got := planner{pod: pod, snap: tt.rt.snap, sandboxOf: tt.rt.sandboxOf, phase: v1.PodPending,
				now: fixtureNow, base: testBase, max: testMax, probe: probe}.plan()
			checkPlan(t, tt.rt, got, tt.want)
		})
	}
}
