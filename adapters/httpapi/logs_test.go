package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actortest"
)

var logsNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const logsPoll = 100 * time.Millisecond

// fakePods is a ResolveFunc backed by a map the test changes; it records
// how often it was asked and returns an injected error when set.
type fakePods struct {
	mu    sync.Mutex
	pods  map[string]fakePod // namespace/name
	err   error
	calls int
}

type fakePod struct {
	uid        string
	containers map[string]ResolvedContainer
}

var _ ResolveFunc = (&fakePods{}).resolve

func (f *fakePods) resolve(_ context.Context, ns, name string) (string, map[string]ResolvedContainer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return "", nil, f.err
	}
	p, ok := f.pods[ns+"/"+name]
	if !ok {
		return "", nil, fmt.Errorf("pod %s/%s: %w", ns, name, errdefs.ErrNotFound)
	}
	cs := make(map[string]ResolvedContainer, len(p.containers))
	for k, v := range p.containers {
		cs[k] = v
	}
	return p.uid, cs, nil
}

func (f *fakePods) set(key string, p fakePod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods[key] = p
}

func (f *fakePods) remove(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pods, key)
}

// cri formats one CRI log entry.
func cri(ts time.Time, stream, tag, text string) string {
	return ts.Format(time.RFC3339Nano) + " " + stream + " " + tag + " " + text + "\n"
}

// at is an entry of stdout at logsNow - ago.
func at(ago time.Duration, tag, text string) string {
	return cri(logsNow.Add(-ago), "stdout", tag, text)
}

func full(lines ...string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = at(time.Duration(len(lines)-i)*time.Second, "F", l)
	}
	return out
}

type logsEnv struct {
	root  string
	pods  *fakePods
	clock *clocktesting.FakeClock
	h     http.Handler
}

func newLogsEnv(t *testing.T) *logsEnv {
	t.Helper()
	e := &logsEnv{
		root:  t.TempDir(),
		pods:  &fakePods{pods: map[string]fakePod{"default/web": {uid: "u1", containers: map[string]ResolvedContainer{"app": {}}}}},
		clock: clocktesting.NewFakeClock(logsNow),
	}
	e.h = NewContainerLogs(e.root, e.pods.resolve, slog.New(slog.DiscardHandler),
		WithLogsClock(e.clock), WithLogsPollInterval(logsPoll), WithLogsResolveInterval(2*logsPoll))
	return e
}

func (e *logsEnv) logPath(attempt int) string {
	return filepath.Join(e.root, "default_web_u1", "app", fmt.Sprintf("%d.log", attempt))
}

func (e *logsEnv) write(t *testing.T, attempt int, entries ...string) {
	t.Helper()
	p := e.logPath(attempt)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.WriteString(strings.Join(entries, "")); err != nil {
		t.Fatal(err)
	}
}

func (e *logsEnv) get(target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec
}

