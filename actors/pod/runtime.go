package pod

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// Sandboxes runs and removes pod sandboxes.
type Sandboxes interface {
	RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error)
	StopPodSandbox(ctx context.Context, id string) error
	RemovePodSandbox(ctx context.Context, id string) error
}

// Containers creates, starts, stops and removes containers.
type Containers interface {
	CreateContainer(ctx context.Context, podID string, cfg *runtimeapi.ContainerConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error)
	StartContainer(ctx context.Context, id string) error
	StopContainer(ctx context.Context, id string, timeout int64) error
	RemoveContainer(ctx context.Context, id string) error
}

// Inspector reads what the runtime holds.
type Inspector interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	PodSandboxStatus(ctx context.Context, id string) (*runtimeapi.PodSandboxStatus, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error)
}

// Runtime is everything a PodActor needs from a CRI runtime.
type Runtime interface {
	Sandboxes
	Containers
	Inspector
	Resizer // resize.go
}

// snapshot is one pod's view of the runtime, rebuilt from the runtime
// alone (labels carry the pod UID), so that a restarted actor adopts what
// runs instead of creating it again.
type snapshot struct {
	// sandboxes, newest attempt first.
	sandboxes []*runtimeapi.PodSandboxStatus
	// containers by name, newest attempt first.
	containers map[string][]*runtimeapi.ContainerStatus
}

// latestSandbox is the sandbox with the highest attempt, or nil.
func (s *snapshot) latestSandbox() *runtimeapi.PodSandboxStatus {
	if s == nil || len(s.sandboxes) == 0 {
		return nil
	}
	return s.sandboxes[0]
}

// latest is the newest container of a name (in any sandbox), or nil.
func (s *snapshot) latest(name string) *runtimeapi.ContainerStatus {
	if s == nil {
		return nil
	}
	if cs := s.containers[name]; len(cs) > 0 {
		return cs[0]
	}
	return nil
}

// inSandbox is the newest container of a name in the given sandbox, or nil.
func (s *snapshot) inSandbox(name, sandboxID string, sandboxOf map[string]string) *runtimeapi.ContainerStatus {
	for _, c := range s.containers[name] {
		if sandboxOf[c.Id] == sandboxID {
			return c
		}
	}
	return nil
}

// empty reports whether nothing of the pod is left in the runtime.
func (s *snapshot) empty() bool {
	if len(s.sandboxes) > 0 {
		return false
	}
	for _, cs := range s.containers {
		if len(cs) > 0 {
			return false
		}
	}
	return true
}

// nextAttempt is the attempt number for a new container of that name: one
// more than the newest one the runtime holds, so restart counts survive any
// restart of actorlet.
func (s *snapshot) nextAttempt(name string) uint32 {
	if c := s.latest(name); c != nil {
		return c.Metadata.GetAttempt() + 1
	}
	return 0
}

// inspected is the result of an inspection, sent back to the actor.
type inspected struct {
	actorkit.Tag
	opSeq     uint64
	snap      *snapshot
	sandboxOf map[string]string // container ID -> sandbox ID
	err       error
}

// inspect reads the pod's sandboxes and containers and each one's full
// status. The lists come from the runtime cache (cached, the pod's slice of
// a PLEG relist) or, when cached is nil, from listing the runtime by the
// pod UID label.
//
// prev is the last snapshot (may be nil): a sandbox or container whose state
// the list shows unchanged keeps its status from it, so a steady pod costs
// no status call per object (statuses only change with the state: a running
// container's status stays the same until it exits, an exited one never
// changes).
func inspect(ctx context.Context, rt Inspector, files TerminationReader, uid types.UID, prev *snapshot, cached *messages.RuntimePod) (*snapshot, map[string]string, error) {
	var sbs []messages.RuntimeSandbox
	var ctrs []messages.RuntimeContainer
	if cached != nil {
		sbs, ctrs = cached.Sandboxes, cached.Containers
	} else {
		var err error
		if sbs, ctrs, err = list(ctx, rt, uid); err != nil {
			return nil, nil, err
		}
	}
	known := prev.byID()
	snap := &snapshot{containers: map[string][]*runtimeapi.ContainerStatus{}}
	for _, sb := range sbs {
		if old, ok := known.sandboxes[sb.ID]; ok && old.State == sb.State {
			snap.sandboxes = append(snap.sandboxes, old)
			continue
		}
		st, err := sandboxStatus(ctx, rt, sb.ID)
		if errdefs.IsNotFound(err) {
			continue // removed since the list
		}
		if err != nil {
			return nil, nil, err
		}
		snap.sandboxes = append(snap.sandboxes, st)
	}
	sandboxOf := make(map[string]string, len(ctrs))
	for _, c := range ctrs {
		if old, ok := known.containers[c.ID]; ok && old.State == c.State && c.State != runtimeapi.ContainerState_CONTAINER_UNKNOWN {
			snap.containers[old.GetMetadata().GetName()] = append(snap.containers[old.GetMetadata().GetName()], old)
			sandboxOf[c.ID] = c.SandboxID
			continue
		}
		st, err := containerStatus(ctx, rt, files, c.ID)
		if errdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		name := nameOf(st)
		snap.containers[name] = append(snap.containers[name], st)
		sandboxOf[c.ID] = c.SandboxID
	}
	snap.sort()
	return snap, sandboxOf, nil
}

