package pod

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// In-place pod resize, the PodActor's part (upstream's computePodResizeAction
// and doPodResizeAction). The NodeActor allocates: the pod a SyncPod carries
// has its containers' resources as allocated, and PodResizePending says why
// a resize the API asks for waits. This actor makes the running containers
// match the allocation:
//
//   - what a container runs with is what the runtime reports
//     (ContainerStatus.Resources), else what this incarnation applied, else
//     what it was created with (podspec.AnnotationContainerResources);
//   - a container whose resizePolicy says RestartContainer for a resource
//     that changed is stopped and started again at once (plan.go), once:
//     the new container is created with the allocation;
//   - the others are resized with UpdateContainerResources, memory then
//     CPU, as upstream: the pod cgroup (the CgroupActor's ResizePodCgroup)
//     before the containers when the pod's limit rises, after them when it
//     falls, and the containers whose limit falls before those whose limit
//     rises; a memory limit below the current usage is refused;
//   - the status shows each container's resources and allocated requests,
//     PodResizePending (from the NodeActor) and PodResizeInProgress while
//     the containers differ from the allocation (reason Error with the
//     message when applying failed; it is retried with back-off).

// Resize reasons and events, as upstream.
const (
	reasonResizeRestart = "container resize requires restart"

	EventResizeCompleted = "ResizeCompleted"
	EventResizeError     = "ResizeError"
)

// Resizer changes a running container's resources in place (CRI
// UpdateContainerResources).
type Resizer interface {
	UpdateContainerResources(ctx context.Context, id string, r *runtimeapi.LinuxContainerResources) error
}

// statsReader reads a container's memory usage (CRI ContainerStats), to
// refuse a memory limit below it; a runtime without it cannot lower one.
type statsReader interface {
	ContainerStats(ctx context.Context, id string) (*runtimeapi.ContainerStats, error)
}

// ResizeMetrics is counted when Deps.Metrics has it: one per resize applied
// ("completed") or failed ("error").
type ResizeMetrics interface {
	IncPodResize(result string)
}

// resizeState is the PodActor's view of its pod's resize.
type resizeState struct {
	sys     *actor.ActorSystem         // asks the CgroupActor off the mailbox
	pending *messages.PodResizePending // from the NodeActor; nil: none waits
	errMsg  string                     // the last failure to apply ("": none)
	// applied: what this incarnation gave each container (by ID), for a
	// runtime that does not report resources.
	applied map[string]*runtimeapi.LinuxContainerResources
	// restarted: containers stopped for a resize, started again whatever
	// their restart policy (plan.go).
	restarted map[string]bool
	inflight  *resizeOp
	busy      bool // a resize differs from the allocation (for ResizeCompleted)
	// legacy: running containers checked for the hash of an agent before
	// in-place resize (by ID: whether it matched the spec then).
	legacy map[string]bool
}

// resizeOp is one application of the allocation to the running containers.
type resizeOp struct {
	updates []ctrUpdate
	// podMemory / podCPU: the pod's limit (sum of its containers', 0: none)
	// before and after, by which the pod cgroup is set before or after.
	memBefore, memAfter     int64
	quotaBefore, quotaAfter int64
	sharesBefore, sharesAft int64
}

// ctrUpdate is one container to resize.
type ctrUpdate struct {
	name     string
	id       string
	cur      *runtimeapi.LinuxContainerResources
	want     *runtimeapi.LinuxContainerResources
	cpu, mem bool // what changes
}

func (a *Actor) handleResizePending(ctx actor.Context, m *messages.PodResizePending) {
	if m.UID != a.uid {
		return
	}
	if m.Reason == "" {
		m = nil
	}
	if (m == nil) == (a.resize.pending == nil) && (m == nil || *m == *a.resize.pending) {
		return
	}
	a.resize.pending = m
	a.kick(ctx) // publishes the condition
}

// compactResources keeps the CPU and memory of a container's resources.
func compactResources(r *runtimeapi.ContainerResources) *runtimeapi.ContainerResources {
	l := r.GetLinux()
	if l == nil {
		return nil
	}
	return &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{
		CpuShares: l.CpuShares, CpuQuota: l.CpuQuota, CpuPeriod: l.CpuPeriod, MemoryLimitInBytes: l.MemoryLimitInBytes,
	}}
}

// actualResources is what a container runs with; nil: not known.
func (a *Actor) actualResources(cur *runtimeapi.ContainerStatus) *runtimeapi.LinuxContainerResources {
	if cur == nil {
		return nil
	}
	if r := cur.GetResources().GetLinux(); r != nil {
		return r
	}
	if r := a.resize.applied[cur.Id]; r != nil {
		return r
	}
	return podspec.ParseLinuxResources(cur.GetAnnotations()[podspec.AnnotationContainerResources])
}

