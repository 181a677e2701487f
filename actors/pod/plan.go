package pod

import (
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/podspec"
)

// actionKind is the one thing a PodActor does next. A pod does one runtime
// operation at a time; after it, the actor inspects the runtime again and
// plans the next step (level-triggered, like the upstream SyncPod).
type actionKind int

const (
	actNone actionKind = iota
	actRunSandbox
	actStopContainers
	actStopSandbox
	actStartContainer
	actRemoveContainers
	actResize // resize.go: UpdateContainerResources and the pod cgroup
)

func (k actionKind) String() string {
	return [...]string{"none", "run-sandbox", "stop-containers", "stop-sandbox", "start-container", "remove-containers", "resize"}[k]
}

type action struct {
	kind actionKind
	// run-sandbox: the sandbox attempt.
	attempt uint32
	// start-container
	container *v1.Container
	isInit    bool
	ephemeral bool   // an ephemeral container: never restarted
	targetID  string // ephemeral: the container whose process namespace it joins
	createdID string // start this already created container instead of creating one
	imageRef  string // the runtime's reference of the image, once present
	sandbox   *runtimeapi.PodSandboxStatus
	// stop-containers / remove-containers / stop-sandbox
	ids    []string
	reason string
	grace  int64 // stop-containers: grace period in seconds (0: the pod's)
	// resize: what to change (resize.go)
	resize *resizeOp
}

// planResult is the next action, the waiting reasons the plan found (shown
// in the status) and when to look again if nothing can be done now.
type planResult struct {
	act    action
	waits  map[string]waitInfo
	wakeAt time.Time
	// backoffFrom: containers whose spec changed since they last ran, by
	// name, with their restart count then: the back-off counts restarts
	// from there (the caller keeps it for later plans).
	backoffFrom map[string]int32
}

// backoff is the delay before restarting a container that has already been
// restarted n times: none for the first restart, then base doubling to cap
// (10 s to 300 s upstream).
func backoff(n int32, base, maxDelay time.Duration) time.Duration {
	return actorkit.Backoff{Base: base, Cap: maxDelay}.Delay(int(n))
}

// containerShouldRestart decides whether an exited container runs again,
// as upstream's ContainerShouldRestart (ContainerRestartRules, beta and on
// since v1.35): a container with its own restartPolicy first has its
// restartPolicyRules matched against the exit code in order (the first
// matching rule's action Restart restarts it), then its own policy
// applies; a container without one follows the pod's restartPolicy.
func containerShouldRestart(c *v1.Container, spec *v1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy == nil {
		return shouldRestart(spec.RestartPolicy, exitCode)
	}
	if rule, ok := matchingRestartRule(c, exitCode); ok && rule.Action == v1.ContainerRestartRuleActionRestart {
		return true
	}
	switch *c.RestartPolicy {
	case v1.ContainerRestartPolicyAlways:
		return true
	case v1.ContainerRestartPolicyOnFailure:
		return exitCode != 0
	case v1.ContainerRestartPolicyNever:
		return false
	}
	return shouldRestart(spec.RestartPolicy, exitCode)
}

// matchingRestartRule is the first of a container's restartPolicyRules
// whose exit codes match: operator In when the code is among the values,
// NotIn when it is not; a rule without exit codes or with another operator
// never matches.
func matchingRestartRule(c *v1.Container, exitCode int32) (v1.ContainerRestartRule, bool) {
	for _, r := range c.RestartPolicyRules {
		if r.ExitCodes == nil {
			continue
		}
		in := slices.Contains(r.ExitCodes.Values, exitCode)
		switch r.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn:
			if in {
				return r, true
			}
		case v1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !in {
				return r, true
			}
		}
	}
	return v1.ContainerRestartRule{}, false
}

// restartsAfterKill reports whether a running container that is killed
// (a failed liveness or startup probe) is to run again: upstream decides
// this by the container's own restartPolicy when it has one (its rules need
// an exit code, which a running container has not), else by the pod's
// (anything but Never).
func restartsAfterKill(c *v1.Container, spec *v1.PodSpec) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy != v1.ContainerRestartPolicyNever
	}
	return spec.RestartPolicy != v1.RestartPolicyNever
}

// shouldRestart applies the pod's restartPolicy to an exited container.
func shouldRestart(policy v1.RestartPolicy, exitCode int32) bool {
	switch policy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return true
}

type planner struct {
	pod       *v1.Pod
	snap      *snapshot
	sandboxOf map[string]string
	phase     v1.PodPhase
	now       time.Time
	base, max time.Duration
	// probe says whether a running container has started (its startup
	// probe succeeded); nil: every running container has.
	probe func(c *v1.Container, id string) (started, ready bool)
	// backoffFrom is, by container name, the restart count at which the
	// current spec's back-off began (planResult.backoffFrom of earlier
	// plans): upstream keys its back-off by the container's hash, so a new
	// image starts with no delay and then 10 s, not where the old one was.
	backoffFrom map[string]int32
	// resizeRestarted are the containers (by ID) stopped for a resize
	// (resizePolicy RestartContainer): they are started again whatever
	// their restart policy, as upstream.
	resizeRestarted map[string]bool
	// resources is what a running container runs with (resize.go); nil:
	// no resize restarts.
	resources func(*runtimeapi.ContainerStatus) *runtimeapi.LinuxContainerResources
	// legacyOK are running containers (by ID) whose legacy whole-spec hash
	// matched the spec when first seen: a resize since does not make them
	// a changed spec (resize.go).
	legacyOK map[string]bool
}

