package probe

import (
	"runtime"
	"testing"
	"time"
)

func TestWorkersReuseAnIdleWorker(t *testing.T) {
	w := newWorkers(time.Hour)
	ran := make(chan int, 1)
	const attempts = 50
	for i := range attempts {
		w.run(func() { ran <- i })
		if got := <-ran; got != i {
			t.Fatalf("ran %d, want %d", got, i)
		}
		// Let the worker get back to its receive, as it has a period's
		// time to between two probes.
		for range 100 {
			runtime.Gosched()
		}
	}
	// Without reuse every attempt would have left a worker (idle for an
	// hour); with it, one does (a second only if an attempt came while
	// the first was still on its way back).
	if n := w.live.Load(); n > 2 {
		t.Fatalf("%d attempts one after the other left %d workers, want 1 (an idle worker takes the next attempt)", attempts, n)
	}
}

func TestWorkersNeverQueueBehindABusyOne(t *testing.T) {
	w := newWorkers(time.Hour)
	block := make(chan struct{})
	defer close(block)
	started := make(chan struct{})
	w.run(func() { close(started); <-block })
	<-started
	// The only worker is busy: the next attempt runs now, on a new worker,
	// not after the first one.
	done := make(chan struct{})
	w.run(func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an attempt waited for a busy worker")
	}
	if n := w.live.Load(); n != 2 {
		t.Fatalf("%d workers, want 2", n)
	}
}

func TestWorkersEndWhenIdle(t *testing.T) {
	w := newWorkers(time.Millisecond)
	ran := make(chan struct{})
	w.run(func() { close(ran) })
	<-ran
	deadline := time.Now().Add(10 * time.Second)
	for w.live.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("an idle worker did not end: %d live", w.live.Load())
		}
		runtime.Gosched()
	}
}
