package pod

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/podspec"
)

// Builders shared by the planner and status tables: a pod spec and the
// runtime snapshot an inspection would have produced for it.

// fixtureNow is "now" for every planner and status case.
var fixtureNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	testBase = 10 * time.Second  // upstream back-off base
	testMax  = 300 * time.Second // upstream back-off cap
)

func specCtr(name string) v1.Container {
	return v1.Container{Name: name, Image: "registry.example/" + name + ":1"}
}

func specSidecar(name string) v1.Container {
	c := specCtr(name)
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func specPod(policy v1.RestartPolicy, inits []v1.Container, containers ...v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec:       v1.PodSpec{RestartPolicy: policy, InitContainers: inits, Containers: containers},
	}
}

// rtFixture builds a snapshot as inspect leaves it: sandboxes newest attempt
// first, containers by name newest attempt first. A container's ID is
// "<sandbox>-<name>-<attempt>".
type rtFixture struct {
	snap      *snapshot
	sandboxOf map[string]string
	last      *runtimeapi.ContainerStatus
}

func newRT() *rtFixture {
	return &rtFixture{
		snap:      &snapshot{containers: map[string][]*runtimeapi.ContainerStatus{}},
		sandboxOf: map[string]string{},
	}
}

func (f *rtFixture) sandbox(id string, attempt uint32, ready bool) *rtFixture {
	state := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if ready {
		state = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	f.snap.sandboxes = append(f.snap.sandboxes, &runtimeapi.PodSandboxStatus{
		Id:        id,
		Metadata:  &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1", Attempt: attempt},
		State:     state,
		CreatedAt: fixtureNow.Add(-2*time.Hour + time.Duration(attempt)*time.Minute).UnixNano(),
		Network:   &runtimeapi.PodSandboxNetworkStatus{Ip: fmt.Sprintf("10.88.0.%d", 10+attempt)},
	})
	sort.SliceStable(f.snap.sandboxes, func(i, j int) bool {
		return f.snap.sandboxes[i].Metadata.Attempt > f.snap.sandboxes[j].Metadata.Attempt
	})
	return f
}

func (f *rtFixture) add(sb, name string, attempt uint32, state runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
	c := &runtimeapi.ContainerStatus{
		Id:        fmt.Sprintf("%s-%s-%d", sb, name, attempt),
		Metadata:  &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
		State:     state,
		CreatedAt: fixtureNow.Add(-time.Hour + time.Duration(attempt)*time.Minute).UnixNano(),
		ImageRef:  "sha256:" + name,
	}
	f.snap.containers[name] = append(f.snap.containers[name], c)
	sort.SliceStable(f.snap.containers[name], func(i, j int) bool {
		return f.snap.containers[name][i].Metadata.Attempt > f.snap.containers[name][j].Metadata.Attempt
	})
	f.sandboxOf[c.Id] = sb
	f.last = c
	return c
}

func (f *rtFixture) running(sb, name string, attempt uint32) *rtFixture {
	c := f.add(sb, name, attempt, runtimeapi.ContainerState_CONTAINER_RUNNING)
	c.StartedAt = fixtureNow.Add(-30 * time.Minute).UnixNano()
	return f
}

func (f *rtFixture) created(sb, name string, attempt uint32) *rtFixture {
	f.add(sb, name, attempt, runtimeapi.ContainerState_CONTAINER_CREATED)
	return f
}

// exited adds a container that exited with code, ago before fixtureNow.
func (f *rtFixture) exited(sb, name string, attempt uint32, code int32, ago time.Duration) *rtFixture {
	c := f.add(sb, name, attempt, runtimeapi.ContainerState_CONTAINER_EXITED)
	c.ExitCode = code
	c.FinishedAt = fixtureNow.Add(-ago).UnixNano()
	c.StartedAt = fixtureNow.Add(-ago - time.Minute).UnixNano()
	return f
}

// set changes the container added last.
func (f *rtFixture) set(change func(c *runtimeapi.ContainerStatus)) *rtFixture {
	change(f.last)
	return f
}

func withHash(h string) func(*runtimeapi.ContainerStatus) {
	return func(c *runtimeapi.ContainerStatus) {
		c.Annotations = map[string]string{podspec.AnnotationContainerHash: h}
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		name      string
		restarts  int32
		base, max time.Duration
		want      time.Duration
	}{
		{name: "first restart is immediate", restarts: 0, base: testBase, max: testMax, want: 0},
		{name: "negative count is immediate", restarts: -1, base: testBase, max: testMax, want: 0},
		{name: "second restart waits the base", restarts: 1, base: testBase, max: testMax, want: 10 * time.Second},
		{name: "then doubles", restarts: 2, base: testBase, max: testMax, want: 20 * time.Second},
		{name: "doubles again", restarts: 3, base: testBase, max: testMax, want: 40 * time.Second},
		{name: "last step below the cap", restarts: 5, base: testBase, max: testMax, want: 160 * time.Second},
		{name: "capped at max", restarts: 6, base: testBase, max: testMax, want: testMax},
		{name: "stays at max", restarts: 1000, base: testBase, max: testMax, want: testMax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := backoff(tt.restarts, tt.base, tt.max); got != tt.want {
				t.Errorf("backoff(%d, %s, %s) = %s, want %s", tt.restarts, tt.base, tt.max, got, tt.want)
			}
		})
	}
}

