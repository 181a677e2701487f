package actorkit

import (
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Backoff is exponential back-off: Base doubling up to Cap, computed with
// apimachinery's wait.Backoff. It paces container restarts (CrashLoopBackOff),
// a PodActor's retries after failed runtime calls, the status writer's
// retries, supervisor restarts and the wait for the runtime at start-up.
// Image pulls, whose back-off is kept per image, use client-go's
// flowcontrol.Backoff directly.
type Backoff struct {
	Base, Cap time.Duration
}

// Delay is the n-th delay (n >= 1): Base, 2*Base, 4*Base, ... capped at
// Cap (a Cap below Base caps Base too; no Cap: no cap). n <= 0 gives 0.
func (b Backoff) Delay(n int) time.Duration {
	if n <= 0 || b.Base <= 0 {
		return 0
	}
	capd := b.Cap
	if capd <= 0 {
		capd = time.Duration(1 << 61) // ~73 years; doubling it still fits
	}
	if capd < b.Base {
		return capd
	}
	wb := wait.Backoff{Duration: b.Base, Factor: 2, Cap: capd, Steps: n}
	var d time.Duration
	for i := 0; i < n; i++ {
		d = wb.Step()
		if d >= capd {
			return capd
		}
	}
	return d
}
