package actorkit

// Shrinker remembers the most entries a map held since Shrink last
// rebuilt it. The zero value is ready; one per map.
type Shrinker struct{ peak int }

// shrinkMinPeak: maps that never held more are left alone (their memory
// is small, and a rebuild would only cost).
const shrinkMinPeak = 256

// Shrink returns m, or a new map with m's entries once m holds a quarter
// or less of the most it held (and that was at least 256). Go keeps a
// map's memory after its keys are deleted: a NodeActor's maps by pod UID
// sized for 10,000 pods stay that size when every pod is gone. Call it
// after deleting from m (and, to see its peak, after adding); the copy is
// paid once per shrink to a quarter, so amortized O(1) per delete.
func Shrink[M ~map[K]V, K comparable, V any](s *Shrinker, m M) M {
	n := len(m)
	s.peak = max(s.peak, n)
	if s.peak < shrinkMinPeak || n > s.peak/4 {
		return m
	}
	s.peak = n
	out := make(M, n) // not maps.Clone: it keeps the capacity
	for k, v := range m {
		out[k] = v
	}
	return out
}
