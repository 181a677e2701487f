// Package actortest helps unit tests of one actor synchronise with its
// mailbox instead of sleeping.
package actortest

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// barrier is answered by the Barrier middleware, never seen by the actor.
type barrier struct{}

// Barrier returns a receiver middleware that answers a Sync request once
// every message queued before it has been handled. Wrap the actor under test
// with it: actor.WithReceiverMiddleware(actortest.Barrier()).
func Barrier() actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if env != nil {
				if _, ok := env.Message.(barrier); ok {
					if env.Sender != nil {
						c.ActorSystem().Root.Send(env.Sender, barrier{})
					}
					return
				}
			}
			next(c, env)
		}
	}
}

// Sync returns once the actor at pid (wrapped with Barrier) has handled every
// message sent to it before the call: timer callbacks the fake clock already
// ran, replies already delivered. Work the actor started in goroutines may
// still be running.
func Sync(t testing.TB, sys *actor.ActorSystem, pid *actor.PID) {
	t.Helper()
	if _, err := sys.Root.RequestFuture(pid, barrier{}, 5*time.Second).Result(); err != nil {
		t.Fatalf("actor %s did not reach the barrier: %v", pid, err)
	}
}

// Eventually polls cond every millisecond until it holds and fails the test,
// naming what it waited for, when 10 s pass first. The polling interval is
// not synchronisation: cond says what the test waits for.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyDetail(t, what, cond, nil)
}

// EventuallyWithin is Eventually with a limit other than 10 s (a test that
// waits on a slower part, or one whose failure should come sooner).
func EventuallyWithin(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	eventually(t, limit, what, cond, nil)
}

// EventuallyDetail is Eventually with detail (may be nil) describing the
// state in the failure message.
func EventuallyDetail(t testing.TB, what string, cond func() bool, detail func() string) {
	t.Helper()
	eventually(t, 10*time.Second, what, cond, detail)
}

func eventually(t testing.TB, limit time.Duration, what string, cond func() bool, detail func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			if detail != nil {
				t.Fatalf("timed out after %v waiting for %s: %s", limit, what, detail())
			}
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(time.Millisecond)
	}
}
