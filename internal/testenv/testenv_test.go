package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeTB records Fatalf instead of stopping the goroutine.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

func TestWaitFor(t *testing.T) {
	tests := []struct {
		name     string
		cond     func(n int) (bool, error)
		wantFail string
	}{
		{name: "true at once", cond: func(int) (bool, error) { return true, nil }},
		{name: "true after errors", cond: func(n int) (bool, error) {
			if n < 3 {
				return false, errors.New("not yet")
			}
			return true, nil
		}},
		{name: "never", cond: func(int) (bool, error) { return false, errors.New("connection refused") },
			wantFail: "waiting for the thing (last error: connection refused)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeTB{TB: t}
			n := 0
			WaitFor(f, 100*time.Millisecond, "the thing", func() (bool, error) { n++; return tt.cond(n) })
			if tt.wantFail == "" && f.failed != "" {
				t.Fatalf("WaitFor failed: %s", f.failed)
			}
			if tt.wantFail != "" && !strings.Contains(f.failed, tt.wantFail) {
				t.Fatalf("WaitFor failure %q, want it to contain %q", f.failed, tt.wantFail)
			}
		})
	}
}

func TestRepoRoot(t *testing.T) {
	root := RepoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("RepoRoot = %s without go.mod", root)
	}
	if _, err := os.Stat(filepath.Join(root, "deploy", "local", "containerd.sh")); err != nil {
		t.Errorf("RepoRoot = %s, no deploy/local/containerd.sh: %v", root, err)
	}
}

func TestParseLines(t *testing.T) {
	got := parseLines("CONTAINER_RUNTIME_ENDPOINT=unix:///tmp/x/containerd.sock\nBUSYBOX_IMAGE=localhost/busybox:1.35\n\nPAUSE_IMAGE=p\n")
	if got["CONTAINER_RUNTIME_ENDPOINT"] != "unix:///tmp/x/containerd.sock" || got["BUSYBOX_IMAGE"] != "localhost/busybox:1.35" || got["PAUSE_IMAGE"] != "p" {
		t.Fatalf("parseLines = %v", got)
	}
}

func TestTail(t *testing.T) {
	if got := tail("a\nb\nc\n", 2); got != "b\nc" {
		t.Fatalf("tail = %q", got)
	}
}
