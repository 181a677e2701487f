package pod

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/actorlet/actorlet/actors/probe"
)

// redirectingHTTP answers every httpGet probe as a redirect to another host
// that was not followed: success with a warning.
type redirectingHTTP struct{}

var _ probe.HTTPGetter = redirectingHTTP{}

const redirectBody = `Probe terminated redirects, Response body: <a href="http://0.0.0.0/">Found</a>.`

func (redirectingHTTP) HTTPGet(context.Context, *url.URL, http.Header, time.Duration) (bool, bool, string, error) {
	return true, true, redirectBody, nil
}

// TestProbeWarningEvent: a liveness probe redirected to another host keeps
// the container running and records a ProbeWarning event, as upstream.
func TestProbeWarningEvent(t *testing.T) {
	p := testPod(v1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].LivenessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/redirect", Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
	}
	rec := &fakeRecorder{}
	h := newHarnessWith(t, p, func(d *Deps) {
		d.Events = rec
		d.Probes.Handlers.HTTP = redirectingHTTP{}
	})
	h.waitStatus("Running", running)
	want := "Warning ProbeWarning Liveness probe warning: " + redirectBody
	for range 3 {
		h.clk.Step(time.Second)
		h.sync()
	}
	h.waitFor("the ProbeWarning event", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return slices.Contains(rec.events, want)
	})
	h.settle()
	if n := h.rt.Count("StopContainer"); n != 0 {
		t.Errorf("StopContainer %d: a probe that succeeded with a warning must not kill the container", n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	n := 0
	for _, e := range rec.events {
		if e == want {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d ProbeWarning events, want 1 (events %q)", n, rec.events)
	}
}
