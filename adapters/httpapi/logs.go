package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/messages"
)

// ContainerLogsPattern is the route of the container logs endpoint, as
// upstream kubelet serves it on its main port.
const ContainerLogsPattern = "GET /containerLogs/{namespace}/{pod}/{container}"

// Container logs defaults.
const (
	DefaultLogsPollInterval    = 250 * time.Millisecond
	DefaultLogsResolveInterval = time.Second
	tailChunkSize              = 32 << 10
	logHeaderMax               = 128 // timestamp, stream and tag of one CRI log line fit in it
	logReadBufferSize          = 64 << 10
)

// ResolveFunc finds a pod by namespace and name: its UID and each of its
// containers (init and ephemeral ones included). It returns an error
// wrapping errdefs.ErrNotFound when no such pod is known.
type ResolveFunc func(ctx context.Context, namespace, name string) (uid string, containers map[string]ResolvedContainer, err error)

// ResolvedContainer is what the node API needs of a container's status.
type ResolvedContainer struct {
	// Attempt is the current restart count: the attempt number of the
	// newest log file.
	Attempt int32
	// Exited: that attempt has finished (terminated, or waiting to be
	// restarted after it did). A followed log of it ends at its end.
	Exited bool
}

// resolved is a container status as a ResolvedContainer.
func resolved(s *v1.ContainerStatus) ResolvedContainer {
	exited := s.State.Terminated != nil || (s.State.Waiting != nil && s.LastTerminationState.Terminated != nil)
	return ResolvedContainer{Attempt: s.RestartCount, Exited: exited}
}

// ContainerLogsOption configures NewContainerLogs.
type ContainerLogsOption func(*containerLogs)

// WithLogsClock sets the clock used for sinceSeconds and for polling a
// followed log. Default: the real clock.
func WithLogsClock(c clock.Clock) ContainerLogsOption {
	return func(h *containerLogs) { h.clk = c }
}

// WithLogsPollInterval sets how often a followed log is checked for new
// lines. Default 250ms.
func WithLogsPollInterval(d time.Duration) ContainerLogsOption {
	return func(h *containerLogs) {
		if d > 0 {
			h.poll = d
		}
	}
}

// WithLogsResolveInterval sets how often a follower asks whether the pod
// still exists and has not restarted the container. Default 1s.
func WithLogsResolveInterval(d time.Duration) ContainerLogsOption {
	return func(h *containerLogs) {
		if d > 0 {
			h.resolveEvery = d
		}
	}
}

type containerLogs struct {
	root         string
	resolve      ResolveFunc
	log          *slog.Logger
	clk          clock.Clock
	poll         time.Duration
	resolveEvery time.Duration
}

