package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/actorlet/actorlet/adapters/cri"
	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/internal/bench"
)

func TestFakeCRIUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"no listen", nil},
		{"tcp", []string{"--listen", "tcp://127.0.0.1:1"}},
		{"empty path", []string{"--listen", "unix://"}},
		{"unknown flag", []string{"--listen", "unix:///tmp/x.sock", "--nope"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if code := runFakeCRI(context.Background(), tc.args); code != exitUsage {
				t.Fatalf("exit %d, want %d", code, exitUsage)
			}
		})
	}
}

// TestFakeCRIServes: a CRI client sees upstream's fake runtime, ready, with
// a pulled image of the configured size; the socket goes at the end. At
// each SIGUSR1 it writes the calls it served, by method, with a sequence
// number.
func TestFakeCRIServes(t *testing.T) {
	// The process catches SIGUSR1 from here on: the fake registers its own
	// catch inside runFakeCRI, and a signal before that must not end the
	// test binary.
	caught := make(chan os.Signal, 8)
	signal.Notify(caught, syscall.SIGUSR1)
	defer signal.Stop(caught)
	calls := filepath.Join(t.TempDir(), "calls.json")
	sock := filepath.Join(t.TempDir(), "fake.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil { // a socket left by a killed run
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- runFakeCRI(ctx, []string{"--listen", "unix://" + sock, "--image-size", "4096", "--calls-file", calls})
	}()
	var c *cri.Client
	var dialErr error
	actortest.EventuallyDetail(t, "fake-cri answers Version", func() bool {
		dctx, dcancel := context.WithTimeout(ctx, time.Second)
		defer dcancel()
		cc, err := cri.Dial(dctx, "unix://"+sock, 5*time.Second)
		if err == nil {
			if _, err = cc.Version(dctx); err == nil {
				c = cc
				return true
			}
			_ = cc.Close()
		}
		dialErr = err
		return false
	}, func() string { return fmt.Sprint(dialErr) })
	defer func() { _ = c.Close() }()
	st, err := c.Status(ctx)
	if err != nil || len(st.GetConditions()) != 2 || !st.GetConditions()[0].GetStatus() || !st.GetConditions()[1].GetStatus() {
		t.Fatalf("status %v, err %v", st, err)
	}
	if _, err := c.PullImage(ctx, "localhost/x:1", nil); err != nil {
		t.Fatal(err)
	}
	img, err := c.ImageStatus(ctx, "localhost/x:1")
	if err != nil || img.GetSize() != 4096 {
		t.Fatalf("image %v, err %v", img, err)
	}
	first := signalCalls(t, calls, func(c bench.FakeCRICalls) bool { return c.Calls["ImageStatus"] >= 1 })
	if first.Calls["PullImage"] != 1 || first.Calls["ImageStatus"] != 1 || first.Calls["Status"] != 1 || first.Calls["Version"] < 1 {
		t.Errorf("calls %v, want PullImage, ImageStatus and Status once, Version at least once", first.Calls)
	}
	if _, err := c.ImageStatus(ctx, "localhost/x:1"); err != nil {
		t.Fatal(err)
	}
	if second := signalCalls(t, calls, func(c bench.FakeCRICalls) bool { return c.Seq > first.Seq && c.Calls["ImageStatus"] >= 2 }); second.Calls["ImageStatus"] != 2 || second.Calls["PullImage"] != 1 {
		t.Errorf("calls after one more ImageStatus %v", second.Calls)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left: %v", err)
	}
}

// signalCalls sends SIGUSR1 to this process until the fake-cri in it has
// written calls that satisfy done (the first signals may come before the
// fake catches them, and a signal still queued may rewrite the file with
// the same counts under a newer sequence number: done looks at the counts).
func signalCalls(t *testing.T, path string, done func(bench.FakeCRICalls) bool) bench.FakeCRICalls {
	t.Helper()
	var c bench.FakeCRICalls
	actortest.EventuallyDetail(t, "the calls written to "+path, func() bool {
		if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		c = bench.FakeCRICalls{}
		b, err := os.ReadFile(path)
		return err == nil && json.Unmarshal(b, &c) == nil && done(c)
	}, func() string { return fmt.Sprintf("last read: %+v", c) })
	return c
}