func TestContainerLogs(t *testing.T) {
	const url = "/containerLogs/default/web/app"
	ts := func(ago time.Duration) string { return logsNow.Add(-ago).Format(time.RFC3339Nano) }
	tests := []struct {
		name     string
		files    map[int][]string // attempt -> entries
		restarts int32
		resolver error
		query    string
		path     string // default url
		code     int
		body     string // exact on 200, substring otherwise
	}{
		{name: "whole log", files: map[int][]string{0: full("one", "two", "three")}, code: 200, body: "one\ntwo\nthree\n"},
		{name: "empty log", files: map[int][]string{0: nil}, code: 200, body: ""},
		{name: "tailLines", files: map[int][]string{0: full("one", "two", "three")}, query: "tailLines=2", code: 200, body: "two\nthree\n"},
		{name: "tailLines=0", files: map[int][]string{0: full("one", "two")}, query: "tailLines=0", code: 200, body: ""},
		{name: "tailLines beyond the log", files: map[int][]string{0: full("one", "two")}, query: "tailLines=10", code: 200, body: "one\ntwo\n"},
		{name: "legacy tail", files: map[int][]string{0: full("one", "two", "three")}, query: "tail=1", code: 200, body: "three\n"},
		{name: "legacy tail=all", files: map[int][]string{0: full("one", "two")}, query: "tail=all", code: 200, body: "one\ntwo\n"},
		{
			name:  "partial entries join the next ones",
			files: map[int][]string{0: {at(3*time.Second, "P", "hel"), at(3*time.Second, "P", "lo "), at(2*time.Second, "F", "world"), at(time.Second, "F", "next")}},
			code:  200, body: "hello world\nnext\n",
		},
		{
			name:  "tail counts joined lines",
			files: map[int][]string{0: {at(4*time.Second, "F", "a"), at(3*time.Second, "P", "b1"), at(3*time.Second, "P", "b2"), at(2*time.Second, "F", "b3")}},
			query: "tailLines=1", code: 200, body: "b1b2b3\n",
		},
		{
			name:  "trailing partial entries are the last line",
			files: map[int][]string{0: {at(3*time.Second, "F", "a"), at(2*time.Second, "F", "b"), at(time.Second, "P", "c")}},
			query: "tailLines=2", code: 200, body: "b\nc",
		},
		{
			name:  "timestamps prefix each line once",
			files: map[int][]string{0: {at(3*time.Second, "F", "one"), at(2*time.Second, "P", "tw"), at(time.Second, "F", "o")}},
			query: "timestamps=true", code: 200, body: ts(3*time.Second) + " one\n" + ts(2*time.Second) + " two\n",
		},
		{
			name: "stderr and stdout interleave",
			files: map[int][]string{0: {
				cri(logsNow.Add(-2*time.Second), "stdout", "F", "out"),
				cri(logsNow.Add(-time.Second), "stderr", "F", "err"),
			}},
			code: 200, body: "out\nerr\n",
		},
		{name: "tags after the partial flag", files: map[int][]string{0: {at(2*time.Second, "P:x", "a"), at(time.Second, "F:x", "b")}}, code: 200, body: "ab\n"},
		{
			name:  "malformed entries are skipped",
			files: map[int][]string{0: {"garbage\n", "not-a-time stdout F x\n", at(time.Second, "F", "ok"), "2026-03-01T11:59:59Z stdin F x\n"}},
			code:  200, body: "ok\n",
		},
		{name: "empty text", files: map[int][]string{0: {at(time.Second, "F", "")}}, code: 200, body: "\n"},
		{name: "limitBytes", files: map[int][]string{0: full("one", "two")}, query: "limitBytes=6", code: 200, body: "one\ntw"},
		{name: "limitBytes counts timestamps", files: map[int][]string{0: full("one")}, query: "timestamps=1&limitBytes=10", code: 200, body: ts(time.Second)[:10]},
		{
			name:  "sinceSeconds",
			files: map[int][]string{0: {at(time.Minute, "F", "old"), at(40*time.Second, "P", "new"), at(20*time.Second, "F", "er"), at(10*time.Second, "F", "newest")}},
			query: "sinceSeconds=30", code: 200, body: "newest\n",
		},
		{
			name:  "sinceSeconds keeps a line that starts after it",
			files: map[int][]string{0: {at(time.Minute, "F", "old"), at(20*time.Second, "P", "ne"), at(10*time.Second, "F", "w")}},
			query: "sinceSeconds=30", code: 200, body: "new\n",
		},
		{name: "sinceTime", files: map[int][]string{0: {at(time.Minute, "F", "old"), at(time.Second, "F", "new")}}, query: "sinceTime=" + logsNow.Add(-10*time.Second).Format(time.RFC3339), code: 200, body: "new\n"},
		{name: "tail then since", files: map[int][]string{0: {at(time.Minute, "F", "a"), at(50*time.Second, "F", "b"), at(time.Second, "F", "c")}}, query: "tailLines=2&sinceSeconds=30", code: 200, body: "c\n"},
		{name: "current attempt", files: map[int][]string{0: full("first"), 1: full("second")}, restarts: 1, code: 200, body: "second\n"},
		{name: "previous", files: map[int][]string{0: full("first"), 1: full("second")}, restarts: 1, query: "previous=true", code: 200, body: "first\n"},
		{name: "previous alone means true", files: map[int][]string{0: full("first"), 1: full("second")}, restarts: 1, query: "previous", code: 200, body: "first\n"},
		{name: "previous=false", files: map[int][]string{0: full("first"), 1: full("second")}, restarts: 1, query: "previous=false", code: 200, body: "second\n"},
		{name: "no previous attempt", files: map[int][]string{0: full("first")}, query: "previous=true", code: 400, body: `previous terminated container "app" in pod "web" not found`},
		{name: "previous log removed", files: map[int][]string{2: full("third")}, restarts: 2, query: "previous=true", code: 400, body: "previous terminated container"},
		{name: "not started yet", code: 400, body: `container "app" in pod "web" is waiting to start`},
		{name: "unknown pod", path: "/containerLogs/default/nope/app", code: 404, body: `pod "nope" does not exist`},
		{name: "unknown namespace", path: "/containerLogs/other/web/app", code: 404, body: `pod "web" does not exist in namespace "other"`},
		{name: "unknown container", path: "/containerLogs/default/web/db", code: 404, body: `container "db" not found in pod default/web`},
		{name: "resolver down", resolver: fmt.Errorf("ask: %w", errdefs.ErrUnavailable), code: 503, body: "find pod default/web"},
		{name: "path escaping the logs dir", path: "/containerLogs/default/web/..%2F..%2Fetc", code: 400, body: "invalid path"},
		{name: "negative tailLines", files: map[int][]string{0: nil}, query: "tailLines=-1", code: 400, body: "invalid tailLines"},
		{name: "tailLines not a number", files: map[int][]string{0: nil}, query: "tailLines=x", code: 400, body: "invalid tailLines"},
		{name: "bad legacy tail", files: map[int][]string{0: nil}, query: "tail=some", code: 400, body: "invalid tail"},
		{name: "limitBytes=0", files: map[int][]string{0: nil}, query: "limitBytes=0", code: 400, body: "invalid limitBytes"},
		{name: "sinceSeconds=0", files: map[int][]string{0: nil}, query: "sinceSeconds=0", code: 400, body: "invalid sinceSeconds"},
		{name: "bad sinceTime", files: map[int][]string{0: nil}, query: "sinceTime=yesterday", code: 400, body: "invalid sinceTime"},
		{name: "both since", files: map[int][]string{0: nil}, query: "sinceSeconds=1&sinceTime=" + logsNow.Format(time.RFC3339), code: 400, body: "at most one of sinceTime or sinceSeconds"},
		{name: "bad follow", files: map[int][]string{0: nil}, query: "follow=maybe", code: 400, body: "invalid follow"},
		{name: "bad timestamps", files: map[int][]string{0: nil}, query: "timestamps=2", code: 400, body: "invalid timestamps"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newLogsEnv(t)
			e.pods.err = tc.resolver
			e.pods.set("default/web", fakePod{uid: "u1", containers: map[string]ResolvedContainer{"app": {Attempt: tc.restarts}}})
			for attempt, entries := range tc.files {
				e.write(t, attempt, entries...)
			}
			path := tc.path
			if path == "" {
				path = url
			}
			if tc.query != "" {
				path += "?" + tc.query
			}
			rec := e.get(path)
			body := rec.Body.String()
			if rec.Code != tc.code {
				t.Fatalf("GET %s: %d %q, want %d", path, rec.Code, body, tc.code)
			}
			if tc.code == http.StatusOK {
				if body != tc.body {
					t.Errorf("body\n%q\nwant\n%q", body, tc.body)
				}
				if ct := rec.Header().Get("Content-Type"); ct != "text/plain; charset=utf-8" {
					t.Errorf("content type %q", ct)
				}
				return
			}
			if !strings.Contains(body, tc.body) {
				t.Errorf("body %q, want it to contain %q", body, tc.body)
			}
		})
	}
}