// NewContainerLogs serves GET /containerLogs/{namespace}/{pod}/{container}
// (ContainerLogsPattern) from the CRI log files under root (the pod logs
// dir: <root>/<namespace>_<name>_<uid>/<container>/<attempt>.log), with the
// upstream query: tailLines (or tail), previous, timestamps, follow,
// limitBytes, sinceSeconds, sinceTime. It routes by itself, so it can be
// mounted on that pattern or on "/containerLogs/". It panics without root or
// resolve (a wiring error).
func NewContainerLogs(root string, resolve ResolveFunc, log *slog.Logger, opts ...ContainerLogsOption) http.Handler {
	if root == "" || resolve == nil {
		panic("httpapi.NewContainerLogs: root and resolve are required")
	}
	if log == nil {
		log = slog.Default()
	}
	h := &containerLogs{
		root: root, resolve: resolve, log: log,
		clk: clock.RealClock{}, poll: DefaultLogsPollInterval, resolveEvery: DefaultLogsResolveInterval,
	}
	for _, o := range opts {
		o(h)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(ContainerLogsPattern, h.serve)
	return mux
}

// StatusResolver resolves pods with the StatusActor (messages.GetPod: one
// pod, not a copy of the whole list), waiting at most timeout (default 10s)
// per request.
func StatusResolver(sys *actor.ActorSystem, status *actor.PID, timeout time.Duration) ResolveFunc {
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	return func(ctx context.Context, namespace, name string) (string, map[string]ResolvedContainer, error) {
		t := timeout
		if dl, ok := ctx.Deadline(); ok {
			t = min(t, time.Until(dl))
		}
		res, err := sys.Root.RequestFuture(status, &messages.GetPod{Namespace: namespace, Name: name}, t).Result()
		if err != nil {
			return "", nil, fmt.Errorf("ask status actor (%s): %w: %v", status.Id, errdefs.ErrUnavailable, err)
		}
		if u, ok := res.(*messages.StatusUnavailable); ok {
			return "", nil, fmt.Errorf("%w: %s", errdefs.ErrUnavailable, u.Reason)
		}
		found, ok := res.(*messages.PodFound)
		if !ok {
			return "", nil, fmt.Errorf("status actor: unexpected answer %T", res)
		}
		if p := found.Pod; p != nil {
			cs := make(map[string]ResolvedContainer, len(p.Spec.Containers)+len(p.Spec.InitContainers))
			for _, c := range p.Spec.InitContainers {
				cs[c.Name] = ResolvedContainer{}
			}
			for _, c := range p.Spec.Containers {
				cs[c.Name] = ResolvedContainer{}
			}
			for _, c := range p.Spec.EphemeralContainers {
				cs[c.Name] = ResolvedContainer{}
			}
			for _, st := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses} {
				for i := range st {
					cs[st[i].Name] = resolved(&st[i])
				}
			}
			return string(p.UID), cs, nil
		}
		return "", nil, fmt.Errorf("pod %s/%s: %w", namespace, name, errdefs.ErrNotFound)
	}
}

// logOptions is the decoded query, as upstream's v1.PodLogOptions.
type logOptions struct {
	tail       int64 // -1: all
	limit      int64 // -1: no limit
	since      time.Time
	previous   bool
	timestamps bool
	follow     bool
}

func parseLogOptions(q map[string][]string, now time.Time) (logOptions, error) {
	o := logOptions{tail: -1, limit: -1}
	get := func(k string) (string, bool) {
		v, ok := q[k]
		if !ok || len(v) == 0 {
			return "", false
		}
		return v[0], true
	}
	boolean := func(k string, dst *bool) error {
		v, ok := get(k)
		if !ok {
			return nil
		}
		if v == "" { // ?follow alone means true, as upstream
			*dst = true
			return nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("invalid %s %q: want true or false", k, v)
		}
		*dst = b
		return nil
	}
	integer := func(k string, minimum int64) (int64, bool, error) {
		v, ok := get(k)
		if !ok {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < minimum {
			return 0, false, fmt.Errorf("invalid %s %q: want an integer >= %d", k, v, minimum)
		}
		return n, true, nil
	}
	for _, b := range []struct {
		k   string
		dst *bool
	}{{"previous", &o.previous}, {"timestamps", &o.timestamps}, {"follow", &o.follow}} {
		if err := boolean(b.k, b.dst); err != nil {
			return o, err
		}
	}
	// tail is the legacy name of tailLines; "all" means no tail.
	if v, ok := get("tail"); ok && v != "all" {
		if _, set := q["tailLines"]; !set {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return o, fmt.Errorf("invalid tail %q: want an integer >= 0 or \"all\"", v)
			}
			o.tail = n
		}
	}
	if n, ok, err := integer("tailLines", 0); err != nil {
		return o, err
	} else if ok {
		o.tail = n
	}
	if n, ok, err := integer("limitBytes", 1); err != nil {
		return o, err
	} else if ok {
		o.limit = n
	}
	secs, hasSecs, err := integer("sinceSeconds", 1)
	if err != nil {
		return o, err
	}
	st, hasTime := get("sinceTime")
	switch {
	case hasSecs && hasTime:
		return o, errors.New("at most one of sinceTime or sinceSeconds may be specified")
	case hasSecs:
		o.since = now.Add(-time.Duration(secs) * time.Second)
	case hasTime:
		t, err := time.Parse(time.RFC3339, st)
		if err != nil {
			return o, fmt.Errorf("invalid sinceTime %q: want RFC3339", st)
		}
		o.since = t
	}
	return o, nil
}