// resizable lists the pod's containers that can be resized in place: the
// regular containers and the sidecars, as upstream.
func resizable(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for i := range pod.Spec.InitContainers {
		if podspec.IsSidecar(&pod.Spec.InitContainers[i]) {
			out = append(out, &pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// resizeRestart reports whether a running container is to be restarted
// for a resize: a resource whose resizePolicy is RestartContainer differs
// from the allocation.
func (p planner) resizeRestart(c *v1.Container, isInit bool, cur *runtimeapi.ContainerStatus) bool {
	if p.resources == nil || (isInit && !podspec.IsSidecar(c)) {
		return false
	}
	have := p.resources(cur)
	if have == nil {
		return false
	}
	want := podspec.ContainerLinuxResources(c)
	return (!podspec.SameCPU(want, have) && podspec.ContainerResizePolicy(c, v1.ResourceCPU) == v1.RestartContainer) ||
		(!podspec.SameMemory(want, have) && podspec.ContainerResizePolicy(c, v1.ResourceMemory) == v1.RestartContainer)
}

// resizeWanted is the resize of the running containers that differ from
// the allocation, in the current sandbox of a running pod; ok false: none.
func (a *Actor) resizeWanted(phase v1.PodPhase) (*resizeOp, bool) {
	sb := a.snap.latestSandbox()
	if phase != v1.PodRunning || sb == nil || sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, false
	}
	op := &resizeOp{}
	restarts := planner{resources: a.actualResources}
	for _, c := range resizable(a.pod) {
		cur := a.snap.inSandbox(c.Name, sb.Id, a.sboxOf)
		if cur == nil || cur.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		have := a.actualResources(cur)
		want := podspec.ContainerLinuxResources(c)
		// The OOM score adjustment goes with every update, as upstream's
		// (the allocation's: the runtime cannot change it for the running
		// process, a restarted container is created with it).
		want.OomScoreAdj = podspec.ContainerOOMScoreAdjust(a.pod, c, a.d.Config.MemoryCapacity)
		if have == nil {
			continue
		}
		op.memBefore, op.memAfter = addLimit(op.memBefore, have.GetMemoryLimitInBytes()), addLimit(op.memAfter, want.GetMemoryLimitInBytes())
		op.quotaBefore, op.quotaAfter = addLimit(op.quotaBefore, have.GetCpuQuota()), addLimit(op.quotaAfter, want.GetCpuQuota())
		op.sharesBefore += have.GetCpuShares()
		op.sharesAft += want.GetCpuShares()
		u := ctrUpdate{name: c.Name, id: cur.Id, cur: have, want: want,
			cpu: !podspec.SameCPU(want, have), mem: !podspec.SameMemory(want, have)}
		if (u.cpu || u.mem) && !restarts.resizeRestart(c, false, cur) {
			op.updates = append(op.updates, u) // (a restart applies the others: plan.go)
		}
	}
	return op, len(op.updates) > 0
}

// addLimit sums limits where -1 stands for "a container without one": the
// pod then has none either.
func addLimit(sum, v int64) int64 {
	if sum < 0 || v <= 0 {
		return -1
	}
	return sum + v
}

// resizeInProgress reports whether a running container differs from the
// allocation (or waits for its resize restart).
func (a *Actor) resizeInProgress(phase v1.PodPhase) bool {
	if a.pod == nil || a.snap == nil {
		return false
	}
	if _, ok := a.resizeWanted(phase); ok {
		return true
	}
	sb := a.snap.latestSandbox()
	if sb == nil {
		return false
	}
	p := planner{resources: a.actualResources}
	for _, c := range resizable(a.pod) {
		cur := a.snap.inSandbox(c.Name, sb.Id, a.sboxOf)
		if cur != nil && cur.State == runtimeapi.ContainerState_CONTAINER_RUNNING && p.resizeRestart(c, false, cur) {
			return true
		}
	}
	return false
}

// resizeConditions are the pod's PodResizePending and PodResizeInProgress
// conditions, as upstream (absent when not pending, not in progress).
func (a *Actor) resizeConditions(phase v1.PodPhase) []v1.PodCondition {
	var out []v1.PodCondition
	if p := a.resize.pending; p != nil {
		out = append(out, v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue,
			Reason: p.Reason, Message: p.Message, ObservedGeneration: p.Generation})
	}
	inProgress := a.resizeInProgress(phase)
	if inProgress || a.resize.errMsg != "" {
		c := v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, ObservedGeneration: a.pod.Generation}
		if a.resize.errMsg != "" {
			c.Reason, c.Message = v1.PodReasonError, a.resize.errMsg
		}
		out = append(out, c)
	}
	if a.resize.busy && !inProgress && a.resize.errMsg == "" {
		a.event(v1.EventTypeNormal, EventResizeCompleted, "resize", "Pod resize completed: %s", resizeSummary(a.pod, ""))
		a.resizeMetric("completed")
	}
	a.resize.busy = inProgress
	return out
}

// resizeStatus fills a container status's resources (what it runs with)
// and allocated resources (its allocated requests), as upstream, for a
// container the runtime holds.
func (in statusInput) resizeStatus(cs *v1.ContainerStatus, c *v1.Container, kind containerKind) {
	if kind == kindEphemeral || in.resources == nil {
		return
	}
	all := in.snap.containersOf(c.Name)
	if len(all) == 0 {
		return
	}
	var have *runtimeapi.LinuxContainerResources
	if all[0].State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		have = in.resources(all[0])
	}
	// As upstream: resources never nil (empty for a container without
	// any), allocatedResources the allocated requests as they are (nil
	// without any), every resource named in either.
	cs.Resources = podspec.StatusResources(c, have)
	cs.AllocatedResources = c.Resources.Requests.DeepCopy()
}

