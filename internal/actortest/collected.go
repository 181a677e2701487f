package actortest

import (
	"fmt"
	"runtime"
	"testing"
	"weak"
)

// Alive runs the collector and counts the objects of ps still reachable.
func Alive[T any](ps []weak.Pointer[T]) int {
	runtime.GC()
	n := 0
	for _, p := range ps {
		if p.Value() != nil {
			n++
		}
	}
	return n
}

// Collected waits until no object of ps is reachable any more (weak
// pointers made with weak.Make while the test held them), running the
// collector between looks, and fails naming what after 10 s: what still
// holds them is a leak.
func Collected[T any](t testing.TB, what string, ps []weak.Pointer[T]) {
	t.Helper()
	EventuallyDetail(t, what+" collected", func() bool { return Alive(ps) == 0 },
		func() string { return fmt.Sprintf("%d of %d still reachable", Alive(ps), len(ps)) })
}