func TestContainerLogsRoutes(t *testing.T) {
	e := newLogsEnv(t)
	e.write(t, 0, full("x")...)
	mux := http.NewServeMux()
	mux.Handle("GET /containerLogs/", e.h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, tc := range []struct {
		name, method, path string
		code               int
	}{
		{"mounted on the prefix", http.MethodGet, "/containerLogs/default/web/app", http.StatusOK},
		{"too few segments", http.MethodGet, "/containerLogs/default/web", http.StatusNotFound},
		{"wrong method", http.MethodPost, "/containerLogs/default/web/app", http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.code)
			}
		})
	}
}

// countingReaderAt counts the bytes read through it.
type countingReaderAt struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// naiveTailStart is tailStart over the whole file in memory.
func naiveTailStart(b []byte, n int) int64 {
	var starts []int // entry starts
	var partial []bool
	for off := 0; off < len(b); {
		end := bytes.IndexByte(b[off:], '\n')
		if end < 0 {
			end = len(b) - off - 1
		}
		starts = append(starts, off)
		partial = append(partial, entryIsPartial(b[off:off+end+1]))
		off += end + 1
	}
	// Group entries into lines: a line ends at a full entry or at the end.
	var lineStarts []int
	inLine := false
	for i := range starts {
		if !inLine {
			lineStarts = append(lineStarts, starts[i])
		}
		inLine = partial[i]
	}
	if n == 0 {
		return int64(len(b))
	}
	if n >= len(lineStarts) {
		return 0
	}
	return int64(lineStarts[len(lineStarts)-n])
}

func TestTailStartMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	lengths := []int{0, 1, 10, 100, tailChunkSize - 40, tailChunkSize, 2*tailChunkSize + 3, 70000}
	for round := 0; round < 40; round++ {
		var buf bytes.Buffer
		entries := rng.Intn(60)
		for i := 0; i < entries; i++ {
			tag := "F"
			if rng.Intn(3) == 0 {
				tag = "P"
			}
			text := strings.Repeat("x", lengths[rng.Intn(len(lengths))])
			buf.WriteString(cri(logsNow, "stdout", tag, text))
		}
		if rng.Intn(4) == 0 { // an entry being written
			buf.WriteString(logsNow.Format(time.RFC3339Nano) + " stdout F par")
		}
		b := buf.Bytes()
		for _, n := range []int{0, 1, 2, 3, 5, 10, 100} {
			got, err := tailStart(bytes.NewReader(b), int64(len(b)), int64(n))
			if err != nil {
				t.Fatal(err)
			}
			if want := naiveTailStart(b, n); got != want {
				t.Fatalf("round %d (%d bytes, %d entries) tail %d: start %d, want %d", round, len(b), entries, n, got, want)
			}
		}
	}
}

func TestTailReadsOnlyTheEnd(t *testing.T) {
	e := newLogsEnv(t)
	var buf bytes.Buffer
	for i := 0; i < 200000; i++ {
		fmt.Fprintf(&buf, "%s stdout F line %d\n", logsNow.Format(time.RFC3339Nano), i)
	}
	b := buf.Bytes()
	cr := &countingReaderAt{r: bytes.NewReader(b)}
	start, err := tailStart(cr, int64(len(b)), 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b[start:]); !strings.HasPrefix(got, logsNow.Format(time.RFC3339Nano)+" stdout F line 199997\n") {
		t.Fatalf("tail starts at %q", got[:min(len(got), 80)])
	}
	if n := cr.n.Load(); n > 2*tailChunkSize {
		t.Errorf("read %d bytes of a %d-byte log for 3 lines", n, len(b))
	}
	// Through the handler.
	e.write(t, 0, buf.String())
	rec := e.get("/containerLogs/default/web/app?tailLines=2")
	if rec.Code != 200 || rec.Body.String() != "line 199998\nline 199999\n" {
		t.Errorf("%d %q", rec.Code, rec.Body.String())
	}
}

// follower reads a followed log line by line.
type follower struct {
	lines  chan string
	cancel context.CancelFunc
	code   int
}

func follow(t *testing.T, e *logsEnv, query string) (*follower, <-chan struct{}) {
	t.Helper()
	done := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer once.Do(func() { close(done) })
		e.h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/containerLogs/default/web/app?follow=true&"+query, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	f := &follower{lines: make(chan string, 100), cancel: cancel, code: resp.StatusCode}
	go func() {
		defer close(f.lines)
		defer func() { _ = resp.Body.Close() }()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
	}()
	return f, done
}

