package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// The agent's log lines are buffered (logwriter.go); nothing logged may be
// lost on the way out, and the lines keep their order.
func TestLogWriterLosesNothingAndKeepsOrder(t *testing.T) {
	tests := []struct {
		name    string
		writers int
		lines   int
		format  string
	}{
		{name: "one writer", writers: 1, lines: 2000, format: "text"},
		{name: "many writers", writers: 8, lines: 500, format: "text"},
		{name: "json", writers: 4, lines: 300, format: "json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := &syncBuffer{}
			// An interval longer than the test: only the size kick, the
			// write-through and Close write.
			w := newLogWriter(out, time.Hour)
			log := newLogger(&options{LogFormat: tt.format}, w)
			var wg sync.WaitGroup
			for g := range tt.writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range tt.lines {
						log.Info("pod pushed", "writer", g, "seq", i)
					}
				}()
			}
			wg.Wait()
			w.Close()
			got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(got) != tt.writers*tt.lines {
				t.Fatalf("%d lines on stderr, want %d", len(got), tt.writers*tt.lines)
			}
			next := make([]int, tt.writers)
			for _, l := range got {
				var g, i int
				if tt.format == "json" {
					_, err := fmt.Sscanf(l[strings.Index(l, `"writer"`):], `"writer":%d,"seq":%d}`, &g, &i)
					if err != nil {
						t.Fatalf("line %q: %v", l, err)
					}
				} else if _, err := fmt.Sscanf(l[strings.Index(l, "writer="):], "writer=%d seq=%d", &g, &i); err != nil {
					t.Fatalf("line %q: %v", l, err)
				}
				if i != next[g] {
					t.Fatalf("writer %d: seq %d after %d (lines out of order)", g, i, next[g]-1)
				}
				next[g]++
			}
		})
	}
}

// A record at Error is on stderr when the call returns, with the records
// before it, whatever the interval; lower levels wait for the flusher.
func TestLogWriterErrorIsWrittenAtOnce(t *testing.T) {
	tests := []struct {
		name      string
		log       func(*slog.Logger)
		wantLines int
	}{
		{name: "info waits", log: func(l *slog.Logger) { l.Info("run sandbox") }, wantLines: 0},
		{name: "warn waits", log: func(l *slog.Logger) { l.Warn("pod DNS") }, wantLines: 0},
		{name: "error writes it and what came before", log: func(l *slog.Logger) {
			l.Info("run sandbox")
			l.Error("actorlet stopped", "err", "boom")
		}, wantLines: 2},
		{name: "protoactor's errors too", log: func(l *slog.Logger) {
			actorSystemLogger(l).Error("[ACTOR] panic")
		}, wantLines: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := &syncBuffer{}
			w := newLogWriter(out, time.Hour)
			defer w.Close()
			tt.log(newLogger(&options{LogFormat: "text"}, w))
			if got := strings.Count(out.String(), "\n"); got != tt.wantLines {
				t.Fatalf("%d lines on stderr before the flush, want %d:\n%s", got, tt.wantLines, out.String())
			}
		})
	}
}

// Without an error or a Close, the flusher writes the lines within its
// interval.
func TestLogWriterFlushesPeriodically(t *testing.T) {
	out := &syncBuffer{}
	w := newLogWriter(out, time.Millisecond)
	defer w.Close()
	newLogger(&options{LogFormat: "text"}, w).Info("pod pushed", "pod", "default/a")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "pod=default/a") {
		if time.Now().After(deadline) {
			t.Fatal("the line never reached stderr")
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline
	}
}

// A stderr slower than the records (a full pipe) bounds the buffer: the
// writer of a record past logWriteThrough bytes writes it out itself before
// it returns, as it did unbuffered.
func TestLogWriterBoundsTheBuffer(t *testing.T) {
	out := &syncBuffer{}
	w := newLogWriter(out, time.Hour)
	line := bytes.Repeat([]byte("x"), 1<<10)
	n := 3 * logWriteThrough / len(line)
	for i := range n {
		_, _ = w.Write(line)
		w.mu.Lock()
		held := len(w.buf)
		w.mu.Unlock()
		if held >= logWriteThrough {
			t.Fatalf("after record %d: %d bytes buffered, want under %d", i, held, logWriteThrough)
		}
	}
	w.Close()
	if got := len(out.String()); got != n*len(line) {
		t.Fatalf("%d bytes written, want %d", got, n*len(line))
	}
}
