package node

import (
	"github.com/actorlet/actorlet/internal/actorkit"
)

// shrinkers remember the peak of the NodeActor's maps by pod, so that
// compact can rebuild one once most of its pods are gone (Go keeps a
// map's memory after its keys are deleted: ~440 KiB per map of 10,000
// UIDs, see actorkit.Shrink).
type shrinkers struct {
	pods, names, rejected, finished, starting actorkit.Shrinker
	sources                                   map[string]*actorkit.Shrinker
}

// compact rebuilds the maps by pod that shrank to a quarter of their peak.
// It runs after every change of the pod set (PodUpdate, an entry removed).
func (a *Actor) compact() {
	s := &a.shrink
	a.pods = actorkit.Shrink(&s.pods, a.pods)
	a.names = actorkit.Shrink(&s.names, a.names)
	a.rejected = actorkit.Shrink(&s.rejected, a.rejected)
	a.finished = actorkit.Shrink(&s.finished, a.finished)
	a.starting = actorkit.Shrink(&s.starting, a.starting)
	if s.sources == nil {
		s.sources = map[string]*actorkit.Shrinker{}
	}
	for src, set := range a.sources {
		sh := s.sources[src]
		if sh == nil {
			sh = &actorkit.Shrinker{}
			s.sources[src] = sh
		}
		a.sources[src] = actorkit.Shrink(sh, set)
	}
}
