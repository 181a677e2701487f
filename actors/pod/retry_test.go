package pod

import (
	"testing"
	"time"
)

func TestRetryFail(t *testing.T) {
	tests := []struct {
		name     string
		base     time.Duration
		failures int // consecutive fail calls; the last one's delay is checked
		okAfter  int // ok after this many failures (0: never)
		want     time.Duration
	}{
		{name: "first failure waits the base", base: time.Second, failures: 1, want: time.Second},
		{name: "second failure doubles", base: time.Second, failures: 2, want: 2 * time.Second},
		{name: "fifth failure", base: time.Second, failures: 5, want: 16 * time.Second},
		{name: "sixth failure is capped at 30 s", base: time.Second, failures: 6, want: 30 * time.Second},
		{name: "many failures stay at the cap", base: time.Second, failures: 50, want: 30 * time.Second},
		{name: "a larger base doubles to the cap", base: 10 * time.Second, failures: 3, want: 30 * time.Second},
		{name: "a base over the cap is capped", base: time.Minute, failures: 1, want: 30 * time.Second},
		{name: "ok resets: the next failure waits the base", base: time.Second, okAfter: 4, failures: 5, want: time.Second},
		{name: "ok resets: then doubling starts over", base: time.Second, okAfter: 4, failures: 6, want: 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRetry(tt.base)
			var got time.Duration
			for i := 1; i <= tt.failures; i++ {
				got = r.fail()
				if i == tt.okAfter {
					r.ok()
				}
			}
			if got != tt.want {
				t.Errorf("delay after %d failures = %s, want %s", tt.failures, got, tt.want)
			}
		})
	}
}

func TestRetryHold(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		hold     time.Duration // 0: never held
		at       time.Duration // when held is asked, after now
		want     bool
		wantTill time.Time
	}{
		{name: "never held", at: 0},
		{name: "held right away", hold: 5 * time.Second, at: 0, want: true, wantTill: now.Add(5 * time.Second)},
		{name: "held until just before the end", hold: 5 * time.Second, at: 5*time.Second - time.Nanosecond, want: true, wantTill: now.Add(5 * time.Second)},
		{name: "free at the end", hold: 5 * time.Second, at: 5 * time.Second, wantTill: now.Add(5 * time.Second)},
		{name: "free after the end", hold: 5 * time.Second, at: time.Minute, wantTill: now.Add(5 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRetry(time.Second)
			if tt.hold > 0 {
				if till := r.hold(now, tt.hold); !till.Equal(tt.wantTill) {
					t.Errorf("hold returned %s, want %s", till, tt.wantTill)
				}
			}
			if got := r.held(now.Add(tt.at)); got != tt.want {
				t.Errorf("held at +%s = %v, want %v", tt.at, got, tt.want)
			}
		})
	}
}

func TestRetryHoldIsReplaced(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newRetry(time.Second)
	r.hold(now, time.Minute)
	r.hold(now, time.Second) // a later hold replaces the earlier one
	if r.held(now.Add(2 * time.Second)) {
		t.Fatal("held by a replaced hold")
	}
	r.ok() // a success does not end a hold
	r.hold(now, time.Minute)
	r.ok()
	if !r.held(now.Add(time.Second)) {
		t.Fatal("ok ended the hold")
	}
}
