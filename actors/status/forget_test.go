package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/messages"
)

// A final delete waiting for the API (held by the QPS limit, or a write in
// flight) is not cancelled by a later plain forget of the same pod (a
// second PodActor found nothing left of it): the pod must not stay
// Terminating in the API for good.
func TestWriterFinalDeleteSurvivesALaterForget(t *testing.T) {
	h := newWriterHarness(t)
	h.api.pods["default/a"] = apiPodWith("a", "uid-a", v1.PodRunning)
	block := make(chan struct{})
	h.api.block = block
	h.update(apiPodWith("a", "uid-a", v1.PodSucceeded))
	h.waitFor("the status write started", func() bool { return h.api.count("patch") == 0 })
	h.sys.Root.Send(h.pid, &messages.PodForget{UID: "uid-a", Namespace: "default", Name: "a", DeleteFromAPI: true})
	h.sys.Root.Send(h.pid, &messages.PodForget{UID: "uid-a", Namespace: "default", Name: "a"})
	h.api.mu.Lock()
	h.api.block = nil
	h.api.mu.Unlock()
	close(block)
	h.waitFor("deleted from the API", func() bool { return h.api.get("a") == nil })
}