// until steps the fake clock whenever the handler waits on it, until cond
// holds (actortest.Eventually's deadline).
func until(t *testing.T, e *logsEnv, what string, cond func() bool) {
	t.Helper()
	actortest.Eventually(t, what, func() bool {
		if cond() {
			return true
		}
		if e.clock.HasWaiters() {
			e.clock.Step(logsPoll)
		}
		return false
	})
}

// expect reads the next lines, stepping the clock as needed.
func (f *follower) expect(t *testing.T, e *logsEnv, want ...string) {
	t.Helper()
	for _, w := range want {
		var got string
		ok := true
		until(t, e, fmt.Sprintf("line %q", w), func() bool {
			select {
			case got, ok = <-f.lines:
				return true
			default:
				return false
			}
		})
		if !ok {
			t.Fatalf("stream ended, want line %q", w)
		}
		if got != w {
			t.Fatalf("line %q, want %q", got, w)
		}
	}
}

// expectEnd waits until the server ends the stream, with no more lines.
func (f *follower) expectEnd(t *testing.T, e *logsEnv) {
	t.Helper()
	until(t, e, "end of stream", func() bool {
		select {
		case l, ok := <-f.lines:
			if ok {
				t.Fatalf("unexpected line %q", l)
			}
			return true
		default:
			return false
		}
	})
}

func TestContainerLogsFollow(t *testing.T) {
	tests := []struct {
		name  string
		query string
		run   func(t *testing.T, e *logsEnv, f *follower, done <-chan struct{})
	}{
		{
			name: "new lines stream until a new attempt starts",
			run: func(t *testing.T, e *logsEnv, f *follower, done <-chan struct{}) {
				f.expect(t, e, "zero", "one")
				e.write(t, 0, at(0, "F", "two"))
				f.expect(t, e, "two")
				// A line written in pieces, the newline last.
				e.write(t, 0, at(0, "P", "thr"))
				e.write(t, 0, logsNow.Format(time.RFC3339Nano)+" stdout F ee")
				e.write(t, 0, "\n")
				f.expect(t, e, "three")
				// The container dies with a last line; the next attempt starts.
				e.write(t, 0, at(0, "F", "last words"))
				e.write(t, 1, at(0, "F", "next attempt"))
				f.expect(t, e, "last words")
				f.expectEnd(t, e)
			},
		},
		{
			name:  "ends when the status shows a restart",
			query: "tailLines=1",
			run: func(t *testing.T, e *logsEnv, f *follower, done <-chan struct{}) {
				f.expect(t, e, "one")
				e.pods.set("default/web", fakePod{uid: "u1", containers: map[string]ResolvedContainer{"app": {Attempt: 1}}})
				f.expectEnd(t, e)
			},
		},
		{
			name: "ends when the status shows the container exited",
			run: func(t *testing.T, e *logsEnv, f *follower, done <-chan struct{}) {
				f.expect(t, e, "zero", "one")
				e.write(t, 0, at(0, "F", "bye"))
				e.pods.set("default/web", fakePod{uid: "u1", containers: map[string]ResolvedContainer{"app": {Exited: true}}})
				f.expect(t, e, "bye")
				f.expectEnd(t, e)
			},
		},
		{
			name: "ends when the pod goes away",
			run: func(t *testing.T, e *logsEnv, f *follower, done <-chan struct{}) {
				f.expect(t, e, "zero", "one")
				e.pods.remove("default/web")
				f.expectEnd(t, e)
			},
		},
		{
			name: "a resolver outage does not end the stream",
			run: func(t *testing.T, e *logsEnv, f *follower, done <-chan struct{}) {
				f.expect(t, e, "zero", "one")
				e.pods.mu.Lock()
				e.pods.err = errdefs.ErrUnavailable
				calls := e.pods.calls
				e.pods.mu.Unlock()
				until(t, e, "two resolver calls", func() bool {
					e.pods.mu.Lock()
					defer e.pods.mu.Unlock()
					return e.pods.calls >= calls+2
				})
				e.write(t, 0, at(0, "F", "still here"))
				f.expect(t, e, "still here")
			},
		},
		{
			name: "stops when the client goes away",
			run: func(t *testing.T, e *logsEnv, f *follower, done <-chan struct{}) {
				f.expect(t, e, "zero", "one")
				f.cancel()
				until(t, e, "handler returned", func() bool {
					select {
					case <-done:
						return true
					default:
						return false
					}
				})
			},
		},
		{
			name:  "previous ends at its end",
			query: "previous=true",
			run: func(t *testing.T, e *logsEnv, f *follower, done <-chan struct{}) {
				f.expect(t, e, "before")
				f.expectEnd(t, e)
			},
		},
		{
			name: "a rotated log is followed into the new file",
			run: func(t *testing.T, e *logsEnv, f *follower, done <-chan struct{}) {
				f.expect(t, e, "zero", "one")
				p := e.logPath(0)
				if err := os.Rename(p, p+".20260301-120000"); err != nil {
					t.Fatal(err)
				}
				e.write(t, 0, at(0, "F", "after rotation"))
				f.expect(t, e, "after rotation")
			},
		},
		{
			name:  "limitBytes ends a followed stream",
			query: "limitBytes=12",
			run: func(t *testing.T, e *logsEnv, f *follower, done <-chan struct{}) {
				f.expect(t, e, "zero", "one")
				e.write(t, 0, at(0, "F", "twotwo")) // 9 bytes sent, 3 left
				f.expect(t, e, "two")
				f.expectEnd(t, e)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newLogsEnv(t)
			if strings.Contains(tc.query, "previous") {
				e.pods.set("default/web", fakePod{uid: "u1", containers: map[string]ResolvedContainer{"app": {Attempt: 1}}})
				e.write(t, 0, full("before")...)
				e.write(t, 1, full("now")...)
			} else {
				e.write(t, 0, full("zero", "one")...)
			}
			f, done := follow(t, e, tc.query)
			if f.code != http.StatusOK {
				t.Fatalf("status %d", f.code)
			}
			tc.run(t, e, f, done)
		})
	}
}

