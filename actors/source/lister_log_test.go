package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	testclock "k8s.io/utils/clock/testing"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/messages"
)

// logLines records "LEVEL msg" of every record, Debug included.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logLines) WithGroup(string) slog.Handler            { return l }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, r.Level.String()+" "+r.Message)
	return nil
}

func (l *logLines) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lines
	l.lines = nil
	return out
}

// digestErr is a listing error about one content (as manifest.ContentError).
type digestErr struct{ msg, digest string }

func (e *digestErr) Error() string         { return e.msg }
func (e *digestErr) ContentDigest() string { return e.digest }

// Issue 9: skipped-manifest warnings repeated at every file check. A bad
// manifest is warned about once per content; while it stays the same every
// check logs it at Debug; a change (another content with the same error, or
// the file fixed and broken again) warns again.
func TestPollerWarnsOncePerContent(t *testing.T) {
	bad := func(digest string) error {
		return fmt.Errorf("wrapped: %w", &digestErr{msg: "/m/a.yaml: spec.containers[0].image: Required value", digest: digest})
	}
	missing := errdefs.Wrap(errdefs.ErrNotFound, errors.New("manifest dir /m: no such file"))
	down := errdefs.Wrap(errdefs.ErrUnavailable, errors.New("manifest url: status 503"))
	const (
		skipped = "pod manifest skipped"
		failed  = "listing failed, keeping the previous pods"
	)
	tests := []struct {
		name   string
		source string
		errs   [][]error  // one listing each
		want   [][]string // its log lines ("LEVEL msg"), "pods updated" left out
	}{
		{
			name: "a bad file", source: messages.SourceFile,
			errs: [][]error{{bad("d1")}, {bad("d1")}, {bad("d1")}, {bad("d2")}, {}, {bad("d2")}},
			want: [][]string{{"WARN " + skipped}, {"DEBUG " + skipped}, {"DEBUG " + skipped}, {"WARN " + skipped}, nil, {"WARN " + skipped}},
		},
		{
			name: "a missing dir", source: messages.SourceFile,
			errs: [][]error{{missing}, {missing}},
			want: [][]string{{"WARN " + skipped}, {"DEBUG " + skipped}},
		},
		{
			name: "an unreachable URL", source: messages.SourceURL,
			errs: [][]error{{down}, {down}},
			want: [][]string{{"WARN " + failed}, {"DEBUG " + failed}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys, _, node := newSystem(t)
			clk := testclock.NewFakeClock(time.Unix(1000, 0))
			lister := &fakeLister{}
			for _, errs := range tt.errs {
				lister.results = append(lister.results, listResult{errs: errs})
			}
			logs := &logLines{}
			const every = 20 * time.Second
			newFn := NewFile
			if tt.source == messages.SourceURL {
				newFn = NewURL
			}
			pid := sys.Root.Spawn(actor.PropsFromProducer(newFn(node, lister, every, clk, slog.New(logs))))
			defer sys.Root.Stop(pid)
			for i := range tt.errs {
				if i > 0 {
					clk.Step(every)
				}
				actortest.Eventually(t, fmt.Sprintf("listing %d handled", i+1), func() bool {
					return lister.callCount() == i+1 && clk.HasWaiters()
				})
				var got []string
				for _, l := range logs.take() {
					if !strings.HasSuffix(l, "pods updated") {
						got = append(got, l)
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(tt.want[i]) {
					t.Errorf("listing %d logged %q, want %q", i+1, got, tt.want[i])
				}
			}
		})
	}
}
