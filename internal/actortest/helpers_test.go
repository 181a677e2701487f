package actortest

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestSyncBufferConcurrentWrites(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprintf(&b, "%d\n", i)
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 {
		t.Fatalf("%d lines, want 800", n)
	}
}

func TestSyncBufferWroteSignalsEachWait(t *testing.T) {
	var b SyncBuffer
	_, _ = b.Write([]byte("before")) // not signalled: no one asked yet
	wrote := b.Wrote()
	select {
	case <-wrote:
		t.Fatal("signalled for a write made before Wrote")
	default:
	}
	go func() {
		for _, w := range []string{" one", " two", " tick"} {
			_, _ = b.Write([]byte(w))
		}
	}()
	for !strings.Contains(b.String(), "tick") {
		<-wrote
	}
	if got := b.String(); got != "before one two tick" {
		t.Fatalf("got %q", got)
	}
}

// fatalTB records a Fatalf and ends its goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with f in a goroutine of its own and says whether fn returned
// (rather than failing).
func (f *fatalTB) run(fn func(testing.TB)) (returned bool) {
	done := make(chan bool)
	go func() {
		ok := false
		defer func() { done <- ok }()
		fn(f)
		ok = true
	}()
	return <-done
}

func TestEventuallyWithinReturnsOnceCondHolds(t *testing.T) {
	var calls atomic.Int32
	f := &fatalTB{TB: t}
	if !f.run(func(tb testing.TB) {
		EventuallyWithin(tb, time.Minute, "third look", func() bool { return calls.Add(1) == 3 })
	}) {
		t.Fatalf("failed: %s", f.msg)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

func TestEventuallyWithinFailsNamingWhat(t *testing.T) {
	f := &fatalTB{TB: t}
	if f.run(func(tb testing.TB) {
		EventuallyWithin(tb, time.Millisecond, "the impossible", func() bool { return false })
	}) {
		t.Fatal("returned although cond never held")
	}
	if !strings.Contains(f.msg, "timed out after 1ms waiting for the impossible") {
		t.Fatalf("message %q", f.msg)
	}
}

func TestEventuallyDetailSaysTheState(t *testing.T) {
	f := &fatalTB{TB: t}
	// The 10 s limit of EventuallyDetail is too long for a unit test:
	// eventually is the same path with a short limit.
	if f.run(func(tb testing.TB) {
		eventually(tb, time.Millisecond, "ready", func() bool { return false }, func() string { return "3 of 4 up" })
	}) {
		t.Fatal("returned although cond never held")
	}
	if !strings.HasSuffix(f.msg, "waiting for ready: 3 of 4 up") {
		t.Fatalf("message %q", f.msg)
	}
}