// list lists the pod's sandboxes and containers by its UID label, in the
// runtime cache's form.
func list(ctx context.Context, rt Inspector, uid types.UID) ([]messages.RuntimeSandbox, []messages.RuntimeContainer, error) {
	sel := podspec.PodSelector(uid)
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, nil, fmt.Errorf("list sandboxes of pod %s: %w", uid, err)
	}
	ctrs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, nil, fmt.Errorf("list containers of pod %s: %w", uid, err)
	}
	outS := make([]messages.RuntimeSandbox, 0, len(sbs))
	for _, sb := range sbs {
		outS = append(outS, messages.RuntimeSandbox{ID: sb.Id, State: sb.State})
	}
	outC := make([]messages.RuntimeContainer, 0, len(ctrs))
	for _, c := range ctrs {
		outC = append(outC, messages.RuntimeContainer{ID: c.Id, SandboxID: c.PodSandboxId, State: c.State})
	}
	return outS, outC, nil
}

// sandboxStatus reads one sandbox's status, compacted (compact.go).
func sandboxStatus(ctx context.Context, rt Inspector, id string) (*runtimeapi.PodSandboxStatus, error) {
	st, err := rt.PodSandboxStatus(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("sandbox status %s: %w", id, err)
	}
	if st == nil {
		return nil, fmt.Errorf("sandbox status %s: the runtime answered no status", id)
	}
	return compactSandbox(st), nil
}

// containerStatus reads one container's status, with its termination
// message once it exited, compacted (compact.go).
func containerStatus(ctx context.Context, rt Inspector, files TerminationReader, id string) (*runtimeapi.ContainerStatus, error) {
	st, err := rt.ContainerStatus(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("container status %s: %w", id, err)
	}
	if st == nil {
		return nil, fmt.Errorf("container status %s: the runtime answered no status", id)
	}
	msg := st.Message
	if st.State == runtimeapi.ContainerState_CONTAINER_EXITED && files != nil {
		if tm := files.TerminationMessage(st); tm != "" {
			if msg != "" {
				msg += ": "
			}
			msg += tm
		}
	}
	return compactContainer(st, msg), nil
}

func nameOf(st *runtimeapi.ContainerStatus) string {
	if name := st.GetMetadata().GetName(); name != "" {
		return name
	}
	return podspec.ContainerNameOf(st.GetLabels())
}

// sort orders sandboxes and each name's containers newest attempt first.
func (s *snapshot) sort() {
	sort.SliceStable(s.sandboxes, func(i, j int) bool {
		a, b := s.sandboxes[i], s.sandboxes[j]
		if a.GetMetadata().GetAttempt() != b.GetMetadata().GetAttempt() {
			return a.GetMetadata().GetAttempt() > b.GetMetadata().GetAttempt()
		}
		return a.CreatedAt > b.CreatedAt
	})
	for _, cs := range s.containers {
		sort.SliceStable(cs, func(i, j int) bool {
			if cs[i].GetMetadata().GetAttempt() != cs[j].GetMetadata().GetAttempt() {
				return cs[i].GetMetadata().GetAttempt() > cs[j].GetMetadata().GetAttempt()
			}
			return cs[i].CreatedAt > cs[j].CreatedAt
		})
	}
}

