package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/messages"
)

// TestWriterFlushesEverythingOnceTheAPIAnswers: after an API server outage
// the first write that succeeds retries every pod waiting on its back-off
// at once, so statuses that changed during the outage reach the API server
// right after it is back, not up to RetryMax later. On the old code pod a
// (backed off to 4 s) waited for its own timer.
func TestWriterFlushesEverythingOnceTheAPIAnswers(t *testing.T) {
	h := newWriterHarness(t) // back-off 1 s doubling to 4 s
	h.api.pods["default/a"] = apiPodWith("a", "uid-a", v1.PodPending)
	h.api.pods["default/b"] = apiPodWith("b", "uid-b", v1.PodPending)
	h.api.down = true
	h.update(apiPodWith("a", "uid-a", v1.PodRunning))
	// a fails four times: its back-off reaches the 4 s cap.
	for i := 1; i <= 4; i++ {
		h.waitFor("a's write failed", func() bool { return h.api.count("patch a") >= i })
		h.waitFor("a's retry armed", h.clk.HasWaiters)
		if i < 4 {
			h.clk.Step(time.Duration(1<<(i-1)) * time.Second)
		}
	}
	// b changes late in the outage: its first retry comes after 1 s.
	h.update(apiPodWith("b", "uid-b", v1.PodSucceeded))
	h.waitFor("b's write failed", func() bool { return h.api.count("patch b") == 1 })
	h.api.mu.Lock()
	h.api.down = false
	h.api.mu.Unlock()
	h.waitFor("b's retry armed", h.clk.HasWaiters)
	h.clk.Step(time.Second) // b's retry is due, a's is not (4 s)
	h.waitFor("b written", func() bool { return h.api.get("b").Status.Phase == v1.PodSucceeded })
	h.waitFor("a written as soon as the API server answered b", func() bool {
		return h.api.get("a").Status.Phase == v1.PodRunning
	})
}

// TestWriterWritesItsStatusAgainOverAnotherWriter: after an API server
// outage the node lifecycle controller marks the node's pods not ready in
// the API server; the pod watch brings that status (newer than what the
// writer wrote) and the writer writes the pod's own status again, as
// upstream's status manager reconciles. The echo of its own write (not
// newer) changes nothing. On the old code the API pod kept Ready=False until
// the pod's status changed on the node.
func TestWriterWritesItsStatusAgainOverAnotherWriter(t *testing.T) {
	h := newWriterHarness(t)
	p := apiPodWith("a", "uid-a", v1.PodPending)
	p.ResourceVersion = "10"
	h.api.pods["default/a"] = p
	ours := apiPodWith("a", "uid-a", v1.PodRunning)
	ours.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	h.update(ours)
	h.waitFor("Running and Ready written", func() bool { return h.api.count("patch a Running") == 1 })
	// The echo of our write (same resourceVersion) changes nothing.
	h.sys.Root.Send(h.pid, &messages.PodAPIStatus{UID: "uid-a", ResourceVersion: "10", Status: h.api.get("a").Status.DeepCopy()})
	// The node lifecycle controller's write: Ready=False, a newer version.
	marked := h.api.get("a").Status.DeepCopy()
	marked.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "NodeNotReady"}}
	h.api.mu.Lock()
	h.api.pods["default/a"].Status = *marked.DeepCopy()
	h.api.pods["default/a"].ResourceVersion = "12"
	h.api.mu.Unlock()
	h.sys.Root.Send(h.pid, &messages.PodAPIStatus{UID: "uid-a", ResourceVersion: "12", Status: marked})
	h.waitFor("Ready=True written again", func() bool {
		c := h.api.get("a").Status.Conditions
		return len(c) == 1 && c[0].Status == v1.ConditionTrue
	})
	_ = h.sys.Root.RequestFuture(h.pid, &messages.GetPods{}, time.Second).Wait()
	if n := h.api.count("patch a"); n != 2 {
		t.Fatalf("%d patches, want 2 (ours, then ours again over the controller's)", n)
	}
}
