package pod

import (
	"testing"
	"time"
)

var gateStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestGateSerialises(t *testing.T) {
	tests := []struct {
		name        string
		run         func(g *gate) (current bool)
		wantCurrent bool
		wantIdle    bool
	}{
		{
			name:     "a new gate is idle",
			run:      func(*gate) bool { return false },
			wantIdle: true,
		},
		{
			name: "a read in flight is not idle",
			run: func(g *gate) bool {
				g.beginRead()
				return false
			},
		},
		{
			name: "an operation in flight is not idle",
			run: func(g *gate) bool {
				g.beginOp()
				return false
			},
		},
		{
			name: "a read with no operation meanwhile is current",
			run: func(g *gate) bool {
				return g.endRead(g.beginRead())
			},
			wantCurrent: true,
			wantIdle:    true,
		},
		{
			name: "a read after an operation ended is current",
			run: func(g *gate) bool {
				g.beginOp()
				g.endOp(gateStart)
				return g.endRead(g.beginRead())
			},
			wantCurrent: true,
			wantIdle:    true,
		},
		{
			name: "a read is stale once an operation started and ended meanwhile",
			run: func(g *gate) bool {
				seq := g.beginRead()
				g.beginOp()
				g.endOp(gateStart)
				return g.endRead(seq)
			},
			wantIdle: true,
		},
		{
			name: "a read is stale while an operation it overlapped runs",
			run: func(g *gate) bool {
				seq := g.beginRead()
				g.beginOp()
				return g.endRead(seq)
			},
		},
		{
			name: "the operation ends after the stale read: idle again",
			run: func(g *gate) bool {
				seq := g.beginRead()
				g.beginOp()
				cur := g.endRead(seq)
				g.endOp(gateStart)
				return cur
			},
			wantIdle: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGate(gateStart)
			if got := tt.run(&g); got != tt.wantCurrent {
				t.Errorf("current = %v, want %v", got, tt.wantCurrent)
			}
			if got := g.idle(); got != tt.wantIdle {
				t.Errorf("idle = %v, want %v (%+v)", got, tt.wantIdle, g)
			}
		})
	}
}

func TestGateLater(t *testing.T) {
	tests := []struct {
		name       string
		run        func(g *gate)
		wantReread bool
		wantList   bool
	}{
		{name: "nothing remembered", run: func(*gate) {}},
		{name: "a read", run: func(g *gate) { g.later(false) }, wantReread: true},
		{name: "a list", run: func(g *gate) { g.later(true) }, wantReread: true, wantList: true},
		{
			name:       "a list stays a list when a plain read is asked after it",
			run:        func(g *gate) { g.later(true); g.later(false) },
			wantReread: true, wantList: true,
		},
		{
			name:       "a plain read becomes a list when a list is asked after it",
			run:        func(g *gate) { g.later(false); g.later(true) },
			wantReread: true, wantList: true,
		},
		{
			name: "the read that starts takes both flags",
			run:  func(g *gate) { g.later(true); g.beginRead() },
		},
		{
			name:       "asked during a read: remembered for after it",
			run:        func(g *gate) { seq := g.beginRead(); g.later(true); g.endRead(seq) },
			wantReread: true, wantList: true,
		},
		{
			name:       "an operation leaves the flags as they are",
			run:        func(g *gate) { g.later(false); g.beginOp(); g.endOp(gateStart) },
			wantReread: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGate(gateStart)
			tt.run(&g)
			if g.reread != tt.wantReread || g.list != tt.wantList {
				t.Errorf("reread %v list %v, want %v %v", g.reread, g.list, tt.wantReread, tt.wantList)
			}
		})
	}
}

func TestGateFresh(t *testing.T) {
	opEnd := gateStart.Add(5 * time.Second)
	tests := []struct {
		name     string
		run      func(g *gate)
		relisted time.Time
		want     bool
	}{
		{name: "relisted after the incarnation began", run: func(*gate) {}, relisted: gateStart.Add(time.Millisecond), want: true},
		{name: "relisted when the incarnation began", run: func(*gate) {}, relisted: gateStart},
		{name: "relisted before the incarnation began", run: func(*gate) {}, relisted: gateStart.Add(-time.Second)},
		{
			name: "relisted after the last operation ended",
			run:  func(g *gate) { g.beginOp(); g.endOp(opEnd) }, relisted: opEnd.Add(time.Nanosecond), want: true,
		},
		{
			name: "relisted when the last operation ended",
			run:  func(g *gate) { g.beginOp(); g.endOp(opEnd) }, relisted: opEnd,
		},
		{
			name: "relisted between the start and the last operation's end",
			run:  func(g *gate) { g.beginOp(); g.endOp(opEnd) }, relisted: opEnd.Add(-time.Second),
		},
		{
			name: "an operation in flight: nothing is fresh",
			run:  func(g *gate) { g.beginOp() }, relisted: opEnd.Add(time.Hour),
		},
		{
			name: "a read in flight does not make a relist stale",
			run:  func(g *gate) { g.beginRead() }, relisted: gateStart.Add(time.Second), want: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGate(gateStart)
			tt.run(&g)
			if got := g.fresh(tt.relisted); got != tt.want {
				t.Errorf("fresh(%s) = %v, want %v (quiet %s)", tt.relisted.Format(time.RFC3339Nano), got, tt.want, g.quiet.Format(time.RFC3339Nano))
			}
		})
	}
}
