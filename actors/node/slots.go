package node

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actorkit"
)

// startSlots is the start-slot part of the NodeActor
// (--max-parallel-pod-starts): the pods holding a slot to start, and
// those waiting for one, in the order they asked.
type startSlots struct {
	max      int // 0: no bound
	starting map[types.UID]bool
	waiting  []types.UID
	shrink   actorkit.Shrinker
}

func newStartSlots(maxStarts int) startSlots {
	return startSlots{max: maxStarts, starting: map[types.UID]bool{}}
}

// ask grants uid a slot (true) while fewer than max pods hold one (or it
// holds one already), else queues it once.
func (s *startSlots) ask(uid types.UID) bool {
	if s.max <= 0 || s.starting[uid] || len(s.starting) < s.max {
		s.starting[uid] = true
		return true
	}
	if !slices.Contains(s.waiting, uid) {
		s.waiting = append(s.waiting, uid)
	}
	return false
}

// release frees uid's slot (or its place in the queue) and grants the
// next pods waiting that may still start (eligible; the others leave the
// queue): granted, in order.
func (s *startSlots) release(uid types.UID, eligible func(types.UID) bool) (granted []types.UID) {
	delete(s.starting, uid)
	if i := slices.Index(s.waiting, uid); i >= 0 {
		s.waiting = slices.Delete(s.waiting, i, i+1)
	}
	for len(s.waiting) > 0 && len(s.starting) < s.max {
		next := s.waiting[0]
		s.waiting = s.waiting[1:]
		if eligible(next) {
			s.starting[next] = true
			granted = append(granted, next)
		}
	}
	return granted
}

// compact rebuilds the map of slots held once it shrank to a quarter of
// its peak (actorkit.Shrink).
func (s *startSlots) compact() {
	s.starting = actorkit.Shrink(&s.shrink, s.starting)
}
