package pod

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/podspec"
)

// Waiting reasons, as upstream.
const (
	ReasonContainerCreating    = "ContainerCreating"
	ReasonPodInitializing      = "PodInitializing"
	ReasonCrashLoopBackOff     = "CrashLoopBackOff"
	ReasonCreateContainerError = "CreateContainerError"
	ReasonRunContainerError    = "RunContainerError"
	ReasonCompleted            = "Completed"
	ReasonError                = "Error"
	ReasonPodCompleted         = "PodCompleted"
	ReasonContainersNotReady   = "ContainersNotReady"
	ReasonContainersNotInit    = "ContainersNotInitialized"
)

// waitInfo is why a container is waiting when the runtime alone cannot say
// (image pull failures, back-off, create errors).
type waitInfo struct {
	reason  string
	message string
}

// statusInput is everything the status of a pod is computed from.
type statusInput struct {
	pod         *v1.Pod
	snap        *snapshot
	waits       map[string]waitInfo
	runtimeName string
	hostIP      string
	startTime   time.Time
	prev        *v1.PodStatus
	now         time.Time
	// probe says whether a running container has started and is ready;
	// nil: every running container is both.
	probe func(c *v1.Container, id string) (started, ready bool)
	// deadlineExceeded: activeDeadlineSeconds passed, the pod has failed.
	deadlineExceeded bool
	// resources is what a running container runs with (resize.go); nil:
	// the statuses carry no resources.
	resources func(*runtimeapi.ContainerStatus) *runtimeapi.LinuxContainerResources

	// defaultWait is the waiting reason of a container with no runtime
	// container (set by computeStatus).
	defaultWait string
}

// containerKind is which list of the pod a container is in.
type containerKind int

const (
	kindRegular containerKind = iota
	kindInit
	kindEphemeral
)

// computeStatus derives the pod status from the runtime snapshot, as the
// upstream kubelet's generateAPIPodStatus does.
func computeStatus(in statusInput) v1.PodStatus {
	pod := in.pod
	st := v1.PodStatus{
		QOSClass: podspec.QOSClass(pod),
		HostIP:   in.hostIP,
	}
	if in.hostIP != "" {
		st.HostIPs = []v1.HostIP{{IP: in.hostIP}}
	}
	if !in.startTime.IsZero() {
		t := metav1.NewTime(in.startTime.Truncate(time.Second))
		st.StartTime = &t
	}
	sb := in.snap.latestSandbox()
	sandboxReady := sb != nil && sb.State == runtimeapi.PodSandboxState_SANDBOX_READY
	if pod.Spec.HostNetwork {
		st.PodIP = in.hostIP
	} else if sb != nil && sb.GetNetwork().GetIp() != "" {
		st.PodIP = sb.GetNetwork().GetIp()
	}
	if st.PodIP != "" {
		st.PodIPs = []v1.PodIP{{IP: st.PodIP}}
		for _, ip := range sb.GetNetwork().GetAdditionalIps() {
			st.PodIPs = append(st.PodIPs, v1.PodIP{IP: ip.GetIp()})
		}
	}

	// Upstream (convertToAPIContainerStatuses) shows a container that has
	// no runtime container yet as PodInitializing in a pod with init
	// containers, else ContainerCreating.
	in.defaultWait = ReasonContainerCreating
	if len(pod.Spec.InitContainers) > 0 {
		in.defaultWait = ReasonPodInitializing
	}
	initDone := true
	initFailed := false
	var incomplete []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := in.containerStatus(c, kindInit)
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
		if initContainerDone(c, cs) {
			continue
		}
		initDone = false
		incomplete = append(incomplete, c.Name)
		if !podspec.IsSidecar(c) && failedForGood(pod, c, cs) {
			initFailed = true
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		st.ContainerStatuses = append(st.ContainerStatuses, in.containerStatus(c, kindRegular))
	}
	for i := range pod.Spec.EphemeralContainers {
		c := ephemeralContainer(&pod.Spec.EphemeralContainers[i])
		st.EphemeralContainerStatuses = append(st.EphemeralContainerStatuses, in.containerStatus(c, kindEphemeral))
	}

	st.Phase = podPhase(pod, st.ContainerStatuses, initDone, initFailed)
	if in.deadlineExceeded {
		st.Phase = v1.PodFailed
		st.Reason = ReasonDeadlineExceeded
		st.Message = "Pod was active on the node longer than the specified deadline"
	}
	allReady := len(st.ContainerStatuses) > 0
	for i, cs := range st.InitContainerStatuses {
		if podspec.IsSidecar(&pod.Spec.InitContainers[i]) && !cs.Ready {
			allReady = false // sidecars count for readiness, as upstream
		}
	}
	for _, cs := range st.ContainerStatuses {
		if !cs.Ready {
			allReady = false
		}
	}
	terminal := st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed
	conds := []v1.PodCondition{
		readyToStartCondition(in.snap, sandboxReady, terminal),
		initializedCondition(initDone, incomplete),
		readyCondition(v1.ContainersReady, allReady && !terminal, terminal, st.ContainerStatuses),
		gatedReady(pod, readyCondition(v1.PodReady, allReady && !terminal, terminal, st.ContainerStatuses)),
		cond(v1.PodScheduled, true, "", ""),
	}
	st.Conditions = keepTransitionTimes(conds, in.prev, in.now)
	return st
}