func TestShouldRestart(t *testing.T) {
	tests := []struct {
		name   string
		policy v1.RestartPolicy
		code   int32
		want   bool
	}{
		{name: "Always after success", policy: v1.RestartPolicyAlways, code: 0, want: true},
		{name: "Always after failure", policy: v1.RestartPolicyAlways, code: 1, want: true},
		{name: "OnFailure after success", policy: v1.RestartPolicyOnFailure, code: 0, want: false},
		{name: "OnFailure after failure", policy: v1.RestartPolicyOnFailure, code: 137, want: true},
		{name: "Never after success", policy: v1.RestartPolicyNever, code: 0, want: false},
		{name: "Never after failure", policy: v1.RestartPolicyNever, code: 1, want: false},
		{name: "unset policy behaves as Always", policy: "", code: 0, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shouldRestart(tt.policy, tt.code); got != tt.want {
				t.Errorf("shouldRestart(%q, %d) = %v, want %v", tt.policy, tt.code, got, tt.want)
			}
		})
	}
}

// planWant is what a plan must come to. Unset fields must be zero in the
// result: no waits, no wake-up.
type planWant struct {
	kind      actionKind
	attempt   uint32 // run-sandbox and start-container
	container string // start-container: the container's name
	isInit    bool
	createdID string
	ids       []string // stop-containers, stop-sandbox, remove-containers (any order)
	reason    string
	waits     map[string]string // container name -> waiting reason
	wakeIn    time.Duration     // wakeAt - now; 0: no wake-up
}