// validName refuses path elements that would leave the logs dir.
func validName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}

func (h *containerLogs) serve(w http.ResponseWriter, r *http.Request) {
	ns, name, ctr := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	if !validName(ns) || !validName(name) || !validName(ctr) {
		httpError(w, http.StatusBadRequest, "invalid path: expected /containerLogs/{namespace}/{pod}/{container}")
		return
	}
	opts, err := parseLogOptions(r.URL.Query(), h.clk.Now())
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	ctx := r.Context()
	uid, containers, err := h.resolve(ctx, ns, name)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		httpError(w, http.StatusNotFound, "pod %q does not exist in namespace %q", name, ns)
		return
	case err != nil:
		httpError(w, http.StatusServiceUnavailable, "find pod %s/%s: %v", ns, name, err)
		return
	case !validName(uid):
		httpError(w, http.StatusInternalServerError, "pod %s/%s has an invalid UID %q", ns, name, uid)
		return
	}
	current, ok := containers[ctr]
	if !ok {
		httpError(w, http.StatusNotFound, "container %q not found in pod %s/%s", ctr, ns, name)
		return
	}
	attempt := current.Attempt
	if opts.previous {
		attempt--
	}
	if current.Exited || opts.previous {
		// Nothing more will be written: read to the end and stop, as
		// upstream does for a container that is not running.
		opts.follow = false
	}
	dir := filepath.Join(h.root, fmt.Sprintf("%s_%s_%s", ns, name, uid), ctr) // podspec.PodLogDir + ContainerConfig.LogPath
	path := attemptLog(dir, attempt)
	f, err := os.Open(path)
	if attempt < 0 || errors.Is(err, os.ErrNotExist) {
		if opts.previous {
			httpError(w, http.StatusBadRequest, "previous terminated container %q in pod %q not found", ctr, name)
		} else {
			httpError(w, http.StatusBadRequest, "container %q in pod %q is waiting to start: no log yet", ctr, name)
		}
		if f != nil {
			_ = f.Close()
		}
		return
	}
	if err != nil {
		httpError(w, http.StatusInternalServerError, "open log of container %q in pod %s/%s: %v", ctr, ns, name, err)
		return
	}
	defer func() { _ = f.Close() }()

	start := int64(0)
	if opts.tail >= 0 {
		fi, err := f.Stat()
		if err == nil {
			start, err = tailStart(f, fi.Size(), opts.tail)
		}
		if err != nil {
			httpError(w, http.StatusInternalServerError, "read log %s: %v", path, err)
			return
		}
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		httpError(w, http.StatusInternalServerError, "read log %s: %v", path, err)
		return
	}

	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	flush := func() { _ = rc.Flush() }
	if opts.follow {
		flush() // the client sees the headers before the first line
	}
	s := &logStream{
		h: h, f: f, path: path, dir: dir, attempt: attempt, ns: ns, name: name, ctr: ctr, uid: uid,
		dec:   &criDecoder{w: &limitWriter{w: w, remain: opts.limit}, timestamps: opts.timestamps, since: opts.since},
		flush: flush,
	}
	if err := s.run(ctx, opts.follow); err != nil && !errors.Is(err, errLimitReached) && ctx.Err() == nil {
		h.log.Warn("container logs", "pod", ns+"/"+name, "container", ctr, "err", err)
	}
	flush()
}

func attemptLog(dir string, attempt int32) string {
	return filepath.Join(dir, strconv.FormatInt(int64(attempt), 10)+".log")
}

// logStream copies one log file to the decoder, following it if asked.
type logStream struct {
	h                  *containerLogs
	f                  *os.File
	path, dir          string
	attempt            int32
	ns, name, ctr, uid string
	dec                *criDecoder
	flush              func()
}

