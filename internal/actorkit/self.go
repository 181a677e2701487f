package actorkit

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/utils/clock"
)

// Self is an actor's own address, clock and incarnation, for the idioms
// below. Make it in the Started handler; the zero value sends nothing.
type Self struct {
	sys *actor.ActorSystem
	pid *actor.PID
	clk clock.WithDelayedExecution
	gen uint64
}

// Start returns the Self of the actor handling *actor.Started in ctx, with
// a new generation.
func Start(ctx actor.Context, clk clock.WithDelayedExecution) Self {
	return Self{sys: ctx.ActorSystem(), pid: ctx.Self(), clk: clk, gen: rand.Uint64()}
}

// Gen is this incarnation's generation.
func (s Self) Gen() uint64 { return s.gen }

// PID is the actor's own PID.
func (s Self) PID() *actor.PID { return s.pid }

// Clock is the injected clock.
func (s Self) Clock() clock.WithDelayedExecution { return s.clk }

// Started reports whether the Self was made by Start.
func (s Self) Started() bool { return s.pid != nil }

// Send sends msg to the actor itself (safe from any goroutine).
func (s Self) Send(msg any) {
	if s.pid != nil {
		s.sys.Root.Send(s.pid, msg)
	}
}

// SendTo sends msg to another actor (safe from any goroutine).
func (s Self) SendTo(to *actor.PID, msg any) {
	if s.pid != nil && to != nil {
		s.sys.Root.Send(to, msg)
	}
}

// Tag marks a message that reports back to the actor that asked for it:
// embed it in the result type of Go; Mine tells whether a result belongs to
// the current incarnation.
type Tag struct {
	Gen uint64
}

func (t *Tag) setGen(g uint64) { t.Gen = g }

// TagGen is the generation the message was tagged with.
func (t *Tag) TagGen() uint64 { return t.Gen }

// Tagged is a result type of Go: a pointer to a struct that embeds Tag.
type Tagged interface {
	setGen(uint64)
	TagGen() uint64
}

// Mine reports whether a tagged message belongs to this incarnation.
func (s Self) Mine(m interface{ TagGen() uint64 }) bool {
	return s.pid != nil && m.TagGen() == s.gen
}

// Go runs f off the mailbox, with a context bounded by timeout (none when
// timeout <= 0), and sends its result to the actor tagged with the
// current generation. The mailbox never waits on f; a kill or an update
// gets through while it runs.
func Go[T Tagged](s Self, timeout time.Duration, f func(ctx context.Context) T) {
	GoIn(s, context.Background(), timeout, f)
}

// GoIn is Go with a context derived from parent, e.g. one the actor cancels
// when it stops, so that its calls in flight end with it.
func GoIn[T Tagged](s Self, parent context.Context, timeout time.Duration, f func(ctx context.Context) T) {
	gen := s.gen
	go func() {
		var ctx context.Context
		var cancel context.CancelFunc
		if timeout > 0 {
			ctx, cancel = context.WithTimeout(parent, timeout)
		} else {
			ctx, cancel = context.WithCancel(parent)
		}
		defer cancel()
		r := f(ctx)
		r.setGen(gen)
		s.Send(r)
	}()
}

// After sends msg to the actor after d on the injected clock. It is the
// bare idiom; Timer adds re-arming and stale detection.
func (s Self) After(d time.Duration, msg any) clock.Timer {
	if d < 0 {
		d = 0
	}
	return s.clk.AfterFunc(d, func() { s.Send(msg) })
}
