package pod

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/podspec"
)

// describeContainer is what `kubectl get pod -o yaml` shows of a container
// status, in one line: "waiting:Reason", "running" or
// "terminated:Reason(code)", then "last=Reason(code)", "restarts=n",
// "started", "ready" where set.
func describeContainer(cs v1.ContainerStatus) string {
	var s string
	switch {
	case cs.State.Waiting != nil:
		s = "waiting:" + cs.State.Waiting.Reason
	case cs.State.Running != nil:
		s = "running"
	case cs.State.Terminated != nil:
		s = fmt.Sprintf("terminated:%s(%d)", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
	default:
		s = "no-state"
	}
	if t := cs.LastTerminationState.Terminated; t != nil {
		s += fmt.Sprintf(" last=%s(%d)", t.Reason, t.ExitCode)
	}
	if cs.RestartCount != 0 {
		s += fmt.Sprintf(" restarts=%d", cs.RestartCount)
	}
	if cs.Started != nil && *cs.Started {
		s += " started"
	}
	if cs.Ready {
		s += " ready"
	}
	return s
}

// describeCondition is "True", "False" or "False/Reason".
func describeCondition(c v1.PodCondition) string {
	if c.Reason == "" {
		return string(c.Status)
	}
	return string(c.Status) + "/" + c.Reason
}

func findCondition(st v1.PodStatus, t v1.PodConditionType) (v1.PodCondition, bool) {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c, true
		}
	}
	return v1.PodCondition{}, false
}

// probeSays answers the probe callback from per-container (started, ready)
// pairs; a container not named is started and ready.
func probeSays(states map[string][2]bool) func(c *v1.Container, id string) (bool, bool) {
	return func(c *v1.Container, _ string) (bool, bool) {
		if s, ok := states[c.Name]; ok {
			return s[0], s[1]
		}
		return true, true
	}
}

var (
	allTrue = map[v1.PodConditionType]string{
		v1.PodReadyToStartContainers: "True", v1.PodInitialized: "True",
		v1.ContainersReady: "True", v1.PodReady: "True", v1.PodScheduled: "True",
	}
	completed = map[v1.PodConditionType]string{
		v1.PodReadyToStartContainers: "False", v1.PodInitialized: "True",
		v1.ContainersReady: "False/PodCompleted", v1.PodReady: "False/PodCompleted", v1.PodScheduled: "True",
	}
	notReady = map[v1.PodConditionType]string{
		v1.PodReadyToStartContainers: "True", v1.PodInitialized: "True",
		v1.ContainersReady: "False/ContainersNotReady", v1.PodReady: "False/ContainersNotReady", v1.PodScheduled: "True",
	}
	notInit = map[v1.PodConditionType]string{
		v1.PodReadyToStartContainers: "True", v1.PodInitialized: "False/ContainersNotInitialized",
		v1.ContainersReady: "False/ContainersNotReady", v1.PodReady: "False/ContainersNotReady", v1.PodScheduled: "True",
	}
)

func backOffWait(name string) map[string]waitInfo {
	return map[string]waitInfo{name: {reason: ReasonCrashLoopBackOff, message: "back-off 10s restarting failed container=" + name + " pod=web_default(uid-1)"}}
}

