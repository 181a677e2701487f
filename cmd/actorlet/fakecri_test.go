package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/actorlet/actorlet/adapters/cri"
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
// a pulled image of the configured size; the socket goes at the end.
func TestFakeCRIServes(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "fake.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil { // a socket left by a killed run
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- runFakeCRI(ctx, []string{"--listen", "unix://" + sock, "--image-size", "4096"}) }()
	var c *cri.Client
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		dctx, dcancel := context.WithTimeout(ctx, time.Second)
		c, err = cri.Dial(dctx, "unix://"+sock, 5*time.Second)
		if err == nil {
			_, err = c.Version(dctx)
		}
		dcancel()
		if err == nil {
			break
		}
		if c != nil {
			_ = c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("fake-cri does not answer: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left: %v", err)
	}
}
