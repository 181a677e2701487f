package actortest

import (
	"bytes"
	"sync"
)

// SyncBuffer is a log or stream destination a test reads while other
// goroutines (actors, adapters' workers, a stream's copier) write to it.
// The zero value is ready to use.
type SyncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{} // made by Wrote; signalled after each write
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	if s.wrote != nil {
		select {
		case s.wrote <- struct{}{}:
		default: // a signal is already waiting: it stands for this write too
		}
	}
	return n, err
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Wrote returns a channel that receives after writes, for a test that
// waits for some output without polling: look at String after each
// receive (one signal may stand for several writes). Writes made before
// the first call to Wrote do not signal.
func (s *SyncBuffer) Wrote() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wrote == nil {
		s.wrote = make(chan struct{}, 1)
	}
	return s.wrote
}