func (s *logStream) run(ctx context.Context, follow bool) error {
	br := bufio.NewReaderSize(s.f, logReadBufferSize)
	var carry []byte // an incomplete last line, completed by a later read
	lastResolve := s.h.clk.Now()
	final := false // the container is done: read to the end, then stop
	for {
		line, err := br.ReadBytes('\n')
		if len(carry) > 0 {
			line = append(carry, line...)
			carry = nil
		}
		if err == nil {
			if werr := s.dec.line(line); werr != nil {
				return werr
			}
			continue
		}
		if !errors.Is(err, io.EOF) {
			return fmt.Errorf("read %s: %w", s.path, err)
		}
		// At the end of what is written so far.
		if !follow || final {
			if len(line) > 0 {
				if werr := s.dec.line(line); werr != nil {
					return werr
				}
			}
			return nil
		}
		carry = line
		s.flush()
		if s.nextAttemptStarted() {
			final = true
			continue
		}
		if s.h.clk.Since(lastResolve) >= s.h.resolveEvery {
			lastResolve = s.h.clk.Now()
			if s.containerGone(ctx) {
				final = true
				continue
			}
		}
		if reopened, err := s.reopenIfRotated(); err != nil {
			return err
		} else if reopened {
			br.Reset(s.f)
			carry = nil
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.h.clk.After(s.h.poll):
		}
	}
}

// nextAttemptStarted tells whether the runtime has started writing the
// next attempt's log: this one is then complete.
func (s *logStream) nextAttemptStarted() bool {
	_, err := os.Stat(attemptLog(s.dir, s.attempt+1))
	return err == nil
}

// containerGone asks whether the pod or container went away or restarted.
func (s *logStream) containerGone(ctx context.Context) bool {
	uid, cs, err := s.h.resolve(ctx, s.ns, s.name)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return true
	case err != nil:
		return false // unknown: keep following
	case uid != s.uid:
		return true
	}
	c, ok := cs[s.ctr]
	return !ok || c.Attempt > s.attempt || (c.Attempt == s.attempt && c.Exited)
}

// reopenIfRotated follows a log file replaced (renamed away and recreated)
// or truncated at the same path.
func (s *logStream) reopenIfRotated() (bool, error) {
	cur, err := s.f.Stat()
	if err != nil {
		return false, fmt.Errorf("stat %s: %w", s.path, err)
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		return false, nil // removed or between rename and create: the resolver ends the stream
	}
	if os.SameFile(cur, fi) {
		pos, err := s.f.Seek(0, io.SeekCurrent)
		if err != nil || fi.Size() >= pos {
			return false, nil
		}
		// Truncated in place.
		_, err = s.f.Seek(0, io.SeekStart)
		return err == nil, err
	}
	nf, err := os.Open(s.path)
	if err != nil {
		return false, nil
	}
	_ = s.f.Close()
	s.f = nf
	return true, nil
}

