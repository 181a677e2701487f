package supervisors

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testLogger(t *testing.T) (*slog.Logger, *syncBuffer) {
	t.Helper()
	buf := &syncBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

func newSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	t.Cleanup(sys.Shutdown)
	return sys
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling interval, not synchronisation
	}
}

// never checks that cond stays false for a short while.
func never(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(deadline) {
		if cond() {
			t.Fatalf("unexpected: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
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