func TestPlan(t *testing.T) {
	app := specCtr("app")
	side := specCtr("side")
	init1, init2 := specCtr("init1"), specCtr("init2")
	sidecar := specSidecar("proxy")
	always, onFailure, never := v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever
	crash := map[string]string{"app": ReasonCrashLoopBackOff}

	tests := []struct {
		name  string
		pod   *v1.Pod
		rt    *rtFixture
		phase v1.PodPhase
		want  planWant
	}{
		// Sandbox.
		{
			name: "no sandbox runs the first sandbox",
			pod:  specPod(always, nil, app),
			rt:   newRT(),
			want: planWant{kind: actRunSandbox, attempt: 0},
		},
		{
			name: "dead sandbox with nothing running gets a new attempt",
			pod:  specPod(always, nil, app),
			rt:   newRT().sandbox("sb0", 0, false).exited("sb0", "app", 0, 137, time.Minute),
			want: planWant{kind: actRunSandbox, attempt: 1},
		},
		{
			name: "sandbox attempt follows the newest sandbox",
			pod:  specPod(always, nil, app),
			rt:   newRT().sandbox("sb0", 0, false).sandbox("sb2", 2, false).sandbox("sb1", 1, false),
			want: planWant{kind: actRunSandbox, attempt: 3},
		},
		{
			name: "dead sandbox: running containers are stopped first",
			pod:  specPod(always, nil, app, side),
			rt: newRT().sandbox("sb0", 0, false).
				running("sb0", "app", 0).running("sb0", "side", 2).exited("sb0", "side", 1, 1, time.Hour),
			want: planWant{kind: actStopContainers, ids: []string{"sb0-app-0", "sb0-side-2"}, reason: "sandbox changed"},
		},
		{
			name: "running container of an old sandbox is stopped",
			pod:  specPod(always, nil, app),
			rt: newRT().sandbox("sb0", 0, false).sandbox("sb1", 1, true).
				running("sb0", "app", 0),
			want: planWant{kind: actStopContainers, ids: []string{"sb0-app-0"}, reason: "container of an old sandbox"},
		},

		// Regular containers.
		{
			name: "missing container is started at attempt 0",
			pod:  specPod(always, nil, app),
			rt:   newRT().sandbox("sb0", 0, true),
			want: planWant{kind: actStartContainer, container: "app"},
		},
		{
			name: "containers start in spec order, one per plan",
			pod:  specPod(always, nil, app, side),
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "app", 0),
			want: planWant{kind: actStartContainer, container: "side"},
		},
		{
			name: "created but not started container is started by its ID",
			pod:  specPod(always, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "app", 1, 1, time.Hour).created("sb0", "app", 2),
			want: planWant{kind: actStartContainer, container: "app", attempt: 2, createdID: "sb0-app-2"},
		},
		{
			name: "all running: nothing to do",
			pod:  specPod(always, nil, app, side),
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "app", 0).running("sb0", "side", 0),
			want: planWant{kind: actNone},
		},
		{
			name: "container in an unknown state is left to settle",
			pod:  specPod(always, nil, app),
			rt: newRT().sandbox("sb0", 0, true).running("sb0", "app", 0).
				set(func(c *runtimeapi.ContainerStatus) { c.State = runtimeapi.ContainerState_CONTAINER_UNKNOWN }),
			want: planWant{kind: actNone},
		},

		// Exited containers and restartPolicy.
		{
			name: "Never: succeeded container stays exited",
			pod:  specPod(never, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 0, time.Second),
			want: planWant{kind: actNone},
		},
		{
			name: "Never: failed container stays exited",
			pod:  specPod(never, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 1, time.Second),
			want: planWant{kind: actNone},
		},
		{
			name: "OnFailure: succeeded container stays exited",
			pod:  specPod(onFailure, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 0, time.Second),
			want: planWant{kind: actNone},
		},
		{
			name: "OnFailure: failed container restarts at once the first time",
			pod:  specPod(onFailure, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 1, time.Second),
			want: planWant{kind: actStartContainer, container: "app", attempt: 1},
		},
		{
			name: "Always: succeeded container restarts",
			pod:  specPod(always, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 0, time.Second),
			want: planWant{kind: actStartContainer, container: "app", attempt: 1},
		},
		{
			name: "Always: failed container restarts",
			pod:  specPod(always, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 2, time.Second),
			want: planWant{kind: actStartContainer, container: "app", attempt: 1},
		},

		// CrashLoopBackOff.
		{
			name: "second restart waits the base delay from the exit",
			pod:  specPod(always, nil, app),
			rt: newRT().sandbox("sb0", 0, true).
				exited("sb0", "app", 0, 1, time.Minute).exited("sb0", "app", 1, 1, 3*time.Second),
			want: planWant{kind: actNone, waits: crash, wakeIn: 7 * time.Second},
		},
		{
			name: "back-off doubles",
			pod:  specPod(always, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "app", 2, 1, 5*time.Second),
			want: planWant{kind: actNone, waits: crash, wakeIn: 15 * time.Second},
		},
		{
			name: "back-off starts afresh after the spec changed (a new image: upstream's key is the container's hash)",
			pod:  specPod(always, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "app", 6, 1, 5*time.Second).set(withHash("old-spec")),
			want: planWant{kind: actStartContainer, container: "app", attempt: 7},
		},
		{
			name: "back-off is capped",
			pod:  specPod(always, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "app", 9, 1, 100*time.Second),
			want: planWant{kind: actNone, waits: crash, wakeIn: 200 * time.Second},
		},
		{
			name: "Always: a succeeded container backs off too",
			pod:  specPod(always, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "app", 1, 0, 0),
			want: planWant{kind: actNone, waits: crash, wakeIn: 10 * time.Second},
		},
		{
			name: "back-off over exactly at its end: restart with the next attempt",
			pod:  specPod(always, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "app", 2, 1, 20*time.Second),
			want: planWant{kind: actStartContainer, container: "app", attempt: 3},
		},
		{
			name: "back-off over: restart with the next attempt",
			pod:  specPod(onFailure, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "app", 4, 1, 3*time.Minute),
			want: planWant{kind: actStartContainer, container: "app", attempt: 5},
		},
		{
			name: "two containers in back-off: wake for the earlier",
			pod:  specPod(always, nil, app, side),
			rt: newRT().sandbox("sb0", 0, true).
				exited("sb0", "app", 1, 1, 3*time.Second).exited("sb0", "side", 2, 1, 12*time.Second),
			want: planWant{kind: actNone, waits: map[string]string{"app": ReasonCrashLoopBackOff, "side": ReasonCrashLoopBackOff}, wakeIn: 7 * time.Second},
		},
		{
			name: "a container in back-off does not hold up the next",
			pod:  specPod(always, nil, app, side),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "app", 1, 1, 3*time.Second),
			want: planWant{kind: actStartContainer, container: "side", waits: crash, wakeIn: 7 * time.Second},
		},

		// A new sandbox.
		{
			name: "attempt numbers survive a new sandbox",
			pod:  specPod(always, nil, app),
			rt: newRT().sandbox("sb0", 0, false).sandbox("sb1", 1, true).
				exited("sb0", "app", 4, 137, time.Second),
			want: planWant{kind: actStartContainer, container: "app", attempt: 5},
		},
		{
			name: "OnFailure: container that succeeded in the old sandbox is not run again",
			pod:  specPod(onFailure, nil, app),
			rt: newRT().sandbox("sb0", 0, false).sandbox("sb1", 1, true).
				exited("sb0", "app", 0, 0, time.Minute),
			want: planWant{kind: actNone},
		},
		{
			name: "OnFailure: container that failed in the old sandbox runs again",
			pod:  specPod(onFailure, nil, app),
			rt: newRT().sandbox("sb0", 0, false).sandbox("sb1", 1, true).
				exited("sb0", "app", 0, 1, time.Minute),
			want: planWant{kind: actStartContainer, container: "app", attempt: 1},
		},
		{
			name: "init containers run again in a new sandbox",
			pod:  specPod(always, []v1.Container{init1}, app),
			rt: newRT().sandbox("sb0", 0, false).sandbox("sb1", 1, true).
				exited("sb0", "init1", 0, 0, time.Hour).exited("sb0", "app", 0, 137, time.Minute),
			want: planWant{kind: actStartContainer, container: "init1", isInit: true, attempt: 1},
		},

		// Init containers.
		{
			name: "first init container runs before anything else",
			pod:  specPod(always, []v1.Container{init1, init2}, app),
			rt:   newRT().sandbox("sb0", 0, true),
			want: planWant{kind: actStartContainer, container: "init1", isInit: true},
		},
		{
			name: "running init container holds up the next",
			pod:  specPod(always, []v1.Container{init1, init2}, app),
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "init1", 0),
			want: planWant{kind: actNone},
		},
		{
			name: "succeeded init container lets the next start",
			pod:  specPod(always, []v1.Container{init1, init2}, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "init1", 0, 0, time.Second),
			want: planWant{kind: actStartContainer, container: "init2", isInit: true},
		},
		{
			name: "all init containers succeeded: main containers start",
			pod:  specPod(always, []v1.Container{init1, init2}, app),
			rt: newRT().sandbox("sb0", 0, true).
				exited("sb0", "init1", 0, 0, time.Minute).exited("sb0", "init2", 0, 0, time.Second),
			want: planWant{kind: actStartContainer, container: "app"},
		},
		{
			name: "Always: succeeded init containers are not re-run",
			pod:  specPod(always, []v1.Container{init1, init2}, app),
			rt: newRT().sandbox("sb0", 0, true).
				exited("sb0", "init1", 0, 0, time.Hour).exited("sb0", "init2", 0, 0, time.Hour).running("sb0", "app", 0),
			want: planWant{kind: actNone},
		},
		{
			name: "Always: failed init container re-runs",
			pod:  specPod(always, []v1.Container{init1, init2}, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "init1", 0, 1, time.Second),
			want: planWant{kind: actStartContainer, container: "init1", isInit: true, attempt: 1},
		},
		{
			name: "OnFailure: failed init container re-runs",
			pod:  specPod(onFailure, []v1.Container{init1, init2}, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "init1", 0, 1, time.Second),
			want: planWant{kind: actStartContainer, container: "init1", isInit: true, attempt: 1},
		},
		{
			name: "Never: failed init container blocks the rest",
			pod:  specPod(never, []v1.Container{init1, init2}, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "init1", 0, 1, time.Second),
			want: planWant{kind: actNone},
		},
		{
			name: "failed init container in back-off blocks the rest",
			pod:  specPod(onFailure, []v1.Container{init1, init2}, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "init1", 1, 1, 4*time.Second),
			want: planWant{kind: actNone, waits: map[string]string{"init1": ReasonCrashLoopBackOff}, wakeIn: 6 * time.Second},
		},
		{
			name: "created init container is started by its ID",
			pod:  specPod(always, []v1.Container{init1}, app),
			rt:   newRT().sandbox("sb0", 0, true).created("sb0", "init1", 0),
			want: planWant{kind: actStartContainer, container: "init1", isInit: true, createdID: "sb0-init1-0"},
		},

		// Sidecars (init containers with restartPolicy Always).
		{
			name: "sidecar starts first",
			pod:  specPod(always, []v1.Container{sidecar, init1}, app),
			rt:   newRT().sandbox("sb0", 0, true),
			want: planWant{kind: actStartContainer, container: "proxy", isInit: true},
		},
		{
			name: "running sidecar lets the next init container start",
			pod:  specPod(always, []v1.Container{sidecar, init1}, app),
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "proxy", 0),
			want: planWant{kind: actStartContainer, container: "init1", isInit: true},
		},
		{
			name: "running sidecar and done init: main container starts",
			pod:  specPod(always, []v1.Container{sidecar, init1}, app),
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "proxy", 0).exited("sb0", "init1", 0, 0, time.Second),
			want: planWant{kind: actStartContainer, container: "app"},
		},
		{
			name: "sidecar in back-off holds up initialization",
			pod:  specPod(always, []v1.Container{sidecar, init1}, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "proxy", 1, 1, 2*time.Second),
			want: planWant{kind: actNone, waits: map[string]string{"proxy": ReasonCrashLoopBackOff}, wakeIn: 8 * time.Second},
		},
		{
			name: "sidecar in back-off holds up nothing once the pod is initialized",
			pod:  specPod(always, []v1.Container{sidecar}, app),
			rt: newRT().sandbox("sb0", 0, true).
				exited("sb0", "proxy", 1, 1, 2*time.Second).exited("sb0", "app", 0, 1, time.Second),
			want: planWant{kind: actStartContainer, container: "app", attempt: 1,
				waits: map[string]string{"proxy": ReasonCrashLoopBackOff}, wakeIn: 8 * time.Second},
		},
		{
			name: "Never: exited sidecar still comes back",
			pod:  specPod(never, []v1.Container{sidecar}, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "proxy", 0, 0, time.Second).running("sb0", "app", 0),
			want: planWant{kind: actStartContainer, container: "proxy", isInit: true, attempt: 1},
		},

		// Spec changes.
		{
			name: "running container whose spec hash changed is stopped",
			pod:  specPod(always, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "app", 3).set(withHash("stale")),
			want: planWant{kind: actStopContainers, ids: []string{"sb0-app-3"}, reason: "container spec changed"},
		},
		{
			name: "running container with the current hash is kept",
			pod:  specPod(always, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "app", 0).set(withHash(podspec.ContainerHash(&app))),
			want: planWant{kind: actNone},
		},
		{
			name: "running container without a hash annotation is adopted as is",
			pod:  specPod(always, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).running("sb0", "app", 0),
			want: planWant{kind: actNone},
		},
		{
			// Upstream (computeInitContainerActions) restarts a sidecar whose
			// definition changed; the planner only compares regular containers.
			name: "running sidecar whose spec hash changed is kept",
			pod:  specPod(always, []v1.Container{sidecar}, app),
			rt: newRT().sandbox("sb0", 0, true).
				running("sb0", "proxy", 0).set(withHash("stale")).running("sb0", "app", 0),
			want: planWant{kind: actNone},
		},

		// Finished pods.
		{
			name:  "Succeeded pod: running containers are stopped",
			pod:   specPod(onFailure, []v1.Container{sidecar}, app),
			rt:    newRT().sandbox("sb0", 0, true).running("sb0", "proxy", 0).exited("sb0", "app", 0, 0, time.Second),
			phase: v1.PodSucceeded,
			want:  planWant{kind: actStopContainers, ids: []string{"sb0-proxy-0"}, reason: "pod finished"},
		},
		{
			name: "Failed pod: running containers of every sandbox are stopped",
			pod:  specPod(never, nil, app, side),
			rt: newRT().sandbox("sb0", 0, false).sandbox("sb1", 1, true).
				running("sb0", "side", 0).running("sb1", "app", 0),
			phase: v1.PodFailed,
			want:  planWant{kind: actStopContainers, ids: []string{"sb0-side-0", "sb1-app-0"}, reason: "pod finished"},
		},
		{
			name:  "Failed pod with nothing running: the ready sandbox is stopped",
			pod:   specPod(never, nil, app),
			rt:    newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 1, time.Second),
			phase: v1.PodFailed,
			want:  planWant{kind: actStopSandbox, ids: []string{"sb0"}, reason: "pod finished"},
		},
		{
			name:  "Succeeded pod with its sandbox stopped: nothing to do, nothing removed",
			pod:   specPod(never, nil, app),
			rt:    newRT().sandbox("sb0", 0, false).exited("sb0", "app", 0, 0, time.Second),
			phase: v1.PodSucceeded,
			want:  planWant{kind: actNone},
		},
		{
			name:  "Succeeded pod does not restart exited containers or run a sandbox",
			pod:   specPod(always, nil, app),
			rt:    newRT(),
			phase: v1.PodSucceeded,
			want:  planWant{kind: actNone},
		},

		// Garbage collection.
		{
			name: "keeps the newest and one dead container per name",
			pod:  specPod(always, nil, app),
			rt: newRT().sandbox("sb0", 0, true).
				exited("sb0", "app", 0, 1, time.Hour).exited("sb0", "app", 1, 1, 50*time.Minute).
				exited("sb0", "app", 2, 1, 40*time.Minute).running("sb0", "app", 3),
			want: planWant{kind: actRemoveContainers, ids: []string{"sb0-app-0", "sb0-app-1"}, reason: "garbage collection"},
		},
		{
			name: "an exited newest container is kept besides one dead before it",
			pod:  specPod(always, nil, app),
			rt: newRT().sandbox("sb0", 0, true).
				exited("sb0", "app", 0, 1, time.Hour).exited("sb0", "app", 1, 1, 50*time.Minute).
				exited("sb0", "app", 2, 1, time.Second),
			want: planWant{kind: actRemoveContainers, ids: []string{"sb0-app-0"}, reason: "garbage collection",
				waits: crash, wakeIn: 19 * time.Second},
		},
		{
			name: "collects init containers and containers of old sandboxes",
			pod:  specPod(always, []v1.Container{init1}, app),
			rt: newRT().sandbox("sb0", 0, false).sandbox("sb1", 1, true).
				exited("sb0", "init1", 0, 0, time.Hour).exited("sb0", "app", 0, 137, time.Hour).
				exited("sb1", "init1", 1, 1, 30*time.Minute).exited("sb1", "init1", 2, 0, 20*time.Minute).
				exited("sb0", "app", 1, 137, 15*time.Minute).running("sb1", "app", 2),
			want: planWant{kind: actRemoveContainers, ids: []string{"sb0-app-0", "sb0-init1-0"}, reason: "garbage collection"},
		},
		{
			name: "two containers per name: nothing to collect",
			pod:  specPod(always, nil, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 1, time.Hour).running("sb0", "app", 1),
			want: planWant{kind: actNone},
		},
		{
			name: "collection waits for the containers to be started",
			pod:  specPod(always, nil, app, side),
			rt: newRT().sandbox("sb0", 0, true).
				exited("sb0", "app", 0, 1, time.Hour).exited("sb0", "app", 1, 1, 50*time.Minute).running("sb0", "app", 2),
			want: planWant{kind: actStartContainer, container: "side"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planner{pod: tt.pod, snap: tt.rt.snap, sandboxOf: tt.rt.sandboxOf, phase: tt.phase,
				now: fixtureNow, base: testBase, max: testMax}.plan()
			checkPlan(t, tt.rt, got, tt.want)
		})
	}
}

