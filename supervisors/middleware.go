package supervisors

import (
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlet/actorlet/messages"
)

// Recover returns a receiver middleware that recovers a panic in the
// actor's Receive, logs it at Error level with the actor's kind, PID, the
// message type and the goroutine's stack (protoactor logs recovered panics
// without one), calls onPanic (may be nil) and panics again with the same
// value, so that protoactor's supervision still runs. A crash injected by
// the Chaos middleware is logged at Info without a stack.
func Recover(log *slog.Logger, onPanic func(kind string, reason any, stack []byte)) actor.ReceiverMiddleware {
	return recoverWith(log, func(_ *actor.PID, kind string, reason any, stack []byte) {
		if onPanic != nil {
			onPanic(kind, reason, stack)
		}
	})
}

func recoverWith(log *slog.Logger, onPanic func(pid *actor.PID, kind string, reason any, stack []byte)) actor.ReceiverMiddleware {
	if log == nil {
		log = slog.Default()
	}
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			defer func() {
				r := recover()
				if r == nil {
					return
				}
				stack := debug.Stack()
				self := c.Self()
				kind := KindOf(self)
				var id string
				if self != nil {
					id = self.Id
				}
				if isChaos(env) {
					// Injected on purpose, possibly thousands a second: no stack.
					log.Info("actor crashed by chaos injection", "kind", kind, "pid", id, "reason", fmt.Sprint(r))
				} else {
					log.Error("actor panicked",
						"kind", kind, "pid", id, "reason", fmt.Sprint(r),
						"message", typeName(env), "stack", string(stack))
				}
				onPanic(self, kind, r, stack)
				panic(r)
			}()
			next(c, env)
		}
	}
}

func isChaos(env *actor.MessageEnvelope) bool {
	if env == nil {
		return false
	}
	switch env.Message.(type) {
	case messages.ChaosPanic, *messages.ChaosPanic:
		return true
	}
	return false
}

// Chaos returns a receiver middleware that panics with "chaos: <reason>"
// when the message is a messages.ChaosPanic (value or pointer), before the
// actor sees it. Other messages pass through.
func Chaos() actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if env != nil {
				switch m := env.Message.(type) {
				case messages.ChaosPanic:
					panic(chaosReason(m.Reason))
				case *messages.ChaosPanic:
					r := ""
					if m != nil {
						r = m.Reason
					}
					panic(chaosReason(r))
				}
			}
			next(c, env)
		}
	}
}

func chaosReason(r string) string {
	if r == "" {
		r = "injected panic"
	}
	return "chaos: " + r
}

// Middlewares returns the receiver middlewares every actorlet actor's props
// carry, outermost first: Recover (logs the stack, records the failure in
// reg, calls onPanic), Chaos, then reg's registry middleware. Use as
// actor.WithReceiverMiddleware(Middlewares(reg, log, onPanic)...). reg and
// onPanic may be nil.
func Middlewares(reg *Registry, log *slog.Logger, onPanic func(kind string, reason any, stack []byte)) []actor.ReceiverMiddleware {
	rec := recoverWith(log, func(pid *actor.PID, kind string, reason any, stack []byte) {
		if reg != nil {
			reg.NoteFailure(pid, reason)
		}
		if onPanic != nil {
			onPanic(kind, reason, stack)
		}
	})
	mws := []actor.ReceiverMiddleware{rec, Chaos()}
	if reg != nil {
		mws = append(mws, reg.Middleware())
	}
	return mws
}
