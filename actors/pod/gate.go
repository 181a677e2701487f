package pod

import "time"

// gate serialises a PodActor's runtime work: one read (an inspection) or
// one operation at a time. What arrives meanwhile is remembered and done
// once the gate is idle again. It also knows how fresh a slice of the
// runtime cache must be to show the effects of the actor's own operations.
type gate struct {
	reading bool   // an inspection is in flight
	busy    bool   // an operation is in flight
	ops     uint64 // operations started; an inspection older than the last one is stale
	reread  bool   // read the runtime again once idle
	list    bool   // that read must list the runtime (not the cache)
	replan  bool   // plan again once idle
	// quiet is when the last operation ended (or this incarnation began):
	// a relist that started before then may miss what the operations did.
	quiet time.Time
}

func newGate(now time.Time) gate { return gate{quiet: now} }

func (g *gate) idle() bool { return !g.reading && !g.busy }

// beginRead starts an inspection and returns the operation count it reads
// after.
func (g *gate) beginRead() uint64 {
	g.reading, g.reread, g.list = true, false, false
	return g.ops
}

// endRead ends an inspection; current is false when an operation started
// while the runtime was read (the view is stale).
func (g *gate) endRead(ops uint64) (current bool) {
	g.reading = false
	return ops == g.ops && !g.busy
}

func (g *gate) beginOp() {
	g.busy = true
	g.ops++
}

func (g *gate) endOp(now time.Time) {
	g.busy = false
	g.quiet = now
}

// later remembers a read (mustList: by listing) for when the gate is idle.
func (g *gate) later(mustList bool) {
	g.reread = true
	g.list = g.list || mustList
}

// fresh reports whether a relist that started at relisted shows everything
// this actor's operations did.
func (g *gate) fresh(relisted time.Time) bool {
	return !g.busy && relisted.After(g.quiet)
}