// started reports whether a running container has started.
func (p planner) started(c *v1.Container, id string) bool {
	if p.probe == nil {
		return true
	}
	started, _ := p.probe(c, id)
	return started
}

// plan decides the next step for a desired, not terminating pod.
func (p planner) plan() planResult {
	res := planResult{waits: map[string]waitInfo{}}
	running := p.runningContainers("")

	if p.phase == v1.PodSucceeded || p.phase == v1.PodFailed {
		// A finished pod keeps its containers (for logs and status) but
		// nothing of it runs.
		if len(running) > 0 {
			res.act = action{kind: actStopContainers, ids: running, reason: "pod finished"}
			return res
		}
		if sb := p.snap.latestSandbox(); sb != nil && sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			res.act = action{kind: actStopSandbox, ids: []string{sb.Id}, reason: "pod finished"}
		}
		return res
	}

	sb := p.snap.latestSandbox()
	if sb == nil || sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		if len(running) > 0 {
			res.act = action{kind: actStopContainers, ids: running, reason: "sandbox changed"}
			return res
		}
		var attempt uint32
		if sb != nil {
			attempt = sb.GetMetadata().GetAttempt() + 1
		}
		res.act = action{kind: actRunSandbox, attempt: attempt}
		return res
	}
	if stale := p.runningContainers(sb.Id); len(stale) > 0 {
		res.act = action{kind: actStopContainers, ids: stale, reason: "container of an old sandbox"}
		return res
	}

	// Ephemeral containers come first, as upstream: they run even when an
	// init container cannot start.
	if act, ok := p.ephemeral(sb); ok {
		res.act = act
		return res
	}

	initialized := p.mainCreated(sb.Id)
	for i := range p.pod.Spec.InitContainers {
		c := &p.pod.Spec.InitContainers[i]
		cur := p.snap.inSandbox(c.Name, sb.Id, p.sandboxOf)
		if podspec.IsSidecar(c) {
			// A restartable init container (sidecar) only has to be running
			// and started (its startup probe succeeded) for the next one to
			// start; it keeps running, and is restarted whenever it exits.
			if cur != nil && cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				if p.resizeRestart(c, true, cur) {
					// Resized with a RestartContainer policy (resize.go).
					if res.backoffFrom == nil {
						res.backoffFrom = map[string]int32{}
					}
					res.backoffFrom[c.Name] = restartCount(cur)
					res.act = action{kind: actStopContainers, ids: []string{cur.Id}, reason: reasonResizeRestart}
					return res
				}
				if initialized || p.started(c, cur.Id) {
					continue
				}
				return res // its startup probe's success continues
			}
			if act, done := p.step(c, true, cur, sb, &res); done {
				res.act = act
				return res
			}
			if initialized {
				continue // a sidecar in back-off holds up nothing once the pod is initialized
			}
			return res
		}
		if cur != nil && cur.State == runtimeapi.ContainerState_CONTAINER_EXITED && cur.ExitCode == 0 {
			continue
		}
		if act, done := p.step(c, true, cur, sb, &res); done {
			res.act = act
			return res
		}
		// An init container that has not succeeded blocks the ones after it.
		return res
	}

	for i := range p.pod.Spec.Containers {
		c := &p.pod.Spec.Containers[i]
		cur := p.snap.inSandbox(c.Name, sb.Id, p.sandboxOf)
		if act, done := p.step(c, false, cur, sb, &res); done {
			res.act = act
			return res
		}
	}

	if ids := p.deadContainers(); len(ids) > 0 {
		res.act = action{kind: actRemoveContainers, ids: ids, reason: "garbage collection"}
	}
	return res
}