func TestStatusResolver(t *testing.T) {
	env := setup(t, nil)
	env.stubs.mu.Lock()
	env.stubs.pods[0].Spec = v1.PodSpec{
		InitContainers: []v1.Container{{Name: "init"}},
		Containers:     []v1.Container{{Name: "app"}, {Name: "side"}},
	}
	env.stubs.pods[0].Status.ContainerStatuses = []v1.ContainerStatus{
		{Name: "app", RestartCount: 2, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
		{Name: "side", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}},
	}
	env.stubs.pods[0].Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "init", RestartCount: 1,
		State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}}}
	env.stubs.mu.Unlock()
	resolve := StatusResolver(env.sys, env.srv.cfg.Status, time.Second)
	uid, cs, err := resolve(context.Background(), "default", "web")
	want := map[string]ResolvedContainer{"init": {Attempt: 1, Exited: true}, "app": {Attempt: 2}, "side": {Exited: true}}
	if err != nil || uid != "u-web" || !maps.Equal(cs, want) {
		t.Fatalf("web: %q %v %v", uid, cs, err)
	}
	if _, _, err := resolve(context.Background(), "default", "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("nope: %v, want ErrNotFound", err)
	}
}

// A followed log of a container that already exited is read to its end
// and closed at once, as upstream: no waiting, no second look at the pod.
func TestContainerLogsFollowExitedContainer(t *testing.T) {
	e := newLogsEnv(t)
	e.pods.set("default/web", fakePod{uid: "u1", containers: map[string]ResolvedContainer{"app": {Exited: true}}})
	e.write(t, 0, full("zero", "one")...)
	f, done := follow(t, e, "")
	if f.code != http.StatusOK {
		t.Fatalf("status %d", f.code)
	}
	select { // the handler returns by itself: the fake clock never moves
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the follow of an exited container is still open")
	}
	f.expect(t, e, "zero", "one")
	f.expectEnd(t, e)
	e.pods.mu.Lock()
	defer e.pods.mu.Unlock()
	if e.pods.calls != 1 {
		t.Fatalf("%d resolver calls, want 1", e.pods.calls)
	}
}