// resizeFunc applies op: memory, then CPU; for each, the pod cgroup before
// the containers when the pod's limit rises, after them when it falls;
// containers whose limit falls before those whose limit rises. A memory
// limit below the usage is refused before anything changes, as upstream.
func (a *Actor) resizeFunc(op *resizeOp) opFunc {
	rt, files := a.d.Runtime, a.termReader()
	stats, _ := rt.(statsReader)
	resizeCgroup := a.podCgroupResizer()
	podCgroup := func(ctx context.Context, name v1.ResourceName) error {
		if resizeCgroup == nil {
			return nil
		}
		return resizeCgroup(name)
	}
	return func(ctx context.Context) (*delta, error) {
		if err := checkMemoryUsage(ctx, stats, op); err != nil {
			return nil, err
		}
		var ids []string
		for _, u := range op.updates {
			ids = append(ids, u.id)
		}
		steps := []struct {
			name          v1.ResourceName
			changes       func(u ctrUpdate) bool
			set           func(cur, want *runtimeapi.LinuxContainerResources) *runtimeapi.LinuxContainerResources
			before, after int64
			reqUp         bool
		}{
			{name: v1.ResourceMemory, changes: func(u ctrUpdate) bool { return u.mem },
				set: func(cur, want *runtimeapi.LinuxContainerResources) *runtimeapi.LinuxContainerResources {
					r := cloneLinux(cur)
					r.MemoryLimitInBytes, r.OomScoreAdj = want.GetMemoryLimitInBytes(), want.GetOomScoreAdj()
					return r
				}, before: op.memBefore, after: op.memAfter},
			{name: v1.ResourceCPU, changes: func(u ctrUpdate) bool { return u.cpu },
				set: func(cur, want *runtimeapi.LinuxContainerResources) *runtimeapi.LinuxContainerResources {
					r := cloneLinux(cur)
					r.CpuShares, r.CpuQuota, r.CpuPeriod = want.GetCpuShares(), want.GetCpuQuota(), want.GetCpuPeriod()
					r.OomScoreAdj = want.GetOomScoreAdj()
					return r
				}, before: op.quotaBefore, after: op.quotaAfter,
				reqUp: op.sharesAft > op.sharesBefore},
		}
		for _, s := range steps {
			var us []ctrUpdate
			for _, u := range op.updates {
				if s.changes(u) {
					us = append(us, u)
				}
			}
			if len(us) == 0 {
				continue
			}
			// The pod cgroup first when its limit rises (or, the limit
			// unchanged, its CPU request), else after the containers.
			rises, falls := limitRises(s.before, s.after), limitRises(s.after, s.before)
			first := rises || (!falls && s.reqUp)
			if first {
				if err := podCgroup(ctx, s.name); err != nil {
					return &delta{reread: true}, err
				}
			}
			slices.SortStableFunc(us, func(x, y ctrUpdate) int { return cmpFalls(x, y, s.name) })
			for i := range us {
				u := &us[i]
				r := s.set(u.cur, u.want)
				if err := rt.UpdateContainerResources(ctx, u.id, r); err != nil {
					return &delta{reread: true}, fmt.Errorf("update %s of container %q: %w", s.name, u.name, err)
				}
				for j := range op.updates {
					if op.updates[j].id == u.id {
						op.updates[j].cur = r // the next step starts from here
					}
				}
			}
			if !first {
				if err := podCgroup(ctx, s.name); err != nil {
					return &delta{reread: true}, err
				}
			}
		}
		return containersDelta(ctx, rt, files, ids, nil), nil
	}
}

