package actorkit

import (
	"time"

	"k8s.io/utils/clock"
)

// Fired is what a Timer sends. Hand it to Timer.Fired: only the timer's
// newest arming of this incarnation fires; older ones are dropped.
type Fired struct {
	Tag
	Name string
	Seq  uint64
}

// Timer is one named, re-armable wake-up of an actor on the injected clock.
// Arming it again replaces the earlier arming. It belongs to the actor's
// state and is used from its mailbox only.
type Timer struct {
	name string
	t    clock.Timer
	at   time.Time
	seq  uint64
}

// NewTimer returns a disarmed timer; name tells timers of one actor apart.
func NewTimer(name string) Timer { return Timer{name: name} }

// Arm (re)arms the timer to fire after d.
func (t *Timer) Arm(s Self, d time.Duration) {
	t.Stop()
	t.seq++
	t.at = s.clk.Now().Add(d)
	t.t = s.After(d, &Fired{Tag: Tag{Gen: s.gen}, Name: t.name, Seq: t.seq})
}

// ArmAt arms the timer to fire at at, unless it is already armed to fire
// no later than that.
func (t *Timer) ArmAt(s Self, at time.Time) {
	if !t.at.IsZero() && !at.Before(t.at) {
		return
	}
	t.Arm(s, at.Sub(s.clk.Now()))
	t.at = at
}

// Stop disarms the timer; a message already on its way is dropped by Fired.
func (t *Timer) Stop() {
	if t.t != nil {
		t.t.Stop()
		t.t = nil
	}
	t.at = time.Time{}
	t.seq++
}

// At is when the timer fires; zero when disarmed.
func (t *Timer) At() time.Time { return t.at }

// Armed reports whether the timer is armed.
func (t *Timer) Armed() bool { return !t.at.IsZero() }

// Fired reports whether m is this timer's current arming, by the actor's
// current incarnation; if so the timer is now disarmed.
func (t *Timer) Fired(s Self, m *Fired) bool {
	if m == nil || !s.Mine(m) || m.Name != t.name || m.Seq != t.seq || t.at.IsZero() {
		return false
	}
	t.t, t.at = nil, time.Time{}
	return true
}