func TestComputeStatus(t *testing.T) {
	app, side := specCtr("app"), specCtr("side")
	init1, init2 := specCtr("init1"), specCtr("init2")
	sidecar := specSidecar("proxy")
	always, onFailure, never := v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever

	tests := []struct {
		name     string
		pod      *v1.Pod
		rt       *rtFixture
		waits    map[string]waitInfo
		probe    map[string][2]bool // container -> started, ready
		deadline bool

		phase      v1.PodPhase
		reason     string
		containers map[string]string // init and regular, by name: describeContainer
		conds      map[v1.PodConditionType]string
		messages   map[v1.PodConditionType]string // condition messages to check
	}{
		// Pending.
		{
			name:       "nothing in the runtime yet",
			pod:        specPod(always, nil, app),
			rt:         newRT(),
			phase:      v1.PodPending,
			containers: map[string]string{"app": "waiting:ContainerCreating"},
			conds: map[v1.PodConditionType]string{
				v1.PodReadyToStartContainers: "False/PodSandboxNotReady", v1.PodInitialized: "True",
				v1.ContainersReady: "False/ContainersNotReady", v1.PodReady: "False/ContainersNotReady", v1.PodScheduled: "True",
			},
			messages: map[v1.PodConditionType]string{v1.PodReady: "containers with unready status: [app]",
				v1.PodReadyToStartContainers: "no pod sandbox exists"}, // v1.37's message
		},
		{
			name:       "created container is still creating",
			pod:        specPod(always, nil, app),
			rt:         newRT().sandbox("sb0", 0, true).created("sb0", "app", 0),
			phase:      v1.PodPending,
			containers: map[string]string{"app": "waiting:ContainerCreating"},
			conds:      notReady,
		},
		{
			name:       "one container running, one not created: Pending",
			pod:        specPod(never, nil, app, side),
			rt:         newRT().sandbox("sb0", 0, true).running("sb0", "app", 0),
			phase:      v1.PodPending,
			containers: map[string]string{"app": "running started ready", "side": "waiting:ContainerCreating"},
			conds:      notReady,
			messages:   map[v1.PodConditionType]string{v1.ContainersReady: "containers with unready status: [side]"},
		},
		{
			name:       "image pull failure shows its waiting reason",
			pod:        specPod(always, nil, app),
			rt:         newRT().sandbox("sb0", 0, true),
			waits:      map[string]waitInfo{"app": {reason: "ErrImagePull", message: "pull failed"}},
			phase:      v1.PodPending,
			containers: map[string]string{"app": "waiting:ErrImagePull"},
			conds:      notReady,
		},

		// Running.
		{
			// A start that failed because another incarnation's start got
			// there first: the runtime shows it running, so is it.
			name:       "a stale runtime error of a running container is not shown",
			pod:        specPod(always, nil, app),
			rt:         newRT().sandbox("sb0", 0, true).running("sb0", "app", 0),
			waits:      map[string]waitInfo{"app": {reason: ReasonRunContainerError, message: "start container c1: container is CONTAINER_RUNNING"}},
			phase:      v1.PodRunning,
			containers: map[string]string{"app": "running started ready"},
			conds:      allTrue,
		},
		{
			name:       "all running and ready",
			pod:        specPod(always, nil, app, side),
			rt:         newRT().sandbox("sb0", 0, true).running("sb0", "app", 0).running("sb0", "side", 0),
			phase:      v1.PodRunning,
			containers: map[string]string{"app": "running started ready", "side": "running started ready"},
			conds:      allTrue,
		},
		{
			name:       "readiness probe not passed: not ready",
			pod:        specPod(always, nil, app, side),
			rt:         newRT().sandbox("sb0", 0, true).running("sb0", "app", 0).running("sb0", "side", 0),
			probe:      map[string][2]bool{"side": {true, false}},
			phase:      v1.PodRunning,
			containers: map[string]string{"app": "running started ready", "side": "running started"},
			conds:      notReady,
			messages: map[v1.PodConditionType]string{
				v1.ContainersReady: "containers with unready status: [side]",
				v1.PodReady:        "containers with unready status: [side]",
			},
		},
		{
			name:       "startup probe not passed: neither started nor ready",
			pod:        specPod(always, nil, app),
			rt:         newRT().sandbox("sb0", 0, true).running("sb0", "app", 0),
			probe:      map[string][2]bool{"app": {false, false}},
			phase:      v1.PodRunning,
			containers: map[string]string{"app": "running"},
			conds:      notReady,
		},
		{
			name:       "restart count and last state from the container before",
			pod:        specPod(always, nil, app),
			rt:         newRT().sandbox("sb0", 0, true).exited("sb0", "app", 2, 1, time.Minute).running("sb0", "app", 3),
			phase:      v1.PodRunning,
			containers: map[string]string{"app": "running last=Error(1) restarts=3 started ready"},
			conds:      allTrue,
		},
		{
			name: "restart count from the annotation when the attempt is missing",
			pod:  specPod(always, nil, app),
			rt: newRT().sandbox("sb0", 0, true).running("sb0", "app", 0).set(func(c *runtimeapi.ContainerStatus) {
				c.Annotations = map[string]string{podspec.AnnotationRestartCount: "4"}
			}),
			phase:      v1.PodRunning,
			containers: map[string]string{"app": "running restarts=4 started ready"},
			conds:      allTrue,
		},
		{
			name:       "Always: exited containers are restarting, the pod is Running",
			pod:        specPod(always, nil, app),
			rt:         newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 0, time.Second),
			phase:      v1.PodRunning,
			containers: map[string]string{"app": "terminated:Completed(0)"},
			conds:      notReady,
		},
		{
			name:       "CrashLoopBackOff: waiting with the exited container as last state",
			pod:        specPod(always, nil, app),
			rt:         newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 1, time.Minute).exited("sb0", "app", 1, 2, time.Second),
			waits:      backOffWait("app"),
			phase:      v1.PodRunning,
			containers: map[string]string{"app": "waiting:CrashLoopBackOff last=Error(2) restarts=1"},
			conds:      notReady,
		},
		{
			name: "CrashLoopBackOff while a new container is created: last state from the one before",
			pod:  specPod(always, nil, app),
			rt: newRT().sandbox("sb0", 0, true).exited("sb0", "app", 1, 2, time.Second).
				created("sb0", "app", 2),
			waits:      backOffWait("app"),
			phase:      v1.PodRunning,
			containers: map[string]string{"app": "waiting:CrashLoopBackOff last=Error(2) restarts=2"},
			conds:      notReady,
		},
		{
			name:       "OnFailure: a failed container restarting keeps the pod Running",
			pod:        specPod(onFailure, nil, app, side),
			rt:         newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 0, time.Second).exited("sb0", "side", 0, 1, time.Second),
			phase:      v1.PodRunning,
			containers: map[string]string{"app": "terminated:Completed(0)", "side": "terminated:Error(1)"},
			conds:      notReady,
		},
		{
			name:       "Never: one failed, one running: Running",
			pod:        specPod(never, nil, app, side),
			rt:         newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 1, time.Second).running("sb0", "side", 0),
			phase:      v1.PodRunning,
			containers: map[string]string{"app": "terminated:Error(1)", "side": "running started ready"},
			conds:      notReady,
			messages:   map[v1.PodConditionType]string{v1.PodReady: "containers with unready status: [app]"},
		},

		// Succeeded and Failed.
		{
			name:       "OnFailure: all succeeded",
			pod:        specPod(onFailure, nil, app, side),
			rt:         newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 0, time.Second).exited("sb0", "side", 0, 0, time.Second),
			phase:      v1.PodSucceeded,
			containers: map[string]string{"app": "terminated:Completed(0)", "side": "terminated:Completed(0)"},
			conds:      completed,
		},
		{
			name:       "Never: all succeeded",
			pod:        specPod(never, nil, app),
			rt:         newRT().sandbox("sb0", 0, false).exited("sb0", "app", 0, 0, time.Second),
			phase:      v1.PodSucceeded,
			containers: map[string]string{"app": "terminated:Completed(0)"},
			conds: map[v1.PodConditionType]string{
				v1.PodReadyToStartContainers: "False/PodSandboxNotReady", v1.PodInitialized: "True",
				v1.ContainersReady: "False/PodCompleted", v1.PodReady: "False/PodCompleted", v1.PodScheduled: "True",
			},
			messages: map[v1.PodConditionType]string{v1.PodReadyToStartContainers: "pod sandbox is not ready"}, // v1.37's message
		},
		{
			// Upstream (generateContainersReadyConditionForTerminalPhase)
			// gives reason PodFailed here.
			name:       "Never: one failed",
			pod:        specPod(never, nil, app, side),
			rt:         newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 0, time.Second).exited("sb0", "side", 0, 1, time.Second),
			phase:      v1.PodFailed,
			containers: map[string]string{"app": "terminated:Completed(0)", "side": "terminated:Error(1)"},
			conds:      completed,
		},
		{
			name: "runtime reason is kept: OOMKilled",
			pod:  specPod(never, nil, app),
			rt: newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 137, time.Second).set(func(c *runtimeapi.ContainerStatus) {
				c.Reason = "OOMKilled"
			}),
			phase:      v1.PodFailed,
			containers: map[string]string{"app": "terminated:OOMKilled(137)"},
			conds:      completed,
		},
		{
			name:       "active deadline exceeded fails a running pod",
			pod:        specPod(always, nil, app),
			rt:         newRT().sandbox("sb0", 0, true).running("sb0", "app", 0),
			deadline:   true,
			phase:      v1.PodFailed,
			reason:     ReasonDeadlineExceeded,
			containers: map[string]string{"app": "running started ready"},
			conds:      completed,
		},

		// Init containers.
		{
			// Upstream (convertToAPIContainerStatuses) shows PodInitializing
			// for every container not created yet in a pod with init
			// containers.
			name:       "init container not created yet",
			pod:        specPod(always, []v1.Container{init1}, app),
			rt:         newRT().sandbox("sb0", 0, true),
			phase:      v1.PodPending,
			containers: map[string]string{"init1": "waiting:PodInitializing", "app": "waiting:PodInitializing"},
			conds:      notInit,
			messages:   map[v1.PodConditionType]string{v1.PodInitialized: "containers with incomplete status: [init1]"},
		},
		{
			name: "first init container done, second running",
			pod:  specPod(always, []v1.Container{init1, init2}, app),
			rt: newRT().sandbox("sb0", 0, true).
				exited("sb0", "init1", 0, 0, time.Minute).running("sb0", "init2", 0),
			phase: v1.PodPending,
			// Upstream (UpdatePodStatus): a succeeded init container is
			// ready, a running one is not.
			containers: map[string]string{
				"init1": "terminated:Completed(0) ready", "init2": "running started", "app": "waiting:PodInitializing",
			},
			conds:    notInit,
			messages: map[v1.PodConditionType]string{v1.PodInitialized: "containers with incomplete status: [init2]"},
		},
		{
			name: "init containers done: Initialized",
			pod:  specPod(always, []v1.Container{init1, init2}, app),
			rt: newRT().sandbox("sb0", 0, true).
				exited("sb0", "init1", 0, 0, time.Minute).exited("sb0", "init2", 0, 0, time.Minute).running("sb0", "app", 0),
			phase: v1.PodRunning,
			containers: map[string]string{
				"init1": "terminated:Completed(0) ready", "init2": "terminated:Completed(0) ready", "app": "running started ready",
			},
			conds: allTrue,
		},
		{
			name:  "Never: failed init container fails the pod",
			pod:   specPod(never, []v1.Container{init1, init2}, app),
			rt:    newRT().sandbox("sb0", 0, true).exited("sb0", "init1", 0, 1, time.Second),
			phase: v1.PodFailed,
			containers: map[string]string{
				"init1": "terminated:Error(1)", "init2": "waiting:PodInitializing", "app": "waiting:PodInitializing",
			},
			conds: map[v1.PodConditionType]string{
				v1.PodReadyToStartContainers: "False", v1.PodInitialized: "False/ContainersNotInitialized",
				v1.ContainersReady: "False/PodCompleted", v1.PodReady: "False/PodCompleted", v1.PodScheduled: "True",
			},
			messages: map[v1.PodConditionType]string{v1.PodInitialized: "containers with incomplete status: [init1 init2]"},
		},
		{
			name:  "OnFailure: failed init container in back-off keeps the pod Pending",
			pod:   specPod(onFailure, []v1.Container{init1}, app),
			rt:    newRT().sandbox("sb0", 0, true).exited("sb0", "init1", 1, 1, time.Second),
			waits: backOffWait("init1"),
			phase: v1.PodPending,
			containers: map[string]string{
				"init1": "waiting:CrashLoopBackOff last=Error(1) restarts=1", "app": "waiting:PodInitializing",
			},
			conds: notInit,
		},

		// Sidecars.
		{
			name:       "running sidecar lets initialization go on and counts for readiness",
			pod:        specPod(always, []v1.Container{sidecar}, app),
			rt:         newRT().sandbox("sb0", 0, true).running("sb0", "proxy", 0).running("sb0", "app", 0),
			phase:      v1.PodRunning,
			containers: map[string]string{"proxy": "running started ready", "app": "running started ready"},
			conds:      allTrue,
		},
		{
			// Upstream (GenerateContainersReadyCondition) names the sidecar
			// in the message.
			name:       "unready sidecar makes the pod unready",
			pod:        specPod(always, []v1.Container{sidecar}, app),
			rt:         newRT().sandbox("sb0", 0, true).running("sb0", "proxy", 0).running("sb0", "app", 0),
			probe:      map[string][2]bool{"proxy": {true, false}},
			phase:      v1.PodRunning,
			containers: map[string]string{"proxy": "running started", "app": "running started ready"},
			conds:      notReady,
			messages:   map[v1.PodConditionType]string{v1.ContainersReady: "containers with unready status: []"},
		},
		{
			// Upstream (isInitContainerInitialized) waits for the sidecar's
			// startup probe.
			name:       "running sidecar not started yet: not initialized",
			pod:        specPod(always, []v1.Container{sidecar}, app),
			rt:         newRT().sandbox("sb0", 0, true).running("sb0", "proxy", 0),
			probe:      map[string][2]bool{"proxy": {false, false}},
			phase:      v1.PodPending,
			containers: map[string]string{"proxy": "running", "app": "waiting:PodInitializing"},
			conds:      notInit,
			messages:   map[v1.PodConditionType]string{v1.PodInitialized: "containers with incomplete status: [proxy]"},
		},
		{
			// Upstream (getPhase, GeneratePodInitializedCondition:
			// HasAnyRegularContainerStarted) keeps such a pod Running and
			// Initialized.
			name: "sidecar in back-off after initialization: Pending and not initialized",
			pod:  specPod(always, []v1.Container{sidecar}, app),
			rt: newRT().sandbox("sb0", 0, true).
				exited("sb0", "proxy", 1, 1, time.Second).running("sb0", "app", 0),
			waits: backOffWait("proxy"),
			phase: v1.PodPending,
			containers: map[string]string{
				"proxy": "waiting:CrashLoopBackOff last=Error(1) restarts=1", "app": "running started ready",
			},
			conds:    notInit,
			messages: map[v1.PodConditionType]string{v1.PodInitialized: "containers with incomplete status: [proxy]"},
		},
		{
			// Upstream (getPhase) counts a running sidecar: Running until
			// the sidecar is stopped too.
			name:       "OnFailure: main container done, sidecar still running: Succeeded",
			pod:        specPod(onFailure, []v1.Container{sidecar}, app),
			rt:         newRT().sandbox("sb0", 0, true).running("sb0", "proxy", 0).exited("sb0", "app", 0, 0, time.Second),
			phase:      v1.PodSucceeded,
			containers: map[string]string{"proxy": "running started ready", "app": "terminated:Completed(0)"},
			conds:      completed,
		},
		{
			// Upstream (getPhase) ignores a terminated sidecar once a
			// regular container has started: Running.
			name:  "Never: failed sidecar does not fail the pod but keeps it Pending",
			pod:   specPod(never, []v1.Container{sidecar}, app),
			rt:    newRT().sandbox("sb0", 0, true).exited("sb0", "proxy", 0, 1, time.Second).running("sb0", "app", 0),
			phase: v1.PodPending,
			containers: map[string]string{
				"proxy": "terminated:Error(1)", "app": "running started ready",
			},
			conds: notInit,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := statusInput{pod: tt.pod, snap: tt.rt.snap, waits: tt.waits, runtimeName: "containerd",
				hostIP: "192.0.2.1", now: fixtureNow, deadlineExceeded: tt.deadline}
			if tt.probe != nil {
				in.probe = probeSays(tt.probe)
			}
			st := computeStatus(in)

			if st.Phase != tt.phase {
				t.Errorf("phase = %s, want %s", st.Phase, tt.phase)
			}
			if st.Reason != tt.reason {
				t.Errorf("reason = %q, want %q", st.Reason, tt.reason)
			}
			got := map[string]string{}
			for _, cs := range append(append([]v1.ContainerStatus{}, st.InitContainerStatuses...), st.ContainerStatuses...) {
				got[cs.Name] = describeContainer(cs)
			}
			for name, want := range tt.containers {
				if got[name] != want {
					t.Errorf("container %s: %q, want %q", name, got[name], want)
				}
			}
			if len(got) != len(tt.containers) {
				t.Errorf("container statuses %v, want %v", got, tt.containers)
			}
			if len(st.InitContainerStatuses) != len(tt.pod.Spec.InitContainers) || len(st.ContainerStatuses) != len(tt.pod.Spec.Containers) {
				t.Errorf("%d init and %d container statuses, want %d and %d", len(st.InitContainerStatuses), len(st.ContainerStatuses),
					len(tt.pod.Spec.InitContainers), len(tt.pod.Spec.Containers))
			}
			if len(st.Conditions) != len(tt.conds) {
				t.Errorf("%d conditions, want %d", len(st.Conditions), len(tt.conds))
			}
			for typ, want := range tt.conds {
				c, ok := findCondition(st, typ)
				if !ok {
					t.Errorf("no %s condition", typ)
					continue
				}
				if describeCondition(c) != want {
					t.Errorf("%s = %s, want %s", typ, describeCondition(c), want)
				}
			}
			for typ, want := range tt.messages {
				if c, _ := findCondition(st, typ); c.Message != want {
					t.Errorf("%s message = %q, want %q", typ, c.Message, want)
				}
			}
		})
	}
}

