package probe

import (
	"sync/atomic"
	"time"
)

// workers runs probe attempts off the mailboxes on goroutines that outlive
// one attempt. An attempt's call stack is deep (a gRPC client call, an HTTP
// request): a fresh goroutine per attempt grows its stack on every probe,
// which cost a tenth of the agent's CPU at 1,000 exec probes a second; a
// worker grows its stack once. No attempt ever waits for a worker: when
// none is idle, a new one starts, and a worker idle for idle ends.
type workers struct {
	work chan func()
	idle time.Duration
	live atomic.Int64 // workers started and not ended
}

// attempts runs the attempts of every ProbeActor of the process.
var attempts = newWorkers(10 * time.Second)

func newWorkers(idle time.Duration) *workers {
	return &workers{work: make(chan func()), idle: idle}
}

// run runs f on an idle worker, or on a new one.
func (w *workers) run(f func()) {
	select {
	case w.work <- f:
	default:
		w.live.Add(1)
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	defer w.live.Add(-1)
	f()
	t := time.NewTimer(w.idle)
	defer t.Stop()
	for {
		select {
		case f := <-w.work:
			f()
			t.Reset(w.idle)
		case <-t.C:
			return
		}
	}
}
