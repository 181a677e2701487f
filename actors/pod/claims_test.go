package pod

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/actorlet/actorlet/messages"
)

func TestClaimsArePreparedBeforeTheSandbox(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app", "plain")
	claim := "gpu-claim"
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	var mu sync.Mutex
	fail, asks := true, 0
	rec := &fakeRecorder{}
	var health *actor.PID
	h := newHarnessSys(t, p, func(sys *actor.ActorSystem, d *Deps) {
		d.Events = rec
		d.Claims = sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			m, ok := c.Message().(*messages.PrepareClaims)
			if !ok {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			asks++
			health = m.ReplyTo
			if fail {
				c.Send(m.ReplyTo, &messages.ClaimsPrepared{UID: m.Pod.UID, Reason: messages.ReasonFailedPrepareDynamicResources,
					Message: "prepare dynamic resources: DRA driver gpu.example.com is not registered"})
				return
			}
			c.Send(m.ReplyTo, &messages.ClaimsPrepared{UID: m.Pod.UID, Containers: map[string][]string{"app": {"example.com/gpu=gpu0"}}})
		}))
	})
	h.waitStatus("waiting on claims", func(s *v1.PodStatus) bool {
		w := s.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == ReasonContainerCreating && contains(w.Message, "is not registered")
	})
	if n := h.rt.Count("RunPodSandbox"); n != 0 {
		t.Fatalf("sandbox created (%d) before the claims were prepared", n)
	}
	if !rec.has(messages.ReasonFailedPrepareDynamicResources) {
		t.Fatalf("no FailedPrepareDynamicResources event: %v", rec.events)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	h.clk.Step(time.Second) // the retry
	h.waitStatus("Running", running)
	for _, c := range h.rt.Containers() {
		cfg := h.rt.ContainerConfig(c.Id)
		var names []string
		for _, d := range cfg.CDIDevices {
			names = append(names, d.Name)
		}
		want := []string(nil)
		if c.Metadata.Name == "app" {
			want = []string{"example.com/gpu=gpu0"}
		}
		if !slices.Equal(names, want) {
			t.Errorf("%s's CDI devices %v, want %v", c.Metadata.Name, names, want)
		}
	}
	// The ClaimsActor's health goes into the container's status.
	mu.Lock()
	to := health
	mu.Unlock()
	h.sys.Root.Send(to, &messages.ClaimsHealth{UID: p.UID, Containers: map[string][]v1.ResourceStatus{"app": {{
		Name: "claim:gpu", Resources: []v1.ResourceHealth{{ResourceID: "example.com/gpu=gpu0", Health: v1.ResourceHealthStatusUnhealthy}}}}}})
	h.waitStatus("allocatedResourcesStatus", func(s *v1.PodStatus) bool {
		for _, cs := range s.ContainerStatuses {
			if cs.Name == "app" && len(cs.AllocatedResourcesStatus) == 1 && cs.AllocatedResourcesStatus[0].Resources[0].Health == v1.ResourceHealthStatusUnhealthy {
				return true
			}
		}
		return false
	})
}

func TestDRABackedExtendedResourcesSkipTheDevicesActor(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{"example.com/gpu": resource.MustParse("1")}
	p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "app-extended",
		RequestMappings: []v1.ContainerExtendedResourceRequest{{ContainerName: "app", ResourceName: "example.com/gpu", RequestName: "container-0-request-0"}}}
	var mu sync.Mutex
	devAsks := 0
	h := newHarnessSys(t, p, func(sys *actor.ActorSystem, d *Deps) {
		d.Devices = sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if m, ok := c.Message().(*messages.AllocateDevices); ok {
				mu.Lock()
				devAsks++
				mu.Unlock()
				c.Send(m.ReplyTo, &messages.DevicesAllocated{UID: m.Pod.UID, Reason: "UnexpectedAdmissionError", Message: "no such resource"})
			}
		}))
		d.Claims = sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if m, ok := c.Message().(*messages.PrepareClaims); ok {
				c.Send(m.ReplyTo, &messages.ClaimsPrepared{UID: m.Pod.UID, Containers: map[string][]string{"app": {"example.com/gpu=x"}}})
			}
		}))
	})
	h.waitStatus("Running", running)
	mu.Lock()
	defer mu.Unlock()
	if devAsks != 0 {
		t.Fatalf("the devices actor was asked %d times for a DRA-backed extended resource", devAsks)
	}
	if p.Spec.Containers[0].Resources.Limits == nil {
		t.Fatal("the pod itself was changed")
	}
}

// TestClaimsUnpreparedBeforeTheFinalStatus: a killed pod with claims
// stops its containers, then waits for its claims to be unprepared before
// it reports terminated (upstream's syncTerminatingPod).
func TestClaimsUnpreparedBeforeTheFinalStatus(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	claim := "c"
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "c", ResourceClaimName: &claim}}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "c"}}
	var mu sync.Mutex
	var unprepareTo *actor.PID
	h := newHarnessSys(t, p, func(sys *actor.ActorSystem, d *Deps) {
		d.Claims = sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			switch m := c.Message().(type) {
			case *messages.PrepareClaims:
				c.Send(m.ReplyTo, &messages.ClaimsPrepared{UID: m.Pod.UID, Containers: map[string][]string{}})
			case *messages.UnprepareClaims:
				mu.Lock()
				unprepareTo = m.ReplyTo
				mu.Unlock()
			}
		}))
	})
	h.waitStatus("Running", running)
	h.send(&messages.KillPod{UID: p.UID, Reason: "deleted from the API server"})
	h.waitFor("UnprepareClaims once the containers stopped", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return unprepareTo != nil
	})
	if h.rt.Count("StopContainer") == 0 {
		t.Fatal("claims unprepared before the containers stopped")
	}
	h.sync()
	h.mu.Lock()
	early := h.terminated
	h.mu.Unlock()
	if early {
		t.Fatal("pod reported terminated before its claims were unprepared")
	}
	mu.Lock()
	to := unprepareTo
	mu.Unlock()
	h.sys.Root.Send(to, &messages.ClaimsUnprepared{UID: p.UID})
	h.waitFor("pod terminated", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.terminated
	})
}
