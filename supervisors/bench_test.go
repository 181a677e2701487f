package supervisors

import (
	"log/slog"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/ctxext"
)

// fakeCtx is the part of a ReceiverContext the middlewares use.
type fakeCtx struct {
	actor.ReceiverContext
	self *actor.PID
	ext  *ctxext.ContextExtensions
}

func (f *fakeCtx) Self() *actor.PID                                         { return f.self }
func (f *fakeCtx) Get(id ctxext.ContextExtensionID) ctxext.ContextExtension { return f.ext.Get(id) }
func (f *fakeCtx) Set(e ctxext.ContextExtension)                            { f.ext.Set(e) }

// BenchmarkMiddlewares measures the per-message cost of the full chain
// (Recover, Chaos, registry) around an empty receiver.
func BenchmarkMiddlewares(b *testing.B) {
	reg := NewRegistry(nil)
	mws := Middlewares(reg, slog.New(slog.DiscardHandler), nil)
	var h actor.ReceiverFunc = func(actor.ReceiverContext, *actor.MessageEnvelope) {}
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	c := &fakeCtx{self: actor.NewPID("nonhost", "root/node/pod-1"), ext: ctxext.NewContextExtensions()}
	h(c, &actor.MessageEnvelope{Message: &actor.Started{}})
	env := &actor.MessageEnvelope{Message: inc{}}
	b.ReportAllocs()
	for b.Loop() {
		h(c, env)
	}
	if reg.Snapshot()[0].Messages < 2 {
		b.Fatal("not counted")
	}
}
