package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlet/actorlet/internal/actortest"
)

// Issue 9: "[DeadLetter]" lines with raw Go structs at INFO after ordinary
// pod deletions and on exit. protoactor's own records below Warn go out at
// Debug (so a default run shows none); its errors stay visible.
func TestActorSystemLoggerDemotesDeadLetters(t *testing.T) {
	tests := []struct {
		name      string
		level     slog.Level // of the agent's logger (-v 4: Debug)
		wantDead  string     // how a dead letter shows; "" = not at all
		wantError string
	}{
		{name: "default level", level: slog.LevelInfo, wantError: "level=ERROR"},
		{name: "debug", level: slog.LevelDebug, wantDead: "level=DEBUG", wantError: "level=ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := &actortest.SyncBuffer{}
			log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: tt.level}))
			sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
				return actorSystemLogger(log)
			}))
			t.Cleanup(sys.Shutdown)
			// A message to an actor that has stopped, as after a pod deletion.
			pid := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
			if err := sys.Root.StopFuture(pid).Wait(); err != nil {
				t.Fatal(err)
			}
			sys.Root.Send(pid, "late message")
			sys.Logger().Error("a real error")

			actortest.Eventually(t, "the error logged", func() bool { return strings.Contains(out.String(), "a real error") })
			// Send publishes the dead letter, and logs it, before it returns.
			if got := strings.Contains(out.String(), "[DeadLetter]"); got != (tt.wantDead != "") {
				t.Errorf("dead letter logged: %v, want %v:\n%s", got, tt.wantDead != "", out)
			}
			for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				switch {
				case strings.Contains(line, "[DeadLetter]"):
					if tt.wantDead == "" || !strings.Contains(line, tt.wantDead) {
						t.Errorf("dead letter logged as %q, want %q", line, tt.wantDead)
					}
				case strings.Contains(line, "a real error"):
					if !strings.Contains(line, tt.wantError) || !strings.Contains(line, "lib=protoactor") {
						t.Errorf("error logged as %q, want %s lib=protoactor", line, tt.wantError)
					}
				case strings.Contains(line, "level=INFO"):
					t.Errorf("protoactor logged at Info: %q", line)
				}
			}
		})
	}
}
