package node

import (
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actorkit"
)

// sourceSet is the sources part of the NodeActor: the pods each source
// (file, URL, push, API) wants, by UID, whether each has delivered its
// first state, and the StatusActor's Resyncs that wait until every
// required source has.
type sourceSet struct {
	required []string // Config.Sources
	pods     map[string]map[types.UID]*v1.Pod
	synced   map[string]bool
	// asks are StatusActor Resyncs answered once every source is synced.
	asks   []uint64
	shrink map[string]*actorkit.Shrinker // per source, for compact
}

func newSourceSet(required []string) sourceSet {
	return sourceSet{required: required, pods: map[string]map[types.UID]*v1.Pod{}, synced: map[string]bool{}}
}

// of is the set of source, made empty if it had none.
func (s *sourceSet) of(source string) map[types.UID]*v1.Pod {
	set := s.pods[source]
	if set == nil {
		set = map[types.UID]*v1.Pod{}
		s.pods[source] = set
	}
	return set
}

// replace makes set the whole set of source (an OpSet).
func (s *sourceSet) replace(source string, set map[types.UID]*v1.Pod) { s.pods[source] = set }

// wants is uid's pod if source wants it.
func (s *sourceSet) wants(source string, uid types.UID) (*v1.Pod, bool) {
	p, ok := s.pods[source][uid]
	return p, ok
}

// wanted reports whether any source wants uid.
func (s *sourceSet) wanted(uid types.UID) bool {
	for _, set := range s.pods {
		if _, ok := set[uid]; ok {
			return true
		}
	}
	return false
}

// other is uid's pod as the first source other than from (by name) wants
// it: the one that takes it over once from's is killed.
func (s *sourceSet) other(uid types.UID, from string) (p *v1.Pod, source string, ok bool) {
	names := make([]string, 0, len(s.pods))
	for name := range s.pods {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if p, ok := s.pods[name][uid]; ok && name != from {
			return p, name, true
		}
	}
	return nil, "", false
}

// addUIDs adds every UID a source wants to set.
func (s *sourceSet) addUIDs(set map[types.UID]bool) {
	for _, pods := range s.pods {
		for uid := range pods {
			set[uid] = true
		}
	}
}

// allSynced: every required source delivered its first state.
func (s *sourceSet) allSynced() bool {
	for _, name := range s.required {
		if !s.synced[name] {
			return false
		}
	}
	return true
}

// markSynced records that source delivered its state; first is false when
// it had before. answer are the Resyncs to answer now that every source
// has (they are forgotten).
func (s *sourceSet) markSynced(source string) (first bool, answer []uint64) {
	if s.synced[source] {
		return false, nil
	}
	s.synced[source] = true
	if s.allSynced() {
		answer, s.asks = s.asks, nil
	}
	return true, answer
}

// ask is a StatusActor's Resync: answer it now when every source is
// synced, or when it asks again (early: a source that is down for good
// must not keep the pods of the others unread); else it waits for
// markSynced.
func (s *sourceSet) ask(ask uint64) (answer, early bool) {
	if s.allSynced() {
		return true, false
	}
	if i := slices.Index(s.asks, ask); i >= 0 {
		s.asks = slices.Delete(s.asks, i, i+1)
		return true, true
	}
	s.asks = append(s.asks, ask)
	return false, false
}

// compact rebuilds the sets that shrank to a quarter of their peak
// (actorkit.Shrink).
func (s *sourceSet) compact() {
	if s.shrink == nil {
		s.shrink = map[string]*actorkit.Shrinker{}
	}
	for src, set := range s.pods {
		sh := s.shrink[src]
		if sh == nil {
			sh = &actorkit.Shrinker{}
			s.shrink[src] = sh
		}
		s.pods[src] = actorkit.Shrink(sh, set)
	}
}
