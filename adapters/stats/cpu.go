package stats

import (
	"sync"
	"time"
)

// cpuCache turns cumulative CPU samples into rates (usageNanoCores) for
// runtimes and node sources that give only the counter, as upstream's
// cpuUsageCache. Each key keeps a reference sample at least window older
// than the newest, so that requests close together still get a rate over a
// meaningful window.
type cpuCache struct {
	window time.Duration

	mu sync.Mutex
	m  map[string]*cpuEntry
}

type cpuSample struct {
	t time.Time
	v uint64
}

type cpuEntry struct {
	base, last cpuSample // base is at least window older than last (or zero)
}

// staleAfter drops a key not sampled for that long.
const staleAfter = 5 * time.Minute

func newCPUCache(window time.Duration) *cpuCache {
	return &cpuCache{window: window, m: map[string]*cpuEntry{}}
}

// rate records the sample v at t under key and returns the rate in
// nanocores since the reference sample, or nil for a first sample (or a
// counter that went back: a restarted container).
func (c *cpuCache) rate(key string, t time.Time, v uint64) *uint64 {
	if t.IsZero() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	s := cpuSample{t, v}
	if !ok || v < e.last.v || t.Before(e.last.t) {
		c.m[key] = &cpuEntry{last: s}
		return nil
	}
	if t.Sub(e.last.t) >= c.window {
		e.base, e.last = e.last, s
	}
	ref := e.base
	if ref.t.IsZero() {
		ref = e.last
	}
	d := t.Sub(ref.t)
	if d <= 0 || v < ref.v {
		return nil
	}
	r := uint64(float64(v-ref.v) / d.Seconds())
	return &r
}

// sweep forgets keys not sampled since now - staleAfter.
func (c *cpuCache) sweep(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		if now.Sub(e.last.t) > staleAfter {
			delete(c.m, k)
		}
	}
}
