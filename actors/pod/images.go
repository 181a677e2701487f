package pod

// imageWaits are the container starts waiting on the ImageActor, by
// request ID.
type imageWaits struct {
	next    uint64
	pending map[uint64]action
}

// add records a start that waits for its image and returns the request ID.
func (w *imageWaits) add(act action) uint64 {
	if w.pending == nil {
		w.pending = map[uint64]action{}
	}
	w.next++
	w.pending[w.next] = act
	return w.next
}

// take returns and forgets the start waiting on request id.
func (w *imageWaits) take(id uint64) (action, bool) {
	act, ok := w.pending[id]
	delete(w.pending, id)
	return act, ok
}

// any reports whether a start waits for an image.
func (w *imageWaits) any() bool { return len(w.pending) > 0 }

// drop forgets every waiting start (the pod is being killed).
func (w *imageWaits) drop() { clear(w.pending) }
