package kube

import (
	"testing"

	"k8s.io/client-go/rest"
)

// Kubernetes v1.37: eventRecordQPS (--event-qps) 0 is unlimited. The agent
// passes it on as a negative EventQPS, and the events client then has no
// rate limiter at all; 0 (unset) is the default of 50 per second, and the
// other clients keep their own limit.
func TestEventQPSUnlimited(t *testing.T) {
	tests := []struct {
		name        string
		eventQPS    float32
		wantLimited bool
	}{
		{name: "unset is 50", eventQPS: 0, wantLimited: true},
		{name: "set", eventQPS: 5, wantLimited: true},
		{name: "unlimited", eventQPS: -1, wantLimited: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &rest.Config{Host: "https://127.0.0.1:6443"}
			o := Options{EventQPS: tt.eventQPS}
			applyOptions(cfg, &o)
			c, err := newFromConfig(cfg, "n1", o)
			if err != nil {
				t.Fatal(err)
			}
			rl := c.events.CoreV1().RESTClient().GetRateLimiter()
			if (rl != nil) != tt.wantLimited {
				t.Fatalf("event QPS %v: rate limiter %v, want limited=%v", tt.eventQPS, rl, tt.wantLimited)
			}
			if tt.wantLimited && rl.QPS() != o.EventQPS {
				t.Fatalf("event QPS %v: limiter at %v", o.EventQPS, rl.QPS())
			}
			if c.cs.CoreV1().RESTClient().GetRateLimiter() == nil {
				t.Fatal("the main client lost its rate limiter")
			}
		})
	}
}
