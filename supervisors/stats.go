package supervisors

import (
	"math/bits"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/actorlet/actorlet/internal/actorkit"
)

// HandlingBuckets are the upper bounds, in seconds, of the message handling
// duration histogram: 1 us times powers of 4, up to about 4 s (then +Inf).
var HandlingBuckets = func() []float64 {
	b := make([]float64, numBuckets)
	v := 1e-6
	for i := range b {
		b[i] = v
		v *= 4
	}
	return b
}()

const numBuckets = 12

// kindStats aggregates message handling of every actor of one kind, alive
// or gone.
type kindStats struct {
	count   atomic.Uint64
	nanos   atomic.Int64
	buckets [numBuckets + 1]atomic.Uint64 // the last one is +Inf
}

// bucketOf returns the index of the smallest bound >= d (numBuckets for
// +Inf) in O(1): bound k is 1000 ns * 4^k.
func bucketOf(d time.Duration) int {
	ns := int64(d)
	if ns <= 1000 {
		return 0
	}
	k := (bits.Len64(uint64(ns-1)/1000) + 1) / 2
	return min(k, numBuckets)
}

func (s *kindStats) observe(d time.Duration) {
	if s == nil {
		return
	}
	s.count.Add(1)
	s.nanos.Add(int64(d))
	s.buckets[bucketOf(d)].Add(1)
}

// KindStats returns the stats of every kind seen since start, sorted by
// kind. It walks the live actors once (to read mailbox lengths), so call
// it per scrape, not per message.
func (r *Registry) KindStats() []actorkit.KindStats {
	r.init()
	type acc struct{ live, sum, max int }
	r.mu.RLock()
	accs := make(map[string]*acc, len(r.stats))
	stats := make(map[string]*kindStats, len(r.stats))
	for k, s := range r.stats {
		stats[k] = s
		accs[k] = &acc{}
	}
	for _, e := range r.actors {
		a := accs[e.kind]
		a.live++
		if n := e.mailboxLen(); n > 0 {
			a.sum += n
			a.max = max(a.max, n)
		}
	}
	r.mu.RUnlock()
	out := make([]actorkit.KindStats, 0, len(stats))
	for k, s := range stats {
		a := accs[k]
		ks := actorkit.KindStats{Kind: k, Live: a.live, MailboxLength: a.sum, MailboxMax: a.max,
			Handled: s.count.Load(), HandlingSeconds: float64(s.nanos.Load()) / 1e9,
			Buckets: make([]uint64, numBuckets+1)}
		for i := range ks.Buckets {
			ks.Buckets[i] = s.buckets[i].Load()
		}
		out = append(out, ks)
	}
	slices.SortFunc(out, func(a, b actorkit.KindStats) int { return strings.Compare(a.Kind, b.Kind) })
	return out
}

// mailboxLen is the number of user messages waiting, -1 when unknown.
func (e *entry) mailboxLen() int {
	ref := e.mailbox.Load()
	if ref == nil {
		return -1
	}
	return ref.mb.UserMessageCount()
}