// delta is what one of the PodActor's own operations changed, read back by
// the operation itself (the status of what it made or stopped), so that
// the actor's view follows its own operations without listing the runtime.
type delta struct {
	sandboxes  []*runtimeapi.PodSandboxStatus // new or changed
	containers []*runtimeapi.ContainerStatus  // new or changed
	sandboxOf  map[string]string              // of the new containers
	removed    []string                       // container or sandbox IDs gone
	// reread: the operation cannot tell what it changed (it failed half
	// way, or it removed the whole pod): read the runtime.
	reread bool
	// final: what a kill read of the pod between stopping and removing
	// it (its final status is made of it).
	final *delta
}

// apply returns the snapshot and sandbox index with d applied; s and
// sandboxOf are left as they are (an inspection may hold them).
func (s *snapshot) apply(sandboxOf map[string]string, d *delta) (*snapshot, map[string]string) {
	gone := map[string]bool{}
	for _, id := range d.removed {
		gone[id] = true
	}
	for _, sb := range d.sandboxes {
		gone[sb.Id] = true // replaced below
	}
	for _, c := range d.containers {
		gone[c.Id] = true
	}
	out := &snapshot{containers: map[string][]*runtimeapi.ContainerStatus{}}
	idx := make(map[string]string, len(sandboxOf)+len(d.sandboxOf))
	if s != nil {
		for _, sb := range s.sandboxes {
			if !gone[sb.Id] {
				out.sandboxes = append(out.sandboxes, sb)
			}
		}
		for name, cs := range s.containers {
			for _, c := range cs {
				if !gone[c.Id] {
					out.containers[name] = append(out.containers[name], c)
				}
			}
		}
	}
	for id, sb := range sandboxOf {
		idx[id] = sb
	}
	for id, sb := range d.sandboxOf {
		idx[id] = sb
	}
	for _, id := range d.removed {
		delete(idx, id)
	}
	for _, sb := range d.sandboxes {
		out.sandboxes = append(out.sandboxes, compactSandbox(sb)) // an operation's read, whole
	}
	for _, c := range d.containers {
		out.containers[nameOf(c)] = append(out.containers[nameOf(c)], c)
	}
	out.sort()
	return out, idx
}

// matches reports whether a slice of the runtime cache shows exactly the
// objects of the snapshot, each in the state the snapshot has: then it
// says nothing the actor does not know.
func (s *snapshot) matches(p *messages.RuntimePod) bool {
	if s == nil || p == nil {
		return false
	}
	idx := s.byID()
	if len(idx.sandboxes) != len(p.Sandboxes) || len(idx.containers) != len(p.Containers) {
		return false
	}
	for _, sb := range p.Sandboxes {
		if have, ok := idx.sandboxes[sb.ID]; !ok || have.State != sb.State {
			return false
		}
	}
	for _, c := range p.Containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
			return false
		}
		if have, ok := idx.containers[c.ID]; !ok || have.State != c.State {
			return false
		}
	}
	return true
}

// statusIndex is a snapshot's statuses by ID.
type statusIndex struct {
	sandboxes  map[string]*runtimeapi.PodSandboxStatus
	containers map[string]*runtimeapi.ContainerStatus
}

func (s *snapshot) byID() statusIndex {
	idx := statusIndex{map[string]*runtimeapi.PodSandboxStatus{}, map[string]*runtimeapi.ContainerStatus{}}
	if s == nil {
		return idx
	}
	for _, sb := range s.sandboxes {
		idx.sandboxes[sb.Id] = sb
	}
	for _, cs := range s.containers {
		for _, c := range cs {
			idx.containers[c.Id] = c
		}
	}
	return idx
}

// restartCount of a container status: its attempt (the restartCount
// annotation when the attempt is missing).
func restartCount(c *runtimeapi.ContainerStatus) int32 {
	if c == nil {
		return 0
	}
	if a := c.GetMetadata().GetAttempt(); a > 0 {
		return int32(a)
	}
	n, _ := strconv.Atoi(c.GetAnnotations()[podspec.AnnotationRestartCount])
	return int32(n)
}

// ignoreNotFound drops NotFound errors: stopping or removing something that
// is already gone is success.
// forEachID calls call with every id and joins the errors; not found is no
// error (it is gone already).
func forEachID(ctx context.Context, ids []string, call func(context.Context, string) error) error {
	var errs []error
	for _, id := range ids {
		errs = append(errs, ignoreNotFound(call(ctx, id)))
	}
	return errors.Join(errs...)
}

func ignoreNotFound(err error) error {
	if errdefs.IsNotFound(err) {
		return nil
	}
	return err
}