// limitRises: a pod limit from before to after rises (-1: none).
func limitRises(before, after int64) bool {
	switch {
	case before == after:
		return false
	case after < 0:
		return true // the limit goes
	case before < 0:
		return false
	}
	return after > before
}

// cmpFalls orders the containers whose value of name falls first.
func cmpFalls(x, y ctrUpdate, name v1.ResourceName) int {
	fx, fy := falls(x, name), falls(y, name)
	switch {
	case fx == fy:
		return 0
	case fx:
		return -1
	}
	return 1
}

func falls(u ctrUpdate, name v1.ResourceName) bool {
	if name == v1.ResourceMemory {
		return limitRises(u.want.GetMemoryLimitInBytes(), u.cur.GetMemoryLimitInBytes())
	}
	if u.want.GetCpuQuota() != u.cur.GetCpuQuota() {
		return limitRises(u.want.GetCpuQuota(), u.cur.GetCpuQuota())
	}
	return u.want.GetCpuShares() < u.cur.GetCpuShares()
}

func cloneLinux(r *runtimeapi.LinuxContainerResources) *runtimeapi.LinuxContainerResources {
	return &runtimeapi.LinuxContainerResources{
		CpuShares: r.GetCpuShares(), CpuQuota: r.GetCpuQuota(), CpuPeriod: r.GetCpuPeriod(), MemoryLimitInBytes: r.GetMemoryLimitInBytes(),
		OomScoreAdj: r.GetOomScoreAdj(),
	}
}

