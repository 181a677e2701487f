package nodestatus

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

func conditionOf(n *v1.Node, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// newPressureHarness is newHarness with an EvictionActor stub that
// answers GetNodePressure with pressure.
func newPressureHarness(t *testing.T, pressure messages.NodePressure) *harness {
	h := &harness{t: t, sys: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet })),
		clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), api: &fakeAPI{}, events: &fakeRecorder{}}
	h.health = messages.Health{LastRelist: h.clk.Now(), Threshold: 3 * time.Minute}
	pleg := h.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*messages.GetHealth); ok {
			h.mu.Lock()
			hl := h.health
			h.mu.Unlock()
			c.Respond(&hl)
		}
	}))
	eviction := h.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.GetNodePressure); ok {
			p := pressure
			c.Send(m.ReplyTo, &p)
		}
	}))
	cfg := Config{NodeName: "n1", NodeIP: "192.0.2.7", Hostname: "n1", MaxPods: 110, KubeletVersion: "v1.37.2-actorlet",
		RuntimeVersion: "sim://0.1.0", Port: 10250, Events: h.events, Eviction: eviction}
	h.pid = h.sys.Root.Spawn(actor.PropsFromProducer(New(cfg, h.api, h.api, fakeMachine{}, pleg, h.clk, quiet)))
	t.Cleanup(func() { h.sys.Root.Stop(h.pid) })
	return h
}

// pressureEvents are the Node's events about the pressure conditions.
func (h *harness) pressureEvents() []string {
	var out []string
	for _, e := range h.events.got() {
		if !strings.HasPrefix(e, "NodeReady") && !strings.HasPrefix(e, "NodeNotReady") {
			out = append(out, e)
		}
	}
	return out
}

func TestPressureConditionsFollowTheEvictionActor(t *testing.T) {
	// Asked at start: the EvictionActor says memory pressure.
	h := newPressureHarness(t, messages.NodePressure{Memory: true, Signals: []string{"memory.available"}})
	n := h.waitNode("MemoryPressure True", func(n *v1.Node, _, _, _ int) bool {
		c := conditionOf(n, v1.NodeMemoryPressure)
		return c != nil && c.Status == v1.ConditionTrue
	})
	if c := conditionOf(n, v1.NodeMemoryPressure); c.Reason != "KubeletHasInsufficientMemory" || c.Message != "actorlet has insufficient memory available" {
		t.Errorf("MemoryPressure %+v, want upstream's reason KubeletHasInsufficientMemory", c)
	}
	if c := conditionOf(n, v1.NodeDiskPressure); c.Status != v1.ConditionFalse || c.Reason != "KubeletHasNoDiskPressure" {
		t.Errorf("DiskPressure %+v, want False/KubeletHasNoDiskPressure", c)
	}
	// Then it tells of disk and PID pressure, memory cleared.
	h.sys.Root.Send(h.pid, &messages.NodePressure{Disk: true, PID: true})
	n = h.waitNode("DiskPressure and PIDPressure True", func(n *v1.Node, _, _, _ int) bool {
		return conditionOf(n, v1.NodeDiskPressure).Status == v1.ConditionTrue && conditionOf(n, v1.NodePIDPressure).Status == v1.ConditionTrue
	})
	for typ, want := range map[v1.NodeConditionType]string{
		v1.NodeMemoryPressure: "False KubeletHasSufficientMemory actorlet has sufficient memory available",
		v1.NodeDiskPressure:   "True KubeletHasDiskPressure actorlet has disk pressure",
		v1.NodePIDPressure:    "True KubeletHasInsufficientPID actorlet has insufficient PID available",
	} {
		c := conditionOf(n, typ)
		if got := fmt.Sprintf("%s %s %s", c.Status, c.Reason, c.Message); got != want {
			t.Errorf("%s: %q, want %q", typ, got, want)
		}
	}
	want := []string{
		"NodeHasInsufficientMemory: Node n1 status is now: NodeHasInsufficientMemory",
		"NodeHasSufficientMemory: Node n1 status is now: NodeHasSufficientMemory",
		"NodeHasDiskPressure: Node n1 status is now: NodeHasDiskPressure",
		"NodeHasInsufficientPID: Node n1 status is now: NodeHasInsufficientPID",
	}
	actortest.EventuallyDetail(t, "the Node's events of the pressure", func() bool {
		return strings.Join(h.pressureEvents(), "|") == strings.Join(want, "|")
	}, func() string { return fmt.Sprintf("events %q, want %q", h.pressureEvents(), want) })
}
