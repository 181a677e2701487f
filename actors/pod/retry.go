package pod

import (
	"time"

	"github.com/actorlet/actorlet/internal/actorkit"
)

// retry paces a PodActor after failed runtime operations: no new operation
// before holdUntil, and the delay doubles with each consecutive failure.
type retry struct {
	backoff   actorkit.Backoff
	failures  int
	holdUntil time.Time
}

func newRetry(base time.Duration) retry {
	return retry{backoff: actorkit.Backoff{Base: base, Cap: 30 * time.Second}}
}

// fail counts a failure and returns the delay before the next try: the
// base after the first failure, doubling with each further one.
func (r *retry) fail() time.Duration {
	r.failures++
	return r.backoff.Delay(r.failures)
}

// ok resets the count after a success.
func (r *retry) ok() { r.failures = 0 }

// hold defers the next operation until now+d and returns that time.
func (r *retry) hold(now time.Time, d time.Duration) time.Time {
	r.holdUntil = now.Add(d)
	return r.holdUntil
}

// held reports whether an operation must wait.
func (r *retry) held(now time.Time) bool { return now.Before(r.holdUntil) }