func checkPlan(t *testing.T, rt *rtFixture, got planResult, want planWant) {
	t.Helper()
	a := got.act
	if a.kind != want.kind {
		t.Fatalf("action = %s %v (%s), want %s", a.kind, a.ids, a.reason, want.kind)
	}
	switch a.kind {
	case actRunSandbox:
		if a.attempt != want.attempt {
			t.Errorf("sandbox attempt = %d, want %d", a.attempt, want.attempt)
		}
	case actStartContainer:
		if a.container == nil || a.container.Name != want.container {
			t.Fatalf("starts %v, want %s", a.container, want.container)
		}
		if a.attempt != want.attempt {
			t.Errorf("container attempt = %d, want %d", a.attempt, want.attempt)
		}
		if a.isInit != want.isInit {
			t.Errorf("isInit = %v, want %v", a.isInit, want.isInit)
		}
		if a.createdID != want.createdID {
			t.Errorf("createdID = %q, want %q", a.createdID, want.createdID)
		}
		if sb := rt.snap.latestSandbox(); a.sandbox != sb {
			t.Errorf("starts in sandbox %s, want the newest %s", a.sandbox.GetId(), sb.GetId())
		}
	case actStopContainers, actStopSandbox, actRemoveContainers:
		ids := slices.Clone(a.ids)
		sort.Strings(ids)
		if !slices.Equal(ids, want.ids) {
			t.Errorf("ids = %v, want %v", ids, want.ids)
		}
		if a.reason != want.reason {
			t.Errorf("reason = %q, want %q", a.reason, want.reason)
		}
	}
	waits := map[string]string{}
	for name, w := range got.waits {
		waits[name] = w.reason
	}
	if want.waits == nil {
		want.waits = map[string]string{}
	}
	if fmt.Sprint(waits) != fmt.Sprint(want.waits) {
		t.Errorf("waits = %v, want %v", waits, want.waits)
	}
	var wakeIn time.Duration
	if !got.wakeAt.IsZero() {
		wakeIn = got.wakeAt.Sub(fixtureNow)
	}
	if wakeIn != want.wakeIn {
		t.Errorf("wakes in %s, want %s", wakeIn, want.wakeIn)
	}
}

