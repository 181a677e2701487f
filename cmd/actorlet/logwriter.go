package main

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Log buffering. The slog handler formats a record without a lock, then
// writes it under its mutex; a write(2) to stderr per record under that
// mutex was 68 % of the agent's lock waiting at 10,000 pods (4 lines per pod
// start, docs/BENCHMARKS.md "What serializes"). The handler writes into a
// logWriter instead: an append to memory under a short lock. One goroutine
// writes what gathered to stderr every logFlushInterval, or sooner once
// logFlushAt bytes wait; a record at Error and up is written before its
// Handle returns (flushOnError), and Close writes the rest on the way out.
const (
	logFlushInterval = 100 * time.Millisecond
	// logFlushAt wakes the flusher early (a burst of records).
	logFlushAt = 64 << 10
	// logWriteThrough: past this much waiting (stderr slower than the
	// records: a full pipe), the writer of a record writes itself, so the
	// buffer stays bounded and a slow reader slows the agent as before.
	logWriteThrough = 4 << 20
	// logKeepCap: a drained buffer larger than this is not kept for reuse.
	logKeepCap = 1 << 20
)

// logWriter buffers whole records (slog writes one record per Write) and
// writes them to out in the order they came.
type logWriter struct {
	out io.Writer

	mu  sync.Mutex // guards buf
	buf []byte

	wmu   sync.Mutex // serializes writes to out; guards spare
	spare []byte

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// newLogWriter starts the flusher; Close stops it and writes what is left.
func newLogWriter(out io.Writer, interval time.Duration) *logWriter {
	w := &logWriter{
		out:  out,
		kick: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go w.loop(interval)
	return w
}

func (w *logWriter) loop(interval time.Duration) {
	defer close(w.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		case <-w.kick:
		}
		w.Flush()
	}
}

// Write appends p (one record) to the buffer. It never fails: a failed
// write to out is dropped there, as the handler itself would drop it.
func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.buf = append(w.buf, p...)
	n := len(w.buf)
	w.mu.Unlock()
	switch {
	case n >= logWriteThrough:
		w.Flush()
	case n >= logFlushAt:
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// Flush writes every record buffered so far to out before it returns.
func (w *logWriter) Flush() {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.mu.Lock()
	b := w.buf
	w.buf = w.spare[:0]
	w.mu.Unlock()
	if len(b) > 0 {
		_, _ = w.out.Write(b)
	}
	if cap(b) <= logKeepCap {
		w.spare = b[:0]
	} else {
		w.spare = nil
	}
}

// Close stops the flusher and writes what is left. Records written after
// Close are still buffered; a later Flush writes them.
func (w *logWriter) Close() {
	w.once.Do(func() {
		close(w.stop)
		<-w.done
	})
	w.Flush()
}

// flushOnError writes a record at Error or above out before Handle
// returns, with everything logged before it, so an error just before a
// crash is on stderr.
type flushOnError struct {
	slog.Handler
	w *logWriter
}

func (h flushOnError) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelError {
		h.w.Flush()
	}
	return err
}

func (h flushOnError) WithAttrs(as []slog.Attr) slog.Handler {
	return flushOnError{h.Handler.WithAttrs(as), h.w}
}

func (h flushOnError) WithGroup(name string) slog.Handler {
	return flushOnError{h.Handler.WithGroup(name), h.w}
}