// TestComputeStatusDetails checks the fields a user reads beside phase and
// states: IDs, images, times, IPs, messages.
func TestComputeStatusDetails(t *testing.T) {
	app := specCtr("app")
	started := fixtureNow.Add(-time.Hour + 300*time.Millisecond)
	tests := []struct {
		name  string
		pod   *v1.Pod
		rt    *rtFixture
		waits map[string]waitInfo
		dl    bool
		check func(t *testing.T, st v1.PodStatus)
	}{
		{
			name: "pod IPs and start time come from the sandbox and the input",
			pod:  specPod(v1.RestartPolicyAlways, nil, app),
			rt: newRT().sandbox("sb0", 0, false).sandbox("sb1", 1, true).running("sb1", "app", 0).set(func(c *runtimeapi.ContainerStatus) {
				c.StartedAt = started.UnixNano()
			}),
			check: func(t *testing.T, st v1.PodStatus) {
				if st.PodIP != "10.88.0.11" || len(st.PodIPs) != 1 || st.PodIPs[0].IP != "10.88.0.11" {
					t.Errorf("pod IPs = %q %v, want the newest sandbox's 10.88.0.11", st.PodIP, st.PodIPs)
				}
				if st.HostIP != "192.0.2.1" || len(st.HostIPs) != 1 {
					t.Errorf("host IPs = %q %v", st.HostIP, st.HostIPs)
				}
				if st.StartTime == nil || !st.StartTime.Time.Equal(fixtureNow.Add(-time.Minute)) {
					t.Errorf("start time = %v, want %v", st.StartTime, fixtureNow.Add(-time.Minute))
				}
				if st.QOSClass != v1.PodQOSBestEffort {
					t.Errorf("QoS class = %s, want BestEffort", st.QOSClass)
				}
				cs := st.ContainerStatuses[0]
				if cs.ContainerID != "containerd://sb1-app-0" || cs.Image != app.Image || cs.ImageID != "sha256:app" {
					t.Errorf("container %q image %q imageID %q", cs.ContainerID, cs.Image, cs.ImageID)
				}
				if !cs.State.Running.StartedAt.Time.Equal(started.Truncate(time.Second)) {
					t.Errorf("startedAt = %v, want %v (whole seconds)", cs.State.Running.StartedAt, started.Truncate(time.Second))
				}
			},
		},
		{
			name: "host network pods show the host IP",
			pod: func() *v1.Pod {
				p := specPod(v1.RestartPolicyAlways, nil, app)
				p.Spec.HostNetwork = true
				return p
			}(),
			rt: newRT().sandbox("sb0", 0, true),
			check: func(t *testing.T, st v1.PodStatus) {
				if st.PodIP != "192.0.2.1" {
					t.Errorf("pod IP = %q, want the host's", st.PodIP)
				}
			},
		},
		{
			name: "terminated state carries the message, times and ID",
			pod:  specPod(v1.RestartPolicyNever, nil, app),
			rt: newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 3, 90*time.Second).set(func(c *runtimeapi.ContainerStatus) {
				c.Message = "disk full"
			}),
			check: func(t *testing.T, st v1.PodStatus) {
				term := st.ContainerStatuses[0].State.Terminated
				if term == nil {
					t.Fatalf("state = %+v, want terminated", st.ContainerStatuses[0].State)
				}
				if term.Reason != ReasonError || term.Message != "disk full" || term.ContainerID != "containerd://sb0-app-0" {
					t.Errorf("terminated = %+v", term)
				}
				if !term.FinishedAt.Time.Equal(fixtureNow.Add(-90*time.Second)) || !term.StartedAt.Time.Equal(fixtureNow.Add(-150*time.Second)) {
					t.Errorf("started %v finished %v", term.StartedAt, term.FinishedAt)
				}
				if s := st.ContainerStatuses[0].Started; s == nil || *s {
					t.Errorf("started = %v, want false", s)
				}
			},
		},
		{
			name:  "waiting message is shown",
			pod:   specPod(v1.RestartPolicyAlways, nil, app),
			rt:    newRT().sandbox("sb0", 0, true).exited("sb0", "app", 1, 1, time.Second),
			waits: backOffWait("app"),
			check: func(t *testing.T, st v1.PodStatus) {
				w := st.ContainerStatuses[0].State.Waiting
				if w == nil || w.Message != "back-off 10s restarting failed container=app pod=web_default(uid-1)" {
					t.Errorf("waiting = %+v", w)
				}
				// Upstream (prober manager's UpdatePodStatus) sets started
				// on every regular and init container: false while waiting.
				if s := st.ContainerStatuses[0].Started; s == nil || *s {
					t.Errorf("started = %v, want false while waiting", s)
				}
			},
		},
		{
			name: "deadline exceeded message",
			pod:  specPod(v1.RestartPolicyAlways, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "app", 0),
			dl:   true,
			check: func(t *testing.T, st v1.PodStatus) {
				if st.Message != "Pod was active on the node longer than the specified deadline" {
					t.Errorf("message = %q", st.Message)
				}
			},
		},
		{
			name: "PodScheduled is reported True, after the kubelet's own conditions",
			pod:  specPod(v1.RestartPolicyAlways, nil, app),
			rt:   newRT(),
			check: func(t *testing.T, st v1.PodStatus) {
				var types []string
				for _, c := range st.Conditions {
					types = append(types, string(c.Type))
				}
				want := "PodReadyToStartContainers Initialized ContainersReady Ready PodScheduled"
				if strings.Join(types, " ") != want {
					t.Errorf("conditions %v, want %s", types, want)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, computeStatus(statusInput{pod: tt.pod, snap: tt.rt.snap, waits: tt.waits, runtimeName: "containerd",
				hostIP: "192.0.2.1", startTime: fixtureNow.Add(-time.Minute + 400*time.Millisecond), now: fixtureNow,
				deadlineExceeded: tt.dl}))
		})
	}
}

