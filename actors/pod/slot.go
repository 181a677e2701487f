package pod

// startSlot is a PodActor's place in the NodeActor's queue of pods that
// start (Config.ThrottleStarts): asked before the first sandbox, held while
// the pod starts, given back once a container started or the pod waits on
// something.
type startSlot int

const (
	slotNone startSlot = iota
	slotAsked
	slotHeld
	slotDone
)

// needed reports whether the pod must wait for a slot; ask is true the
// first time (the actor then sends StartSlot).
func (s *startSlot) needed() (wait, ask bool) {
	switch *s {
	case slotHeld, slotDone:
		return false, false
	case slotNone:
		*s = slotAsked
		return true, true
	}
	return true, false
}

// grant records StartGranted; false when no slot was asked for.
func (s *startSlot) grant() bool {
	if *s != slotAsked {
		return false
	}
	*s = slotHeld
	return true
}

// release gives the slot up; true when the parent must be told
// (StartDone).
func (s *startSlot) release() bool {
	if *s == slotAsked || *s == slotHeld {
		*s = slotDone
		return true
	}
	return false
}

func (s startSlot) held() bool { return s == slotHeld }