// step decides for one container; done means the action is to be taken now.
func (p planner) step(c *v1.Container, isInit bool, cur *runtimeapi.ContainerStatus, sb *runtimeapi.PodSandboxStatus, res *planResult) (action, bool) {
	start := action{kind: actStartContainer, container: c, isInit: isInit, sandbox: sb}
	if cur == nil {
		prev := p.snap.latest(c.Name)
		if prev != nil && prev.State == runtimeapi.ContainerState_CONTAINER_EXITED && !isInit &&
			!containerShouldRestart(c, &p.pod.Spec, prev.ExitCode) {
			return action{}, false // finished in an earlier sandbox, not to be run again
		}
		start.attempt = p.snap.nextAttempt(c.Name)
		return start, true
	}
	switch cur.State {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		start.createdID = cur.Id
		start.attempt = cur.GetMetadata().GetAttempt()
		return start, true
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		if h := cur.GetAnnotations()[podspec.AnnotationContainerHash]; !isInit && h != "" && !podspec.ContainerHashMatches(c, h) && !p.legacyOK[cur.Id] {
			return action{kind: actStopContainers, ids: []string{cur.Id}, reason: "container spec changed"}, true
		}
		if p.resizeRestart(c, isInit, cur) {
			// Its resizePolicy restarts it for a resource being resized
			// (resize.go): stopped here, started again at once below.
			if res.backoffFrom == nil {
				res.backoffFrom = map[string]int32{}
			}
			res.backoffFrom[c.Name] = restartCount(cur)
			return action{kind: actStopContainers, ids: []string{cur.Id}, reason: reasonResizeRestart}, true
		}
		return action{}, false
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		var restart bool
		switch {
		case isInit && podspec.IsSidecar(c):
			restart = true // sidecars always come back
		case isInit && cur.ExitCode == 0:
			restart = false // a succeeded init container is done
		default:
			// A regular container, or a failed init container: its own
			// restartPolicy and rules, else the pod's (Always re-runs a
			// failed init container, as OnFailure).
			restart = containerShouldRestart(c, &p.pod.Spec, cur.ExitCode)
		}
		if p.resizeRestarted[cur.Id] {
			restart = true // stopped for a resize: it runs again whatever its policy
		}
		if !restart {
			return action{}, false
		}
		n := restartCount(cur)
		if from, ok := p.backoffFrom[c.Name]; ok && n >= from {
			n -= from
		}
		if h := cur.GetAnnotations()[podspec.AnnotationContainerHash]; h != "" && !podspec.ContainerHashMatches(c, h) {
			// The spec changed since it ran (a new image): upstream's back-off
			// is keyed by the container's hash, so the new spec starts afresh.
			if res.backoffFrom == nil {
				res.backoffFrom = map[string]int32{}
			}
			res.backoffFrom[c.Name] = restartCount(cur)
			n = 0
		}
		delay := backoff(n, p.base, p.max)
		finished := time.Unix(0, cur.FinishedAt)
		if until := finished.Add(delay); delay > 0 && p.now.Before(until) {
			res.waits[c.Name] = waitInfo{
				reason:  ReasonCrashLoopBackOff,
				message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, c.Name, p.pod.Name, p.pod.Namespace, p.pod.UID),
			}
			if res.wakeAt.IsZero() || until.Before(res.wakeAt) {
				res.wakeAt = until
			}
			return action{}, false
		}
		start.attempt = p.snap.nextAttempt(c.Name)
		return start, true
	}
	return action{}, false // unknown state: wait for the runtime to settle
}

// ephemeral returns the start of an ephemeral container that has never
// run: upstream starts one only while no container of its name exists, and
// never restarts it.
func (p planner) ephemeral(sb *runtimeapi.PodSandboxStatus) (action, bool) {
	for i := range p.pod.Spec.EphemeralContainers {
		ec := &p.pod.Spec.EphemeralContainers[i]
		c := ephemeralContainer(ec)
		all := p.snap.containersOf(c.Name)
		start := action{kind: actStartContainer, container: c, ephemeral: true, sandbox: sb}
		switch {
		case len(all) == 0:
		case all[0].State == runtimeapi.ContainerState_CONTAINER_CREATED && p.sandboxOf[all[0].Id] == sb.Id:
			start.createdID, start.attempt = all[0].Id, all[0].GetMetadata().GetAttempt()
		default:
			continue // it ran (or runs): never again
		}
		if t := ec.TargetContainerName; t != "" {
			cur := p.snap.inSandbox(t, sb.Id, p.sandboxOf)
			if cur == nil {
				continue // its target has no container yet
			}
			start.targetID = cur.Id
		}
		return start, true
	}
	return action{}, false
}

// mainCreated reports whether a regular container exists in the sandbox:
// the pod got past its initialization there.
func (p planner) mainCreated(sandboxID string) bool {
	for i := range p.pod.Spec.Containers {
		if p.snap.inSandbox(p.pod.Spec.Containers[i].Name, sandboxID, p.sandboxOf) != nil {
			return true
		}
	}
	return false
}

// runningContainers lists running or created containers, all of them when
// keepSandbox is empty, else those not in keepSandbox.
func (p planner) runningContainers(keepSandbox string) []string {
	var ids []string
	for _, cs := range p.snap.containers {
		for _, c := range cs {
			if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				continue
			}
			if keepSandbox != "" && p.sandboxOf[c.Id] == keepSandbox {
				continue
			}
			ids = append(ids, c.Id)
		}
	}
	return ids
}

// deadContainers are the exited containers beyond what status needs: per
// container name the newest container and the newest exited one before it
// stay (current state, lastState and the restart count), as upstream keeps
// one dead container per container name.
func (p planner) deadContainers() []string {
	var ids []string
	for _, cs := range p.snap.containers {
		keptDead := false
		for _, c := range cs[1:] {
			if c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
				continue
			}
			if !keptDead {
				keptDead = true
				continue
			}
			ids = append(ids, c.Id)
		}
	}
	return ids
}