// TestPlanBackOffMessage checks the waiting message a user reads in the
// container status while it backs off.
func TestPlanBackOffMessage(t *testing.T) {
	tests := []struct {
		name    string
		attempt uint32
		want    string
	}{
		{name: "base", attempt: 1, want: "back-off 10s restarting failed container=app pod=web_default(uid-1)"},
		{name: "doubled", attempt: 3, want: "back-off 40s restarting failed container=app pod=web_default(uid-1)"},
		{name: "capped", attempt: 7, want: "back-off 5m0s restarting failed container=app pod=web_default(uid-1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newRT().sandbox("sb0", 0, true).exited("sb0", "app", tt.attempt, 1, 0)
			got := planner{pod: specPod(v1.RestartPolicyAlways, nil, specCtr("app")), snap: rt.snap, sandboxOf: rt.sandboxOf,
				now: fixtureNow, base: testBase, max: testMax}.plan()
			if w := got.waits["app"]; w.reason != ReasonCrashLoopBackOff || w.message != tt.want {
				t.Errorf("wait = %+v, want %s %q", w, ReasonCrashLoopBackOff, tt.want)
			}
		})
	}
}

// TestPlanRestartCountAnnotation checks that a container adopted without
// an attempt number backs off by its restartCount annotation.
func TestPlanRestartCountAnnotation(t *testing.T) {
	tests := []struct {
		name        string
		annotation  string
		wantWakeIn  time.Duration
		wantAttempt uint32
	}{
		// An exited container with attempt 0 but a restartCount annotation
		// (a container adopted from another kubelet) backs off by the
		// annotation, then restarts at attempt 1 (the attempt, not the count).
		{name: "annotation drives the back-off", annotation: "2", wantWakeIn: 20 * time.Second},
		{name: "no annotation: immediate restart", annotation: "", wantAttempt: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 1, 0).set(func(c *runtimeapi.ContainerStatus) {
				if tt.annotation != "" {
					c.Annotations = map[string]string{podspec.AnnotationRestartCount: tt.annotation}
				}
			})
			got := planner{pod: specPod(v1.RestartPolicyAlways, nil, specCtr("app")), snap: rt.snap, sandboxOf: rt.sandboxOf,
				now: fixtureNow, base: testBase, max: testMax}.plan()
			want := planWant{kind: actStartContainer, container: "app", attempt: tt.wantAttempt}
			if tt.wantWakeIn > 0 {
				want = planWant{kind: actNone, waits: map[string]string{"app": ReasonCrashLoopBackOff}, wakeIn: tt.wantWakeIn}
			}
			checkPlan(t, rt, got, want)
		})
	}
}

