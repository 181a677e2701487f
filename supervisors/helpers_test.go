package supervisors

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/internal/actortest"
)

func testLogger(t *testing.T) (*slog.Logger, *actortest.SyncBuffer) {
	t.Helper()
	buf := &actortest.SyncBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// observed is a fresh actor system, a registry on clk (nil: the real clock)
// and the middlewares that feed it, logging to a test logger.
func observed(t *testing.T, clk clock.PassiveClock) (*actor.ActorSystem, *Registry, []actor.ReceiverMiddleware) {
	t.Helper()
	sys := newSystem(t)
	log, _ := testLogger(t)
	reg := NewRegistry(clk)
	return sys, reg, Middlewares(reg, log, nil)
}

// counterProps is a counter behind mws.
func counterProps(mws []actor.ReceiverMiddleware) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &counter{} }, actor.WithReceiverMiddleware(mws...))
}

func newSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	t.Cleanup(sys.Shutdown)
	return sys
}

func restartsOf(reg *Registry, id string) int {
	for _, a := range reg.Snapshot() {
		if a.PID == id {
			return a.Restarts
		}
	}
	return -1
}

// counter keeps a count across messages; it answers get with its count.
type inc struct{}
type get struct{}

type counter struct{ n int }

func (c *counter) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case inc:
		c.n++
	case get:
		ctx.Respond(c.n)
	}
}

func ask(t *testing.T, sys *actor.ActorSystem, pid *actor.PID, msg any) any {
	t.Helper()
	res, err := sys.Root.RequestFuture(pid, msg, 5*time.Second).Result()
	if err != nil {
		t.Fatalf("ask %s %T: %v", pid.Id, msg, err)
	}
	return res
}

func pidOf(sys *actor.ActorSystem, id string) *actor.PID {
	return actor.NewPID(sys.Address(), id)
}
