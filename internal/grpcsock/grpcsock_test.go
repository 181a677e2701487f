package grpcsock_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/internal/grpcsock"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// registerHealth serves the standard health service, so a client can see
// the server answer.
func registerHealth(srv *grpc.Server) { healthpb.RegisterHealthServer(srv, health.NewServer()) }

func newServer(t *testing.T, opts ...grpcsock.Option) *grpcsock.Server {
	t.Helper()
	// t.TempDir paths can exceed the 108-byte limit of a unix socket path.
	dir, err := os.MkdirTemp("", "grpcsock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := grpcsock.New("test server", filepath.Join(dir, "sub", "test.sock"), registerHealth,
		append([]grpcsock.Option{grpcsock.WithLogger(quiet, "", "")}, opts...)...)
	t.Cleanup(s.Stop)
	return s
}

// check asks the server's health service over its socket.
func check(ctx context.Context, path string) error {
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(false))
	return err
}

func gone(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, os.ErrNotExist)
}

func TestStartServesStopRemovesAndStartsAgain(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	for round := range 2 {
		if err := s.Start(ctx); err != nil {
			t.Fatalf("round %d: Start: %v", round, err)
		}
		if err := check(ctx, s.SocketPath()); err != nil {
			t.Fatalf("round %d: health check while serving: %v", round, err)
		}
		s.Stop()
		s.Stop() // idempotent
		if !gone(s.SocketPath()) {
			t.Fatalf("round %d: socket %s left after Stop", round, s.SocketPath())
		}
	}
}

func TestStartTwiceIsRefused(t *testing.T) {
	s := newServer(t)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := s.Start(context.Background())
	if err == nil || err.Error() != "test server: already started" {
		t.Fatalf("second Start: got %v, want \"test server: already started\"", err)
	}
	if err := check(context.Background(), s.SocketPath()); err != nil {
		t.Fatalf("the first run must still serve: %v", err)
	}
}

func TestContextEndStopsServing(t *testing.T) {
	s := newServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	actortest.Eventually(t, "the socket to be removed after the context ended", func() bool { return gone(s.SocketPath()) })
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start after the context ended: %v", err)
	}
}

func TestServeReturnsNilWhenContextEnds(t *testing.T) {
	s := newServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx) }()
	actortest.Eventually(t, "Serve to answer", func() bool { return check(context.Background(), s.SocketPath()) == nil })
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Serve: %v, want nil when ctx ends", err)
	}
	if !gone(s.SocketPath()) {
		t.Fatal("socket left after Serve returned")
	}
}

func TestServeReturnsNilOnStop(t *testing.T) {
	s := newServer(t)
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(context.Background()) }()
	actortest.Eventually(t, "Serve to answer", func() bool { return check(context.Background(), s.SocketPath()) == nil })
	s.Stop()
	if err := <-errc; err != nil {
		t.Fatalf("Serve: %v, want nil after Stop", err)
	}
}

func TestStartErrors(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, path string)
		opts    []grpcsock.Option
		wantErr string
		after   func(t *testing.T, path string)
	}{
		{
			name: "a file that is not a socket is refused and kept",
			setup: func(t *testing.T, path string) {
				if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte("keep"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "exists and is not a socket",
			after: func(t *testing.T, path string) {
				if b, err := os.ReadFile(path); err != nil || string(b) != "keep" {
					t.Fatalf("file after a refused Start: %q, %v; want it kept", b, err)
				}
			},
		},
		{
			name:    "a failing prepare hook fails Start, named",
			opts:    []grpcsock.Option{grpcsock.WithPrepare(func() error { return errors.New("boom") })},
			wantErr: "test server: boom",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.opts...)
			if tt.setup != nil {
				tt.setup(t, s.SocketPath())
			}
			err := s.Start(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "test server: ") {
				t.Fatalf("Start: got %v, want an error with %q", err, tt.wantErr)
			}
			if check(context.Background(), s.SocketPath()) == nil {
				t.Fatal("a failed Start serves")
			}
			if tt.after != nil {
				tt.after(t, s.SocketPath())
			}
		})
	}
}

func TestStaleSocketIsReplacedAndPrepareRunsFirst(t *testing.T) {
	var prepared int
	s := newServer(t, grpcsock.WithPrepare(func() error { prepared++; return nil }))
	if err := os.MkdirAll(filepath.Dir(s.SocketPath()), 0o750); err != nil {
		t.Fatal(err)
	}
	// A socket left by a process that died: bound, never closed.
	l, err := net.Listen("unix", s.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start over a stale socket: %v", err)
	}
	if err := check(context.Background(), s.SocketPath()); err != nil {
		t.Fatalf("health check: %v", err)
	}
	if prepared != 1 {
		t.Fatalf("prepare ran %d times, want 1", prepared)
	}
}

func TestGRPCOptionsApply(t *testing.T) {
	refused := errors.New("refused by interceptor")
	s := newServer(t, grpcsock.WithGRPCOptions(grpc.UnaryInterceptor(
		func(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) { return nil, refused })))
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := check(context.Background(), s.SocketPath())
	if err == nil || !strings.Contains(err.Error(), refused.Error()) {
		t.Fatalf("health check: got %v, want the interceptor's error", err)
	}
}

func TestNoRegisterFuncIsRefused(t *testing.T) {
	s := grpcsock.New("test server", filepath.Join(os.TempDir(), "unused.sock"), nil)
	if err := s.Start(context.Background()); err == nil {
		t.Fatal("Start without a register func: want an error")
	}
}