// TestPlanBackOffAfterSpecChange follows a crash-looping container whose
// image is changed, as upstream's "back-off timer reset on image update"
// spec does: the container of the old spec is restarted at once, and the
// new spec's crashes back off from the base again, not from the old count.
func TestPlanBackOffAfterSpecChange(t *testing.T) {
	pod := specPod(v1.RestartPolicyAlways, nil, specCtr("app"))
	plan := func(rt *rtFixture, from map[string]int32) planResult {
		return planner{pod: pod, snap: rt.snap, sandboxOf: rt.sandboxOf, now: fixtureNow,
			base: testBase, max: testMax, backoffFrom: from}.plan()
	}
	// The old spec crashed 6 times: it would wait 300 s.
	old := plan(newRT().sandbox("sb0", 0, true).exited("sb0", "app", 6, 1, time.Second).set(withHash("old-spec")), nil)
	if old.act.kind != actStartContainer || old.backoffFrom["app"] != 6 {
		t.Fatalf("old spec: act %v, backoffFrom %v; want a start now, from 6", old.act.kind, old.backoffFrom)
	}
	// The new spec's first crash (restart count 7) waits the base.
	cur := newRT().sandbox("sb0", 0, true).exited("sb0", "app", 7, 1, time.Second).set(withHash(podspec.ContainerHash(&pod.Spec.Containers[0])))
	got := plan(cur, old.backoffFrom)
	if got.act.kind != actNone || got.wakeAt.Sub(fixtureNow) != 9*time.Second {
		t.Fatalf("new spec's first crash: act %v, wake in %v; want a wait of 10 s from the exit", got.act.kind, got.wakeAt.Sub(fixtureNow))
	}
	// Without the record (a restarted PodActor) the count decides, as before.
	if got := plan(cur, nil); got.wakeAt.Sub(fixtureNow) != 299*time.Second {
		t.Fatalf("without backoffFrom: wake in %v, want the capped 300 s from the exit", got.wakeAt.Sub(fixtureNow))
	}
}

// Container restart rules (ContainerRestartRules, beta and on since v1.35):
// the cases of upstream's "Container Restart Rules" NodeConformance specs
// and the Job spec "containers restarted by container restart policy
// should not trigger PodFailurePolicy", in the planner and the phase.

func ctrPolicy(c v1.Container, p v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) v1.Container {
	c.RestartPolicy = &p
	c.RestartPolicyRules = rules
	return c
}

func onExit(op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
}

