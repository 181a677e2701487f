package pod

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/errdefs"
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
	gen       uint64
	opSeq     uint64
	snap      *snapshot
	sandboxOf map[string]string // container ID -> sandbox ID
	err       error
}

// inspect lists the pod's sandboxes and containers by UID label and reads
// each one's full status.
//
// prev is the last snapshot (may be nil): a sandbox or container whose state
// the list shows unchanged keeps its status from it, so a steady pod costs
// two list calls, not one status call per object (statuses only change
// with the state: a running container's status stays the same until it
// exits, an exited one never changes).
func inspect(ctx context.Context, rt Inspector, uid types.UID, prev *snapshot) (*snapshot, map[string]string, error) {
	sel := podspec.PodSelector(uid)
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, nil, fmt.Errorf("list sandboxes of pod %s: %w", uid, err)
	}
	ctrs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, nil, fmt.Errorf("list containers of pod %s: %w", uid, err)
	}
	known := prev.byID()
	snap := &snapshot{containers: map[string][]*runtimeapi.ContainerStatus{}}
	for _, sb := range sbs {
		if old, ok := known.sandboxes[sb.Id]; ok && old.State == sb.State {
			snap.sandboxes = append(snap.sandboxes, old)
			continue
		}
		st, err := rt.PodSandboxStatus(ctx, sb.Id)
		if errdefs.IsNotFound(err) {
			continue // removed since the list
		}
		if err != nil {
			return nil, nil, fmt.Errorf("sandbox status %s: %w", sb.Id, err)
		}
		snap.sandboxes = append(snap.sandboxes, st)
	}
	sandboxOf := make(map[string]string, len(ctrs))
	for _, c := range ctrs {
		if old, ok := known.containers[c.Id]; ok && old.State == c.State && c.State != runtimeapi.ContainerState_CONTAINER_UNKNOWN {
			snap.containers[old.GetMetadata().GetName()] = append(snap.containers[old.GetMetadata().GetName()], old)
			sandboxOf[c.Id] = c.PodSandboxId
			continue
		}
		st, err := rt.ContainerStatus(ctx, c.Id)
		if errdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("container status %s: %w", c.Id, err)
		}
		if st.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			if msg := terminationMessage(st); msg != "" {
				if st.Message != "" {
					st.Message += ": "
				}
				st.Message += msg
			}
		}
		name := st.GetMetadata().GetName()
		if name == "" {
			name = podspec.ContainerNameOf(st.GetLabels())
		}
		snap.containers[name] = append(snap.containers[name], st)
		sandboxOf[c.Id] = c.PodSandboxId
	}
	sort.SliceStable(snap.sandboxes, func(i, j int) bool {
		a, b := snap.sandboxes[i], snap.sandboxes[j]
		if a.GetMetadata().GetAttempt() != b.GetMetadata().GetAttempt() {
			return a.GetMetadata().GetAttempt() > b.GetMetadata().GetAttempt()
		}
		return a.CreatedAt > b.CreatedAt
	})
	for _, cs := range snap.containers {
		sort.SliceStable(cs, func(i, j int) bool {
			if cs[i].GetMetadata().GetAttempt() != cs[j].GetMetadata().GetAttempt() {
				return cs[i].GetMetadata().GetAttempt() > cs[j].GetMetadata().GetAttempt()
			}
			return cs[i].CreatedAt > cs[j].CreatedAt
		})
	}
	return snap, sandboxOf, nil
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
func ignoreNotFound(err error) error {
	if errdefs.IsNotFound(err) {
		return nil
	}
	return err
}
