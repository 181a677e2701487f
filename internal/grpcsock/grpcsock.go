// Package grpcsock runs a gRPC server on a unix socket with the lifecycle
// the kubelet's local sockets share (the device plugin registration socket,
// the pod resources socket): Start serves in a goroutine until a context
// ends or Stop is called, Serve is Start then wait, Stop is idempotent and
// Start may be called again afterwards. A stale socket left by an earlier
// process is replaced; a file that is not a socket is refused.
//
// It imports nothing of the project, so any adapter may use it.
package grpcsock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
)

// Server serves one gRPC server on a unix socket, once at a time.
type Server struct {
	name     string
	path     string
	register func(*grpc.Server)

	grpcOpts  []grpc.ServerOption
	prepare   func() error
	log       *slog.Logger
	listening string
	logAttrs  []any
	stopped   string

	mu  sync.Mutex
	cur *serving // nil when not serving
}

// serving is one run of the gRPC server: done is closed when Serve
// returned, with its error in err.
type serving struct {
	srv  *grpc.Server
	done chan struct{}
	err  error
}

// Option changes a Server made by New.
type Option func(*Server)

// WithGRPCOptions are passed to grpc.NewServer on every Start.
func WithGRPCOptions(opts ...grpc.ServerOption) Option {
	return func(s *Server) { s.grpcOpts = append(s.grpcOpts, opts...) }
}

// WithPrepare runs prepare on every Start before it listens (under the
// server's lock, so never while it serves); an error of prepare fails Start.
func WithPrepare(prepare func() error) Option {
	return func(s *Server) { s.prepare = prepare }
}

// WithLogger logs to log (default slog.Default()): listening with the
// attributes "socket", the socket path, then attrs, when Start serves, and
// stopped when a run stops (defaults: "<name> listening", "<name> stopped").
func WithLogger(log *slog.Logger, listening, stopped string, attrs ...any) Option {
	return func(s *Server) {
		if log != nil {
			s.log = log
		}
		if listening != "" {
			s.listening = listening
		}
		if stopped != "" {
			s.stopped = stopped
		}
		s.logAttrs = attrs
	}
}

// New returns a server for the unix socket at path. name starts its errors
// ("<name>: already started"); register registers the services on each new
// grpc.Server.
func New(name, path string, register func(*grpc.Server), opts ...Option) *Server {
	s := &Server{
		name:      name,
		path:      path,
		register:  register,
		log:       slog.Default(),
		listening: name + " listening",
		stopped:   name + " stopped",
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// SocketPath is where the server listens.
func (s *Server) SocketPath() string { return s.path }

// Start runs the prepare hook, makes the socket's dir (0750) if it is
// missing, removes a stale socket there, listens and serves in a goroutine
// until ctx ends or Stop is called.
func (s *Server) Start(ctx context.Context) error {
	_, err := s.start(ctx)
	return err
}

// Serve is Start, then waits until ctx ends (nil) or the server fails (the
// error), and stops it.
func (s *Server) Serve(ctx context.Context) error {
	run, err := s.start(ctx)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		s.stop(run)
		return nil
	case <-run.done:
		s.stop(run)
		if run.err == nil || errors.Is(run.err, grpc.ErrServerStopped) {
			return nil
		}
		return fmt.Errorf("%s: serve: %w", s.name, run.err)
	}
}

// Stop stops serving (open RPCs are cancelled) and waits for it; the socket
// is removed. It is idempotent; Start may be called again afterwards.
func (s *Server) Stop() {
	s.mu.Lock()
	run := s.cur
	s.mu.Unlock()
	if run != nil {
		s.stop(run)
	}
}

func (s *Server) start(ctx context.Context) (*serving, error) {
	if s.register == nil {
		return nil, fmt.Errorf("%s: no gRPC services to register", s.name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		return nil, fmt.Errorf("%s: already started", s.name)
	}
	if s.prepare != nil {
		if err := s.prepare(); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	l, err := listenUnix(s.path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	run := &serving{srv: grpc.NewServer(s.grpcOpts...), done: make(chan struct{})}
	s.register(run.srv)
	s.cur = run
	go func() {
		run.err = run.srv.Serve(l)
		close(run.done)
	}()
	go func() {
		select {
		case <-ctx.Done():
			s.stop(run)
		case <-run.done:
		}
	}()
	s.log.Info(s.listening, append([]any{"socket", s.path}, s.logAttrs...)...)
	return run, nil
}

// stop stops run and waits for its serving goroutine.
func (s *Server) stop(run *serving) {
	s.mu.Lock()
	current := s.cur == run
	if current {
		s.cur = nil
	}
	s.mu.Unlock()
	run.srv.Stop()
	<-run.done
	if current {
		s.log.Info(s.stopped)
	}
}

// listenUnix listens on a unix socket at p, making its dir (0750) if it is
// missing and removing a stale socket there first. A file there that is not
// a socket is left alone and refused.
func listenUnix(p string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return nil, fmt.Errorf("socket dir: %w", err)
	}
	if fi, err := os.Lstat(p); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", p)
		}
		if err := os.Remove(p); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	l, err := net.Listen("unix", p)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return l, nil
}