// tailStart returns the offset where the last n lines of a CRI log of size
// bytes begin. A line is a sequence of partial ("P") entries ended by a full
// ("F") one; trailing partial entries count as one line. It reads backwards
// in fixed chunks, so memory does not grow with the file.
func tailStart(f io.ReaderAt, size, n int64) (int64, error) {
	if n == 0 || size == 0 {
		return size, nil
	}
	buf := make([]byte, tailChunkSize)
	var hdr [logHeaderMax]byte
	var (
		ends    int64   // full entries seen
		need    = n + 1 // the full entry that ends the line before the tail
		next    = size  // start of the entry after the one visited
		first   = true  // visiting the last entry
		lo, end int64   // the chunk in buf: [lo, end)
	)
	// visit looks at the entry starting at start; it returns true when the
	// tail starts right after it (at next).
	visit := func(start int64) (bool, error) {
		if start >= size {
			return false, nil
		}
		h := buf[start-lo : end-lo]
		if len(h) > logHeaderMax {
			h = h[:logHeaderMax]
		}
		if len(h) < logHeaderMax && bytes.IndexByte(h, '\n') < 0 && end < size {
			m, err := f.ReadAt(hdr[:], start)
			if err != nil && !errors.Is(err, io.EOF) {
				return false, err
			}
			h = hdr[:m]
		}
		full := !entryIsPartial(h)
		if first {
			first = false
			if !full {
				need = n // the trailing partial entries are the last line
			}
		}
		if full {
			ends++
			if ends == need {
				return true, nil
			}
		}
		next = start
		return false, nil
	}
	end = size
	for end > 0 {
		lo = max(0, end-tailChunkSize)
		chunk := buf[:end-lo]
		if _, err := f.ReadAt(chunk, lo); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] != '\n' {
				continue
			}
			done, err := visit(lo + int64(i) + 1)
			if err != nil {
				return 0, err
			}
			if done {
				return next, nil
			}
		}
		if lo == 0 {
			break
		}
		end = lo
	}
	// lo == 0: the first entry is in buf.
	done, err := visit(0)
	if err != nil {
		return 0, err
	}
	if done {
		return next, nil
	}
	return 0, nil
}

// entryIsPartial tells whether a CRI log entry (or its beginning) has the
// partial tag: "<timestamp> <stream> P[:more tags] <text>".
func entryIsPartial(b []byte) bool {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	_, rest, ok := bytes.Cut(b, []byte{' '})
	if !ok {
		return false
	}
	_, rest, ok = bytes.Cut(rest, []byte{' '})
	if !ok {
		return false
	}
	tag, _, _ := bytes.Cut(rest, []byte{' '})
	tag, _, _ = bytes.Cut(tag, []byte{':'})
	return string(tag) == "P"
}

// criDecoder turns CRI log entries into the container's raw output, as
// upstream: partial entries are written without their newline, so they join
// the following ones of the same stream; with timestamps each line starts
// with its first entry's RFC3339Nano timestamp and a space.
type criDecoder struct {
	w          io.Writer
	timestamps bool
	since      time.Time
	mid        [2]bool // per stream: inside a line (the last entry was partial)
	skip       [2]bool // per stream: the current line is older than since
}

func (d *criDecoder) line(b []byte) error {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	tsb, rest, ok := bytes.Cut(b, []byte{' '})
	if !ok {
		return nil // not a CRI log entry: skipped, as upstream
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return nil
	}
	var si int
	switch string(stream) {
	case "stdout":
		si = 0
	case "stderr":
		si = 1
	default:
		return nil
	}
	tag, text, _ := bytes.Cut(rest, []byte{' '})
	tag, _, _ = bytes.Cut(tag, []byte{':'})
	partial := string(tag) == "P"
	if !d.mid[si] {
		ts, err := time.Parse(time.RFC3339Nano, string(tsb))
		if err != nil {
			return nil
		}
		d.skip[si] = !d.since.IsZero() && ts.Before(d.since)
		if !d.skip[si] && d.timestamps {
			if _, err := io.WriteString(d.w, ts.Format(time.RFC3339Nano)+" "); err != nil {
				return err
			}
		}
	}
	d.mid[si] = partial
	if d.skip[si] {
		return nil
	}
	if _, err := d.w.Write(text); err != nil {
		return err
	}
	if !partial {
		_, err := d.w.Write([]byte{'\n'})
		return err
	}
	return nil
}

var errLimitReached = errors.New("limitBytes reached")

// limitWriter writes at most remain bytes (all when remain < 0), then
// fails with errLimitReached.
type limitWriter struct {
	w      io.Writer
	remain int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.remain < 0 {
		return l.w.Write(p)
	}
	if l.remain == 0 {
		return 0, errLimitReached
	}
	cut := int64(len(p)) > l.remain
	if cut {
		p = p[:l.remain]
	}
	n, err := l.w.Write(p)
	l.remain -= int64(n)
	if err == nil && (cut || l.remain == 0) {
		err = errLimitReached
	}
	return n, err
}