func TestContainerShouldRestart(t *testing.T) {
	in42 := onExit(v1.ContainerRestartRuleOnExitCodesOpIn, 42)
	notIn01 := onExit(v1.ContainerRestartRuleOnExitCodesOpNotIn, 0, 1)
	allOf := v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{3}}}
	app := specCtr("app")
	tests := []struct {
		name string
		pod  v1.RestartPolicy
		c    v1.Container
		code int32
		want bool
	}{
		{"pod Always, no container policy, exit 1", v1.RestartPolicyAlways, app, 1, true},
		{"pod Always, no container policy, exit 0", v1.RestartPolicyAlways, app, 0, true},
		{"pod OnFailure, no container policy, exit 0", v1.RestartPolicyOnFailure, app, 0, false},
		{"pod Never, no container policy, exit 1", v1.RestartPolicyNever, app, 1, false},
		{"pod Always, container Never, exit 1", v1.RestartPolicyAlways, ctrPolicy(app, v1.ContainerRestartPolicyNever), 1, false},
		{"pod Never, container Always, exit 1", v1.RestartPolicyNever, ctrPolicy(app, v1.ContainerRestartPolicyAlways), 1, true},
		{"pod Never, container OnFailure, exit 1", v1.RestartPolicyNever, ctrPolicy(app, v1.ContainerRestartPolicyOnFailure), 1, true},
		{"pod Never, container OnFailure, exit 0", v1.RestartPolicyNever, ctrPolicy(app, v1.ContainerRestartPolicyOnFailure), 0, false},
		{"rule In 42 matches 42", v1.RestartPolicyNever, ctrPolicy(app, v1.ContainerRestartPolicyNever, in42), 42, true},
		{"rule In 42 does not match 1: container Never", v1.RestartPolicyNever, ctrPolicy(app, v1.ContainerRestartPolicyNever, in42), 1, false},
		{"rule In 42 does not match 0: container OnFailure", v1.RestartPolicyAlways, ctrPolicy(app, v1.ContainerRestartPolicyOnFailure, in42), 0, false},
		{"rule NotIn 0,1 matches 2", v1.RestartPolicyNever, ctrPolicy(app, v1.ContainerRestartPolicyNever, notIn01), 2, true},
		{"rule NotIn 0,1 does not match 1", v1.RestartPolicyNever, ctrPolicy(app, v1.ContainerRestartPolicyNever, notIn01), 1, false},
		{"second rule matches", v1.RestartPolicyNever, ctrPolicy(app, v1.ContainerRestartPolicyNever, in42, notIn01), 7, true},
		{"RestartAllContainers (alpha, off) falls back to the container's policy", v1.RestartPolicyAlways,
			ctrPolicy(app, v1.ContainerRestartPolicyNever, allOf), 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := v1.PodSpec{RestartPolicy: tt.pod}
			if got := containerShouldRestart(&tt.c, &spec, tt.code); got != tt.want {
				t.Errorf("containerShouldRestart = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRestartsAfterKill(t *testing.T) {
	app := specCtr("app")
	tests := []struct {
		pod  v1.RestartPolicy
		c    v1.Container
		want bool
	}{
		{v1.RestartPolicyAlways, app, true},
		{v1.RestartPolicyNever, app, false},
		{v1.RestartPolicyAlways, ctrPolicy(app, v1.ContainerRestartPolicyNever), false},
		{v1.RestartPolicyNever, ctrPolicy(app, v1.ContainerRestartPolicyOnFailure), true},
	}
	for _, tt := range tests {
		spec := v1.PodSpec{RestartPolicy: tt.pod}
		if got := restartsAfterKill(&tt.c, &spec); got != tt.want {
			t.Errorf("pod %s, container %v: restartsAfterKill = %v, want %v", tt.pod, tt.c.RestartPolicy, got, tt.want)
		}
	}
}

func TestPlanRestartRules(t *testing.T) {
	app := specCtr("app")
	in42 := onExit(v1.ContainerRestartRuleOnExitCodesOpIn, 42)
	never42 := ctrPolicy(app, v1.ContainerRestartPolicyNever, in42)
	always, never := v1.RestartPolicyAlways, v1.RestartPolicyNever
	exitedApp := func(code int32) *rtFixture {
		return newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, code, time.Minute)
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		rt   *rtFixture
		want planWant
	}{
		{name: "rule match (In 42, exit 42) restarts in a Never pod",
			pod: specPod(never, nil, never42), rt: exitedApp(42),
			want: planWant{kind: actStartContainer, container: "app", attempt: 1}},
		{name: "rule mismatch (In 42, exit 1), container Never: not restarted",
			pod: specPod(never, nil, never42), rt: exitedApp(1),
			want: planWant{kind: actNone}},
		{name: "container Never in an Always pod: not restarted",
			pod: specPod(always, nil, ctrPolicy(app, v1.ContainerRestartPolicyNever)), rt: exitedApp(1),
			want: planWant{kind: actNone}},
		{name: "container Always in a Never pod: restarted",
			pod: specPod(never, nil, ctrPolicy(app, v1.ContainerRestartPolicyAlways)), rt: exitedApp(1),
			want: planWant{kind: actStartContainer, container: "app", attempt: 1}},
		{name: "no container policy in an Always pod: restarted",
			pod: specPod(always, nil, app), rt: exitedApp(1),
			want: planWant{kind: actStartContainer, container: "app", attempt: 1}},
		{name: "container OnFailure in a Never pod, exit 0: not restarted",
			pod: specPod(never, nil, ctrPolicy(app, v1.ContainerRestartPolicyOnFailure)), rt: exitedApp(0),
			want: planWant{kind: actNone}},
		{name: "rule match again: back-off as upstream (10 s after the first restart)",
			pod: specPod(never, nil, never42),
			rt: newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 42, time.Hour).
				exited("sb0", "app", 1, 42, time.Second),
			want: planWant{kind: actNone, waits: map[string]string{"app": ReasonCrashLoopBackOff}, wakeIn: 9 * time.Second}},
		{name: "a container that finished in an earlier sandbox and matches a rule runs again",
			pod:  specPod(never, nil, never42),
			rt:   newRT().sandbox("sb0", 0, false).sandbox("sb1", 1, true).exited("sb0", "app", 0, 42, time.Minute),
			want: planWant{kind: actStartContainer, container: "app", attempt: 1}},
		{name: "a container that finished in an earlier sandbox without a match stays done",
			pod:  specPod(never, nil, never42, specCtr("side")),
			rt:   newRT().sandbox("sb0", 0, false).sandbox("sb1", 1, true).exited("sb0", "app", 0, 1, time.Minute),
			want: planWant{kind: actStartContainer, container: "side"}},
		{name: "failed init container with a matching rule re-runs in a Never pod",
			pod:  specPod(never, []v1.Container{ctrPolicy(specCtr("init"), v1.ContainerRestartPolicyNever, in42)}, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "init", 0, 42, time.Minute),
			want: planWant{kind: actStartContainer, container: "init", attempt: 1, isInit: true}},
		{name: "failed init container with its own Never stays failed in an Always pod",
			pod:  specPod(always, []v1.Container{ctrPolicy(specCtr("init"), v1.ContainerRestartPolicyNever)}, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "init", 0, 1, time.Minute),
			want: planWant{kind: actNone}},
		{name: "succeeded init container with its own OnFailure is done",
			pod:  specPod(never, []v1.Container{ctrPolicy(specCtr("init"), v1.ContainerRestartPolicyOnFailure)}, app),
			rt:   newRT().sandbox("sb0", 0, true).exited("sb0", "init", 0, 0, time.Minute),
			want: planWant{kind: actStartContainer, container: "app"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planner{pod: tt.pod, snap: tt.rt.snap, sandboxOf: tt.rt.sandboxOf, phase: v1.PodRunning,
				now: fixtureNow, base: testBase, max: testMax}.plan()
			checkPlan(t, tt.rt, got, tt.want)
		})
	}
}

func TestPhaseRestartRules(t *testing.T) {
	app, side := specCtr("app"), specCtr("side")
	in42 := onExit(v1.ContainerRestartRuleOnExitCodesOpIn, 42)
	never42 := ctrPolicy(app, v1.ContainerRestartPolicyNever, in42)
	always, never := v1.RestartPolicyAlways, v1.RestartPolicyNever
	exitedApp := func(code int32) *rtFixture {
		return newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, code, time.Second)
	}
	tests := []struct {
		name  string
		pod   *v1.Pod
		rt    *rtFixture
		phase v1.PodPhase
	}{
		{"rule match: to be restarted, Running", specPod(never, nil, never42), exitedApp(42), v1.PodRunning},
		{"rule mismatch, container Never: Failed", specPod(never, nil, never42), exitedApp(1), v1.PodFailed},
		{"container Never in an Always pod, exit 1: Failed",
			specPod(always, nil, ctrPolicy(app, v1.ContainerRestartPolicyNever)), exitedApp(1), v1.PodFailed},
		{"container Never in an Always pod, exit 0: Succeeded",
			specPod(always, nil, ctrPolicy(app, v1.ContainerRestartPolicyNever)), exitedApp(0), v1.PodSucceeded},
		{"container Always in a Never pod, exit 1: Running",
			specPod(never, nil, ctrPolicy(app, v1.ContainerRestartPolicyAlways)), exitedApp(1), v1.PodRunning},
		{"Job failOnce: container OnFailure in a Never pod, exit 1: Running (not Failed)",
			specPod(never, nil, ctrPolicy(app, v1.ContainerRestartPolicyOnFailure)), exitedApp(1), v1.PodRunning},
		{"Job failOnce: container OnFailure in a Never pod, then exit 0: Succeeded",
			specPod(never, nil, ctrPolicy(app, v1.ContainerRestartPolicyOnFailure)),
			newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 1, time.Minute).exited("sb0", "app", 1, 0, time.Second),
			v1.PodSucceeded},
		{"rule match waiting in back-off: Running",
			specPod(never, nil, never42),
			newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 42, time.Hour).exited("sb0", "app", 1, 42, time.Second),
			v1.PodRunning},
		{"one container done for good, one to be restarted: Running",
			specPod(always, nil, ctrPolicy(app, v1.ContainerRestartPolicyNever), side),
			newRT().sandbox("sb0", 0, true).exited("sb0", "app", 0, 1, time.Second).exited("sb0", "side", 0, 0, time.Second),
			v1.PodRunning},
		{"init container OnFailure in a Never pod, failed: Pending (re-runs)",
			specPod(never, []v1.Container{ctrPolicy(specCtr("init"), v1.ContainerRestartPolicyOnFailure)}, app),
			newRT().sandbox("sb0", 0, true).exited("sb0", "init", 0, 1, time.Second), v1.PodPending},
		{"init container Never in an Always pod, failed: Failed",
			specPod(always, []v1.Container{ctrPolicy(specCtr("init"), v1.ContainerRestartPolicyNever)}, app),
			newRT().sandbox("sb0", 0, true).exited("sb0", "init", 0, 1, time.Second), v1.PodFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := computeStatus(statusInput{pod: tt.pod, snap: tt.rt.snap, runtimeName: "containerd",
				hostIP: "192.0.2.1", now: fixtureNow})
			if st.Phase != tt.phase {
				t.Errorf("phase = %s, want %s", st.Phase, tt.phase)
			}
		})
	}
}