func TestComputeStatusNilSnapshot(t *testing.T) {
	st := computeStatus(statusInput{pod: specPod(v1.RestartPolicyAlways, nil, specCtr("app")), now: fixtureNow})
	if st.Phase != v1.PodPending || describeContainer(st.ContainerStatuses[0]) != "waiting:ContainerCreating" {
		t.Errorf("phase %s, container %s; want Pending, waiting:ContainerCreating", st.Phase, describeContainer(st.ContainerStatuses[0]))
	}
}

// TestStatusTransitionTimes: a condition keeps its transition time while
// its status stays, and gets now (whole seconds) when it changes.
func TestStatusTransitionTimes(t *testing.T) {
	now := fixtureNow.Add(700 * time.Millisecond)
	earlier := metav1.NewTime(fixtureNow.Add(-time.Hour))
	nowT := metav1.NewTime(fixtureNow)
	app := specCtr("app")
	tests := []struct {
		name  string
		rt    *rtFixture
		probe map[string][2]bool
		prev  *v1.PodStatus
		want  map[v1.PodConditionType]metav1.Time
	}{
		{
			name: "first status: every condition changes now",
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "app", 0),
			want: map[v1.PodConditionType]metav1.Time{v1.PodReady: nowT, v1.PodInitialized: nowT, v1.PodScheduled: nowT},
		},
		{
			name: "unchanged conditions keep their time",
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "app", 0),
			prev: &v1.PodStatus{Conditions: []v1.PodCondition{
				{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: earlier},
				{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: earlier},
				{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: earlier},
			}},
			want: map[v1.PodConditionType]metav1.Time{v1.PodReady: earlier, v1.PodInitialized: earlier, v1.PodScheduled: earlier},
		},
		{
			name:  "a condition that flips gets now, the others keep theirs",
			rt:    newRT().sandbox("sb0", 0, true).running("sb0", "app", 0),
			probe: map[string][2]bool{"app": {true, false}},
			prev: &v1.PodStatus{Conditions: []v1.PodCondition{
				{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: earlier},
				{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: earlier},
				{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: earlier},
			}},
			want: map[v1.PodConditionType]metav1.Time{v1.PodReady: nowT, v1.ContainersReady: nowT, v1.PodInitialized: earlier},
		},
		{
			name: "a condition missing before gets now",
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "app", 0),
			prev: &v1.PodStatus{Conditions: []v1.PodCondition{
				{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: earlier},
			}},
			want: map[v1.PodConditionType]metav1.Time{v1.PodReady: earlier, v1.PodReadyToStartContainers: nowT},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := statusInput{pod: specPod(v1.RestartPolicyAlways, nil, app), snap: tt.rt.snap, prev: tt.prev, now: now}
			if tt.probe != nil {
				in.probe = probeSays(tt.probe)
			}
			st := computeStatus(in)
			for typ, want := range tt.want {
				c, ok := findCondition(st, typ)
				if !ok {
					t.Fatalf("no %s condition", typ)
				}
				if !c.LastTransitionTime.Equal(&want) {
					t.Errorf("%s changed at %v, want %v", typ, c.LastTransitionTime, want)
				}
			}
		})
	}
}