// checkMemoryUsage refuses a memory limit set or lowered below the
// current usage, of a container or of the pod, with upstream's messages.
func checkMemoryUsage(ctx context.Context, stats statsReader, op *resizeOp) error {
	podFalls := op.memAfter > 0 && (op.memBefore <= 0 || op.memAfter < op.memBefore)
	var lowered []ctrUpdate
	for _, u := range op.updates {
		want, cur := u.want.GetMemoryLimitInBytes(), u.cur.GetMemoryLimitInBytes()
		if u.mem && want > 0 && (cur <= 0 || want < cur) {
			lowered = append(lowered, u)
		}
	}
	if !podFalls && len(lowered) == 0 {
		return nil
	}
	usage := func(id string) (uint64, bool) {
		if stats == nil {
			return 0, false
		}
		st, err := stats.ContainerStats(ctx, id)
		if err != nil || st.GetMemory().GetUsageBytes() == nil {
			return 0, false
		}
		return st.GetMemory().GetUsageBytes().GetValue(), true
	}
	var errs []string
	var podUsage uint64
	podKnown := true
	seen := map[string]uint64{}
	for _, u := range op.updates {
		n, ok := usage(u.id)
		podKnown = podKnown && ok
		podUsage += n
		seen[u.id] = n
		if !ok {
			seen[u.id] = ^uint64(0)
		}
	}
	if podFalls {
		switch {
		case !podKnown:
			errs = append(errs, "missing pod memory usage")
		case podUsage >= uint64(op.memAfter):
			errs = append(errs, fmt.Sprintf("attempting to set pod memory limit (%d) below current usage (%d)", op.memAfter, podUsage))
		}
	}
	for _, u := range lowered {
		n := seen[u.id]
		switch {
		case n == ^uint64(0):
			errs = append(errs, fmt.Sprintf("missing container %q memory usage", u.name))
		case n >= uint64(u.want.GetMemoryLimitInBytes()):
			errs = append(errs, fmt.Sprintf("attempting to set container %q memory limit (%d) below current usage (%d)",
				u.name, u.want.GetMemoryLimitInBytes(), n))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	if len(errs) == 1 {
		return fmt.Errorf("cannot decrease memory limits: %s", errs[0])
	}
	return fmt.Errorf("cannot decrease memory limits: [%s]", strings.Join(errs, ", "))
}

// startResize runs op off the mailbox.
func (a *Actor) startResize(op *resizeOp) {
	a.resize.inflight = op
	a.resize.busy = true
	a.log.Debug("resize containers", "count", len(op.updates))
	a.run(action{kind: actResize, resize: op}, false)
}

// resizeDone takes the result of a resize: on success what was applied is
// kept (for runtimes that do not report it) and the error cleared; a
// failure is an event, a condition message, a metric and one log line per
// distinct error, and is retried after back-off.
func (a *Actor) resizeDone(ctx actor.Context, m *opDone) {
	a.gate.endOp(a.d.Clock.Now())
	op := a.resize.inflight
	a.resize.inflight = nil
	if m.err == nil {
		a.retry.ok()
		if a.resize.applied == nil {
			a.resize.applied = map[string]*runtimeapi.LinuxContainerResources{}
		}
		for _, u := range op.updates {
			a.resize.applied[u.id] = u.want
		}
		a.resize.errMsg = ""
		a.events.forget(EventResizeError, "resize")
		if m.d == nil || m.d.reread {
			a.look(ctx, true)
			return
		}
		a.snap, a.sboxOf = a.snap.apply(a.sboxOf, m.d)
		a.afterIdle(ctx)
		return
	}
	msg := m.err.Error()
	if msg != a.resize.errMsg {
		a.log.Warn("pod resize failed", "err", m.err)
		a.resizeMetric("error")
	}
	a.resize.errMsg = msg
	a.event(v1.EventTypeWarning, EventResizeError, "resize", "Pod resize error: %s", resizeSummary(a.pod, msg))
	a.hold(a.retry.fail())
	a.look(ctx, true)
}

func (a *Actor) resizeMetric(result string) {
	if m, ok := a.d.Metrics.(ResizeMetrics); ok {
		m.IncPodResize(result)
	}
}

// resizeSummary is podspec.ResizeSummary.
func resizeSummary(pod *v1.Pod, errMsg string) string { return podspec.ResizeSummary(pod, errMsg) }

// podCgroupResizer returns what sets the pod cgroup's values of the
// resources named from the pod's allocation (ResizePodCgroup, asked off
// the mailbox through a future); nil without a CgroupActor.
func (a *Actor) podCgroupResizer() func(names ...v1.ResourceName) error {
	sys, cg, pod, timeout := a.resize.sys, a.d.Cgroups, a.pod, a.d.Config.OpTimeout
	if cg == nil || sys == nil {
		return nil
	}
	return func(names ...v1.ResourceName) error {
		r, err := sys.Root.RequestFuture(cg, &messages.ResizePodCgroup{Pod: pod, Resources: names}, timeout).Result()
		if err != nil {
			return fmt.Errorf("resize pod cgroup (%v): %w", names, err)
		}
		if pc, ok := r.(*messages.PodCgroup); ok && pc.Err != nil {
			return fmt.Errorf("resize pod cgroup (%v): %w", names, pc.Err)
		}
		return nil
	}
}

// resizeRestartCgroup is what a container start runs first in a pod that
// had containers restarted for a resize (resizePolicy RestartContainer):
// the pod cgroup takes the allocation's CPU and memory before the new
// container is made, as upstream's resize updates the pod's resources
// before it starts the containers (a CPU quota above the pod cgroup's is
// refused on cgroup v1); nil otherwise.
func (a *Actor) resizeRestartCgroup() func() error {
	if len(a.resize.restarted) == 0 {
		return nil
	}
	f := a.podCgroupResizer()
	if f == nil {
		return nil
	}
	return func() error { return f(v1.ResourceMemory, v1.ResourceCPU) }
}

// markResizeRestart keeps the containers a plan stops for a resize.
func (a *Actor) markResizeRestart(act action) {
	if act.kind != actStopContainers || act.reason != reasonResizeRestart {
		return
	}
	if a.resize.restarted == nil {
		a.resize.restarted = map[string]bool{}
	}
	for _, id := range act.ids {
		a.resize.restarted[id] = true
	}
	a.resize.busy = true
}

// noteLegacyHashes checks, once per container and incarnation, whether a
// running container carries the whole-spec hash of an agent before
// in-place resize that matches its spec: such a container stays the same
// spec through later resizes (its hash cannot be rewritten). The map
// handed to the planner holds those that matched.
func (a *Actor) noteLegacyHashes() map[string]bool {
	sb := a.snap.latestSandbox()
	if sb == nil {
		return a.resize.legacy
	}
	for _, c := range resizable(a.pod) {
		cur := a.snap.inSandbox(c.Name, sb.Id, a.sboxOf)
		if cur == nil || cur.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		if _, seen := a.resize.legacy[cur.Id]; seen {
			continue
		}
		if a.resize.legacy == nil {
			a.resize.legacy = map[string]bool{}
		}
		h := cur.GetAnnotations()[podspec.AnnotationContainerHash]
		a.resize.legacy[cur.Id] = h != "" && h != podspec.ContainerHash(c) && h == podspec.LegacyContainerHash(c)
	}
	return a.resize.legacy
}
