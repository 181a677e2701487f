package pod

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestDeadline(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ads := func(s int64) *int64 { return &s }
	tests := []struct {
		name       string
		seconds    *int64
		phase      v1.PodPhase
		exceeded   bool // already passed before
		now        time.Duration
		wantPassed bool
		wantAt     time.Time
		wantExceed bool
	}{
		{name: "no deadline", phase: v1.PodRunning, now: time.Hour},
		{name: "before: when it will pass", seconds: ads(30), phase: v1.PodRunning, now: 10 * time.Second, wantAt: start.Add(30 * time.Second)},
		{name: "just before", seconds: ads(30), phase: v1.PodPending, now: 30*time.Second - time.Nanosecond, wantAt: start.Add(30 * time.Second)},
		{name: "at the deadline: passed", seconds: ads(30), phase: v1.PodRunning, now: 30 * time.Second, wantPassed: true, wantExceed: true},
		{name: "after the deadline: passed", seconds: ads(30), phase: v1.PodRunning, now: time.Hour, wantPassed: true, wantExceed: true},
		{name: "zero seconds: passed at once", seconds: ads(0), phase: v1.PodPending, now: 0, wantPassed: true, wantExceed: true},
		{name: "passed once, not again", seconds: ads(30), phase: v1.PodFailed, exceeded: true, now: time.Hour, wantExceed: true},
		{name: "passed once, not again while running", seconds: ads(30), phase: v1.PodRunning, exceeded: true, now: time.Hour, wantExceed: true},
		{name: "Succeeded: none", seconds: ads(30), phase: v1.PodSucceeded, now: time.Hour},
		{name: "Failed: none", seconds: ads(30), phase: v1.PodFailed, now: time.Hour},
		{name: "Succeeded before it: nothing to wait for", seconds: ads(30), phase: v1.PodSucceeded, now: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod(v1.RestartPolicyAlways, "app")
			pod.Spec.ActiveDeadlineSeconds = tt.seconds
			d := deadline{exceeded: tt.exceeded}
			passed, at := d.check(pod, tt.phase, start, start.Add(tt.now))
			if passed != tt.wantPassed || !at.Equal(tt.wantAt) {
				t.Errorf("check = %v %s, want %v %s", passed, at, tt.wantPassed, tt.wantAt)
			}
			if d.exceeded != tt.wantExceed {
				t.Errorf("exceeded = %v, want %v", d.exceeded, tt.wantExceed)
			}
		})
	}
}

func TestDeadlinePassesOnce(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := testPod(v1.RestartPolicyAlways, "app")
	secs := int64(30)
	pod.Spec.ActiveDeadlineSeconds = &secs
	var d deadline
	n := 0
	for _, at := range []time.Duration{0, 29 * time.Second, 30 * time.Second, 31 * time.Second, time.Hour} {
		if passed, _ := d.check(pod, v1.PodRunning, start, start.Add(at)); passed {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("passed %d times, want once", n)
	}
}
