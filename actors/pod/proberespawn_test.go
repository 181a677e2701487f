package pod

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/actors/probe"
	"github.com/actorlet/actorlet/messages"
)

// TestProbeActorStoppedUnaskedIsRespawnedAfterBackoff: a ProbeActor that
// ends without the PodActor asking (its supervisor stopped it for failing
// too often) is reported with an event and spawned again only once the
// back-off has passed on the clock; the pod stays as it was meanwhile (its
// last result stands) and the PodActor is not restarted. On the old code
// the dead ProbeActor stayed in the PodActor's books and the probe never
// ran again.
func TestProbeActorStoppedUnaskedIsRespawnedAfterBackoff(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].ReadinessProbe = execProbe(1, 1)
	rec := &fakeRecorder{}
	h := newHarnessWith(t, p, func(d *Deps) {
		d.Events = rec
		d.Probes.RespawnBackoff, d.Probes.RespawnBackoffMax = time.Minute, 4*time.Minute
	})
	h.waitStatus("ready", readyPod)
	// The parent handles the NeedPod of the PodActor's start on its own
	// mailbox: it may come after the pod is ready.
	h.waitFor("the start's NeedPod", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.needPods > 0
	})
	h.mu.Lock()
	needPods := h.needPods // one per start of the PodActor
	h.mu.Unlock()
	id := h.childPID().Id + "/" + probe.Name("app", messages.ProbeReadiness)
	alive := func() bool { _, ok := h.sys.ProcessRegistry.GetLocal(id); return ok }

	stop := func() {
		h.sys.Root.Stop(actor.NewPID(h.sys.Address(), id)) // what its supervisor does
		h.waitFor("the probe actor stopped", func() bool { return !alive() })
		h.waitFor("the stop reported", func() bool { return rec.has(ReasonProbeWorkerFailed) })
		h.sync()
	}
	stop()
	n := h.execCount("app")
	for range 59 {
		h.clk.Step(time.Second)
		h.sync()
	}
	if alive() || h.execCount("app") != n {
		t.Fatalf("probe back before its back-off (alive %v, %d more probes)", alive(), h.execCount("app")-n)
	}
	if st := h.latest(); !readyPod(st) {
		t.Fatalf("pod not ready while its probe is down: %+v", st)
	}
	h.clk.Step(time.Second)
	h.sync()
	h.waitFor("the probe actor spawned again", alive)
	h.stepUntil("probing again", func(*v1.PodStatus) bool { return h.execCount("app") > n })

	// A second stop in a row: twice the back-off.
	stop()
	for range 119 {
		h.clk.Step(time.Second)
		h.sync()
	}
	if alive() {
		t.Fatal("probe back before its doubled back-off")
	}
	h.clk.Step(time.Second)
	h.sync()
	h.waitFor("the probe actor spawned again after the doubled back-off", alive)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.needPods != needPods {
		t.Fatalf("the PodActor restarted (%d NeedPod, %d before)", h.needPods, needPods)
	}
}
