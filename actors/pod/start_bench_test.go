package pod

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/messages"
)

// BenchmarkPodStart starts b.N pods, each in its own PodActor, against the
// runtime below with the runtime cache answering (as in a node with a PLEG),
// until each has published Running; the pods are new to the node
// (SyncPod.NewSince). It measures the PodActors' own CPU and allocations
// per pod start (the runtime's share is small: it keeps what it made in
// maps and answers the calls of a start, nothing more).
func BenchmarkPodStart(b *testing.B) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	// The real clock: the fake one's timers cost more than the actor
	// (they are kept in a list), and nothing here waits on one.
	clk := clock.RealClock{}
	rt := newStartRuntime(clk)
	var mu sync.Mutex
	seen := map[types.UID]bool{}
	done := make(chan struct{}, 1024)
	status := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		m, ok := c.Message().(*messages.PodStatusUpdate)
		if !ok || !running(&m.Pod.Status) {
			return
		}
		mu.Lock()
		first := !seen[m.Pod.UID]
		seen[m.Pod.UID] = true
		mu.Unlock()
		if first {
			done <- struct{}{}
		}
	}))
	images := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.EnsureImage); ok {
			c.Send(m.ReplyTo, &messages.ImageResult{RequestID: m.RequestID, Image: m.Image, ImageRef: "sha256:" + m.Image})
		}
	}))
	pleg := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.GetRuntimePod); ok {
			// A new pod has nothing in the runtime yet (and the fake's
			// full listing would cost more than the start).
			c.Send(m.ReplyTo, &messages.RuntimePod{UID: m.UID, Relisted: clk.Now()})
		}
	}))
	deps := Deps{Runtime: rt, Images: images, Status: status, PLEG: pleg, Clock: clk, Log: quiet,
		Config: Config{RuntimeName: "fake", HostIP: "192.0.2.1", PodLogsDir: b.TempDir()}}
	template := testPod(v1.RestartPolicyAlways, "app")
	newSince := clk.Now().Add(-time.Second)
	pods := make([]*v1.Pod, b.N)
	for i := range pods {
		p := template.DeepCopy()
		p.Name = fmt.Sprintf("web-%d", i)
		p.UID = types.UID(fmt.Sprintf("uid-%d", i))
		pods[i] = p
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range pods {
		pid := sys.Root.Spawn(actor.PropsFromProducer(New(pods[i].UID, deps)))
		sys.Root.Send(pid, &messages.SyncPod{Pod: pods[i], NewSince: newSince})
		if i >= 64 {
			<-done // at most 64 starts in flight
		}
	}
	for range min(64, len(pods)) {
		<-done
	}
	b.StopTimer()
	sys.Shutdown()
}

// startRuntime is the least runtime a pod start needs: it makes ready
// sandboxes and running containers and answers their statuses. The
// general fake (fakecri) costs more per call as it holds more objects,
// which would hide the PodActor's own cost in a benchmark of thousands.
type startRuntime struct {
	clk        clock.Clock
	mu         sync.Mutex
	seq        int
	sandboxes  map[string]*runtimeapi.PodSandboxStatus
	containers map[string]*runtimeapi.ContainerStatus
}

var _ Runtime = (*startRuntime)(nil)

func newStartRuntime(clk clock.Clock) *startRuntime {
	return &startRuntime{clk: clk, sandboxes: map[string]*runtimeapi.PodSandboxStatus{}, containers: map[string]*runtimeapi.ContainerStatus{}}
}

func (r *startRuntime) id(kind string) string {
	r.seq++
	return fmt.Sprintf("%s-%d", kind, r.seq)
}

func (r *startRuntime) RunPodSandbox(_ context.Context, cfg *runtimeapi.PodSandboxConfig, _ string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.id("sb")
	r.sandboxes[id] = &runtimeapi.PodSandboxStatus{Id: id, Metadata: cfg.Metadata, State: runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: r.clk.Now().UnixNano(), Labels: cfg.Labels, Annotations: cfg.Annotations,
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: fmt.Sprintf("10.88.%d.%d", r.seq/256%256, r.seq%256)}}
	return id, nil
}

func (r *startRuntime) PodSandboxStatus(_ context.Context, id string) (*runtimeapi.PodSandboxStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sandboxes[id], nil
}

func (r *startRuntime) CreateContainer(_ context.Context, _ string, cfg *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.id("ctr")
	r.containers[id] = &runtimeapi.ContainerStatus{Id: id, Metadata: cfg.Metadata, State: runtimeapi.ContainerState_CONTAINER_CREATED,
		CreatedAt: r.clk.Now().UnixNano(), Labels: cfg.Labels, Annotations: cfg.Annotations, Image: cfg.Image, ImageRef: cfg.GetImage().GetImage()}
	return id, nil
}

func (r *startRuntime) StartContainer(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.containers[id]
	c.State, c.StartedAt = runtimeapi.ContainerState_CONTAINER_RUNNING, r.clk.Now().UnixNano()
	return nil
}

func (r *startRuntime) ContainerStatus(_ context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.containers[id]
	// A new status each time, as a runtime's answer.
	return &runtimeapi.ContainerStatus{Id: c.Id, Metadata: c.Metadata, State: c.State, CreatedAt: c.CreatedAt, StartedAt: c.StartedAt,
		Labels: c.Labels, Annotations: c.Annotations, Image: c.Image, ImageRef: c.ImageRef}, nil
}

func (r *startRuntime) StopPodSandbox(context.Context, string) error       { return nil }
func (r *startRuntime) RemovePodSandbox(context.Context, string) error     { return nil }
func (r *startRuntime) StopContainer(context.Context, string, int64) error { return nil }
func (r *startRuntime) RemoveContainer(context.Context, string) error      { return nil }
func (r *startRuntime) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return nil, nil
}
func (r *startRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return nil, nil
}

func (r *startRuntime) UpdateContainerResources(context.Context, string, *runtimeapi.LinuxContainerResources) error {
	return nil
}
