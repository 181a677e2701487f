package main

import (
	"context"
	"log/slog"
)

// actorSystemLogger is the logger protoactor logs through. Its records below
// Warn go out at Debug: "[DeadLetter]" with the raw message (a message to an
// actor that just stopped: after every pod deletion and at shutdown), "actor
// system started", "[ACTOR] Recovering" (the Recover middleware logs the
// panic with its stack at Error). Its warnings and errors keep their level.
func actorSystemLogger(log *slog.Logger) *slog.Logger {
	return slog.New(demoted{log.Handler()}).With("lib", "protoactor")
}

// demoted logs records below Warn at Debug.
type demoted struct{ h slog.Handler }

func demote(l slog.Level) slog.Level {
	if l > slog.LevelDebug && l < slog.LevelWarn {
		return slog.LevelDebug
	}
	return l
}

func (d demoted) Enabled(ctx context.Context, l slog.Level) bool {
	return d.h.Enabled(ctx, demote(l))
}

func (d demoted) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return d.h.Handle(ctx, r)
}

func (d demoted) WithAttrs(as []slog.Attr) slog.Handler { return demoted{d.h.WithAttrs(as)} }

func (d demoted) WithGroup(name string) slog.Handler { return demoted{d.h.WithGroup(name)} }
