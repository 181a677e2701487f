package pleg

import (
	"testing"
	"time"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/internal/fakecri"
)

// PLEG on-demand relist (upstream PLEGOnDemandRelist, GA in v1.37): a
// PodActor that waits for a relist newer than its last operation gets one
// OnDemandMinInterval after the last relist started, not a Period later;
// turned off (negative), the wait is the Period.
func TestOnDemandRelist(t *testing.T) {
	tests := []struct {
		name     string
		interval time.Duration
		wantAt   time.Duration // when, after the first relist, the next starts
	}{
		{name: "default: a fifth of the period", interval: 0, wantAt: period / 5},
		{name: "off", interval: -1, wantAt: period},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := fakecri.New(nil)
			rt.Replace(view1.sandboxes, view1.containers)
			h := newHarnessCfg(t, rt, rt, Config{Period: period, Threshold: time.Minute, OnDemandMinInterval: tt.interval})
			h.settle()
			n := rt.Count("ListPodSandbox")
			// u1's operation ended just after the first relist started.
			h.clk.Step(time.Millisecond)
			h.ask("u1", h.clk.Now())
			checkNoReply(t, h.node.takeReplies())

			const step = 10 * time.Millisecond
			for h.clk.Now().Before(t0.Add(tt.wantAt - step)) {
				h.clk.Step(step)
				actortest.Sync(t, h.sys, h.pleg)
				if rt.Count("ListPodSandbox") != n {
					t.Fatalf("relisted %v after the first, want %v", h.clk.Since(t0), tt.wantAt)
				}
			}
			actortest.Eventually(t, "the on-demand relist to be armed", h.clk.HasWaiters)
			h.clk.SetTime(t0.Add(tt.wantAt))
			actortest.Eventually(t, "the relist to start", func() bool { return rt.Count("ListPodSandbox") > n })
			h.settle()
			replies := h.node.takeReplies()
			checkReply(t, replies, "u1", objects([]string{"s1"}, "c1"), t0.Add(tt.wantAt))
		})
	}
}
