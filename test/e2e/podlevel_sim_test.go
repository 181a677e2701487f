package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestE2ESimPushPodLevelResources: a pushed pod with pod-level resources
// runs with the QoS class the API server would give it (a pod-level limit
// alone defaults the request, as the API server does: Guaranteed), and one
// whose pod-level limit is below its container's request is refused with
// the API server's message, nothing run.
func TestE2ESimPushPodLevelResources(t *testing.T) {
	a := startAgent(t, agentOpts{})
	code, body := a.postPod(t, busyboxPod("plr-limits", "spec.resources: {limits: {cpu: 100m, memory: 64Mi}}", sleepForever))
	if code != http.StatusCreated {
		t.Fatalf("POST of a pod-level pod: %d %q", code, body)
	}
	p := a.waitPod(time.Minute, "plr-limits-e2e-node", "Running", isRunning)
	if p.Status.QOSClass != v1.PodQOSGuaranteed {
		t.Fatalf("qosClass %q, want Guaranteed from the pod-level resources", p.Status.QOSClass)
	}
	code, body = a.postPod(t, busyboxPod("plr-bad", "spec.resources: {limits: {cpu: 100m}}", sleepForever,
		"resources: {requests: {cpu: 200m}}"))
	want := `spec.resources.requests[cpu]: Invalid value: "200m": must be less than or equal to cpu limit of 100m`
	if code != http.StatusBadRequest || !strings.Contains(body, want) {
		t.Fatalf("POST of a pod-level limit below the requests: %d %.300q, want 400 naming %q", code, body, want)
	}
	pods, err := a.pods()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if strings.HasPrefix(p.Name, "plr-bad") {
			t.Fatalf("the refused pod is on the node: %s %s", p.Name, p.Status.Phase)
		}
	}
}
