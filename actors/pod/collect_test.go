package pod

import (
	"log/slog"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/actors/probe"
	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/internal/fakecri"
	"github.com/actorlet/actorlet/messages"
)

// stopParent plays the NodeActor's part in a pod's end: it spawns the
// PodActor, sends it the pod, kills it on command, stops it once it
// reports PodTerminated, and forgets it on its Terminated (as the
// NodeActor does).
type stopParent struct {
	props *actor.Props
	pod   *v1.Pod
	child *actor.PID
	mu    *sync.Mutex
	gone  *bool
}

type killIt struct{}

func (p *stopParent) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.child = ctx.Spawn(p.props)
		ctx.Send(p.child, &messages.SyncPod{Pod: p.pod})
	case *messages.NeedPod:
		if p.child != nil {
			ctx.Send(p.child, &messages.SyncPod{Pod: p.pod})
		}
	case killIt:
		ctx.Send(p.child, &messages.KillPod{UID: p.pod.UID, Reason: "deleted"})
	case *messages.PodTerminated:
		ctx.Stop(p.child)
	case *actor.Terminated:
		actorkit.ForgetStoppedChildren(ctx)
		if p.child != nil && m.Who.Equal(p.child) {
			p.child = nil
			p.mu.Lock()
			*p.gone = true
			p.mu.Unlock()
		}
	}
}

// TestStoppedPodActorIsCollected: once a pod is killed and its PodActor
// stopped, nothing keeps the actor (its pod, statuses, runtime view) nor
// its ProbeActors: no timer on the clock, no goroutine, no PID left with
// its process cached.
func TestStoppedPodActorIsCollected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		probes bool
	}{
		{name: "plain pod", probes: false},
		{name: "pod with probes", probes: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			rt := fakecri.New(clk)
			pod := testPod(v1.RestartPolicyAlways, "app")
			if tc.probes {
				pod.Spec.Containers[0].ReadinessProbe = execProbe(1, 1)
				pod.Spec.Containers[0].LivenessProbe = execProbe(10, 3)
			}
			var (
				mu       sync.Mutex
				statuses []v1.PodStatus
				gone     bool
				pods     []weak.Pointer[Actor]
				probers  []weak.Pointer[probe.Actor]
			)
			status := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
				if m, ok := c.Message().(*messages.PodStatusUpdate); ok {
					mu.Lock()
					statuses = append(statuses, m.Pod.Status)
					mu.Unlock()
				}
			}))
			images := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
				if m, ok := c.Message().(*messages.EnsureImage); ok {
					c.Send(m.ReplyTo, &messages.ImageResult{RequestID: m.RequestID, Image: m.Image, ImageRef: "sha256:" + m.Image})
				}
			}))
			deps := Deps{Runtime: rt, Images: images, Status: status, Clock: clk, Log: quiet,
				Config: Config{RuntimeName: "fake", HostIP: "192.0.2.1", PodLogsDir: t.TempDir()},
				Probes: Probing{Props: func(p actor.Producer) *actor.Props {
					return actor.PropsFromProducer(func() actor.Actor {
						a := p()
						if pa, ok := a.(*probe.Actor); ok {
							mu.Lock()
							probers = append(probers, weak.Make(pa))
							mu.Unlock()
						}
						return a
					})
				}},
			}
			produce := New(pod.UID, deps)
			props := actor.PropsFromProducer(func() actor.Actor {
				a := produce()
				mu.Lock()
				pods = append(pods, weak.Make(a.(*Actor)))
				mu.Unlock()
				return a
			})
			parent := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
				return &stopParent{props: props, pod: pod, mu: &mu, gone: &gone}
			}))
			t.Cleanup(func() { _ = sys.Root.StopFuture(parent).Wait() })

			actortest.Eventually(t, "the pod running", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(statuses) > 0 && running(&statuses[len(statuses)-1])
			})
			if tc.probes {
				actortest.Eventually(t, "its ProbeActors", func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(probers) == 2
				})
			}
			sys.Root.Send(parent, killIt{})
			actortest.Eventually(t, "the PodActor stopped", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return gone
			})
			if n := len(rt.Containers()); n != 0 {
				t.Fatalf("%d containers left: the kill did not finish", n)
			}
			mu.Lock()
			ps, prs := pods, probers
			mu.Unlock()
			if len(ps) != 1 {
				t.Fatalf("%d PodActors made, want 1", len(ps))
			}
			actortest.Collected(t, "the stopped PodActor", ps)
			actortest.Collected(t, "its ProbeActors", prs)
		})
	}
}
