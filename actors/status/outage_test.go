package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
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