// readyToStartCondition is PodReadyToStartContainers: False with
// upstream v1.37's reason and message when the sandbox is not ready
// (podspec.SandboxNotReadyMessage).
func readyToStartCondition(snap *snapshot, sandboxReady, terminal bool) v1.PodCondition {
	if sandboxReady {
		return cond(v1.PodReadyToStartContainers, !terminal, "", "")
	}
	var sandboxes []*runtimeapi.PodSandboxStatus
	if snap != nil {
		sandboxes = snap.sandboxes
	}
	return cond(v1.PodReadyToStartContainers, false, podspec.ReasonPodSandboxNotReady, podspec.SandboxNotReadyMessage(sandboxes))
}

func cond(t v1.PodConditionType, ok bool, reason, msg string) v1.PodCondition {
	s := v1.ConditionFalse
	if ok {
		s = v1.ConditionTrue
	}
	return v1.PodCondition{Type: t, Status: s, Reason: reason, Message: msg}
}

func initializedCondition(done bool, incomplete []string) v1.PodCondition {
	if done {
		return cond(v1.PodInitialized, true, "", "")
	}
	return cond(v1.PodInitialized, false, ReasonContainersNotInit, "containers with incomplete status: ["+strings.Join(incomplete, " ")+"]")
}

// initContainerDone is upstream's isInitContainerInitialized: a regular
// init container has succeeded (it is then Ready), a sidecar runs and has
// started (its startup probe succeeded, or it has none).
func initContainerDone(c *v1.Container, cs v1.ContainerStatus) bool {
	if podspec.IsSidecar(c) {
		return cs.State.Running != nil && cs.Started != nil && *cs.Started
	}
	return cs.Ready
}

// ephemeralContainer is an ephemeral container as the container it is run
// as (the two types share their fields).
func ephemeralContainer(ec *v1.EphemeralContainer) *v1.Container {
	return (*v1.Container)(&ec.EphemeralContainerCommon)
}

func readyCondition(t v1.PodConditionType, ok, terminal bool, statuses []v1.ContainerStatus) v1.PodCondition {
	if ok {
		return cond(t, true, "", "")
	}
	if terminal {
		return cond(t, false, ReasonPodCompleted, "")
	}
	msg := "containers with unready status: ["
	first := true
	for _, cs := range statuses {
		if cs.Ready {
			continue
		}
		if !first {
			msg += " "
		}
		msg += cs.Name
		first = false
	}
	return cond(t, false, ReasonContainersNotReady, msg+"]")
}

// keepTransitionTimes carries over a condition's transition time while its
// status stays the same.
func keepTransitionTimes(conds []v1.PodCondition, prev *v1.PodStatus, now time.Time) []v1.PodCondition {
	t := metav1.NewTime(now.Truncate(time.Second))
	for i := range conds {
		conds[i].LastTransitionTime = t
		if prev == nil {
			continue
		}
		for _, p := range prev.Conditions {
			if p.Type == conds[i].Type && p.Status == conds[i].Status {
				conds[i].LastTransitionTime = p.LastTransitionTime
			}
		}
	}
	return conds
}

// failedForGood reports whether a failed init container will never be run
// again: its own restartPolicy and restartPolicyRules decide, else the
// pod's restartPolicy (as upstream's getPhase with ContainerRestartRules).
func failedForGood(pod *v1.Pod, c *v1.Container, cs v1.ContainerStatus) bool {
	t := lastTerminated(cs)
	return t != nil && t.ExitCode != 0 && !containerShouldRestart(c, &pod.Spec, t.ExitCode)
}

// lastTerminated is the termination a container's phase counts: its
// current state, or its last one while it waits to be restarted.
func lastTerminated(cs v1.ContainerStatus) *v1.ContainerStateTerminated {
	if t := cs.State.Terminated; t != nil {
		return t
	}
	if cs.State.Waiting != nil {
		return cs.LastTerminationState.Terminated
	}
	return nil
}

