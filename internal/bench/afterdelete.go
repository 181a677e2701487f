package bench

import (
	"context"
	"time"
)

// measureAfterDelete is standalone-sim's after-delete reading: the memory
// the moment every pod runs, then steadySettle later with every pod still
// running (and the heap profile then, after a GC, into HeapOut), then
// every pod deleted through the source that created it, and the memory
// afterDeleteSettle after the agent runs none (and a heap profile after a
// GC, into HeapOut-after-delete). The session's end takes no second
// profile.
func (s *session) measureAfterDelete(ctx context.Context, mem *MemoryFigures, names []created) {
	mem.Ready = readMemory(ctx, s.a)
	mem.Steady, mem.SteadySettleSeconds = memorySteady(ctx, s.a, time.Now())
	out := s.o.HeapOut
	s.o.HeapOut = ""
	if out != "" {
		if err := fetch(ctx, s.a.client(0, 0), s.a.mainURL+"/debug/pprof/heap?gc=1", out); err != nil {
			s.o.Log.Warn("heap profile failed", "err", err)
		}
	}
	removeAll(ctx, s, names)
	timeout := s.o.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	mem.AfterDelete, mem.AfterDeleteSettleSeconds = memoryAfterDelete(ctx, s.a, timeout)
	if out != "" {
		if err := fetch(ctx, s.a.client(0, 0), s.a.mainURL+"/debug/pprof/heap?gc=1", perAgent(out, "after-delete")); err != nil {
			s.o.Log.Warn("heap profile failed", "err", err)
		}
	}
}