// podPhase follows the upstream kubelet's getPhase (with
// ContainerRestartRules, beta and on since v1.35): once every regular
// container has stopped, the pod stays Running while any of them is to be
// restarted (by its own restartPolicy and rules, else the pod's), and
// else is Succeeded when all succeeded, Failed when one did not.
func podPhase(pod *v1.Pod, statuses []v1.ContainerStatus, initDone, initFailed bool) v1.PodPhase {
	if initFailed {
		return v1.PodFailed
	}
	if !initDone {
		return v1.PodPending
	}
	var running, waiting, stopped, notRestartable, succeeded int
	for _, cs := range statuses {
		switch {
		case cs.State.Running != nil:
			running++
			continue
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated == nil:
			waiting++
			continue
		}
		t := lastTerminated(cs)
		if t == nil {
			continue
		}
		stopped++
		if t.ExitCode == 0 {
			succeeded++
		}
		if c := podspec.FindContainer(pod, cs.Name); c == nil || !containerShouldRestart(c, &pod.Spec, t.ExitCode) {
			notRestartable++
		}
	}
	switch {
	case waiting > 0:
		return v1.PodPending
	case running > 0:
		return v1.PodRunning
	case stopped > 0:
		if stopped != notRestartable {
			return v1.PodRunning // at least one of them is to be restarted
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		return v1.PodFailed
	}
	return v1.PodPending
}

// containerStatus builds one container's status from its newest runtime
// container (current state) and the one before (last state), as upstream's
// convertToAPIContainerStatuses and the prober manager's UpdatePodStatus:
// a regular or init container that does not run is not started; a
// succeeded init container is ready; an ephemeral container is never
// ready and has no started field.
func (in statusInput) containerStatus(c *v1.Container, kind containerKind) v1.ContainerStatus {
	cs, id := in.runtimeState(c)
	in.resizeStatus(&cs, c, kind)
	switch {
	case kind == kindEphemeral:
	case cs.State.Running != nil:
		started, ready := true, true
		if in.probe != nil {
			started, ready = in.probe(c, id)
		}
		cs.Started = &started
		cs.Ready = ready
		if kind == kindInit && !podspec.IsSidecar(c) {
			cs.Ready = false // a regular init container is ready once it succeeded
		}
	default:
		started := false
		cs.Started = &started
		if t := cs.State.Terminated; kind == kindInit && !podspec.IsSidecar(c) && t != nil && t.ExitCode == 0 {
			cs.Ready = true
		}
	}
	return cs
}

// runtimeState is a container's state, last state, IDs and restart count,
// and the runtime's ID of its newest container ("" if none).
func (in statusInput) runtimeState(c *v1.Container) (v1.ContainerStatus, string) {
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image}
	var cur, prev *runtimeapi.ContainerStatus
	if all := in.snap.containersOf(c.Name); len(all) > 0 {
		cur = all[0]
		if len(all) > 1 {
			prev = all[1]
		}
	}
	if cur != nil {
		cs.ContainerID = in.runtimeName + "://" + cur.Id
		cs.ImageID = cur.ImageRef
		cs.RestartCount = restartCount(cur)
	}
	// A wait (an image, config or runtime error of the last try) shows
	// unless the runtime has the container running: another try, or
	// another incarnation's, got it going (a running container is running,
	// as upstream's status is the runtime's first).
	if w, ok := in.waits[c.Name]; ok && (cur == nil || cur.State != runtimeapi.ContainerState_CONTAINER_RUNNING) {
		reason := w.reason
		if reason == ReasonContainerCreating {
			reason = in.defaultWait // the pod's setup failed: nothing was created
		}
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: reason, Message: w.message}
		if cur != nil && cur.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			cs.LastTerminationState.Terminated = terminated(cur, in.runtimeName)
		} else if prev != nil && prev.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			cs.LastTerminationState.Terminated = terminated(prev, in.runtimeName)
		}
		return cs, cur.GetId()
	}
	if prev != nil && prev.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		cs.LastTerminationState.Terminated = terminated(prev, in.runtimeName)
	}
	switch {
	case cur == nil:
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: in.defaultWait}
	case cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: nanoTime(cur.StartedAt)}
	case cur.State == runtimeapi.ContainerState_CONTAINER_EXITED:
		cs.State.Terminated = terminated(cur, in.runtimeName)
	default: // created, or unknown
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: ReasonContainerCreating}
	}
	return cs, cur.GetId()
}

func (s *snapshot) containersOf(name string) []*runtimeapi.ContainerStatus {
	if s == nil {
		return nil
	}
	return s.containers[name]
}

func terminated(c *runtimeapi.ContainerStatus, runtimeName string) *v1.ContainerStateTerminated {
	reason := c.Reason
	if reason == "" {
		reason = ReasonCompleted
		if c.ExitCode != 0 {
			reason = ReasonError
		}
	}
	return &v1.ContainerStateTerminated{
		ExitCode:    c.ExitCode,
		Reason:      reason,
		Message:     c.Message,
		StartedAt:   nanoTime(c.StartedAt),
		FinishedAt:  nanoTime(c.FinishedAt),
		ContainerID: runtimeName + "://" + c.Id,
	}
}

func nanoTime(ns int64) metav1.Time {
	if ns <= 0 {
		return metav1.Time{}
	}
	return metav1.NewTime(time.Unix(0, ns).Truncate(time.Second))
}
