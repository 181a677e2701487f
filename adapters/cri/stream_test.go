package cri

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/errdefs"
)

// streamServer answers the three streaming calls with a fixed URL or error
// and records the requests.
type streamServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	mu   sync.Mutex
	url  string
	err  error
	reqs []any
}

func (s *streamServer) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeApiVersion: "v1", RuntimeName: "stream-fake"}, nil
}

func (s *streamServer) answer(req any) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	return s.url, s.err
}

func (s *streamServer) Exec(_ context.Context, r *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	u, err := s.answer(r)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ExecResponse{Url: u}, nil
}

func (s *streamServer) Attach(_ context.Context, r *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	u, err := s.answer(r)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.AttachResponse{Url: u}, nil
}

func (s *streamServer) PortForward(_ context.Context, r *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	u, err := s.answer(r)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PortForwardResponse{Url: u}, nil
}

func startStreamFake(t *testing.T) (*Client, *streamServer, *recorder) {
	t.Helper()
	fs := &streamServer{}
	c, rec := serve(t, unixURL, func(srv *grpc.Server) { runtimeapi.RegisterRuntimeServiceServer(srv, fs) })
	return c, fs, rec
}

func TestStreamingCalls(t *testing.T) {
	c, fs, rec := startStreamFake(t)
	ctx := context.Background()
	fs.url = "http://127.0.0.1:4242/exec/tok"

	u, err := c.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: "ctr1", Cmd: []string{"echo", "hi"}, Stdout: true, Stderr: true})
	if err != nil || u.String() != fs.url {
		t.Fatalf("Exec = %v, %v", u, err)
	}
	er := fs.reqs[0].(*runtimeapi.ExecRequest)
	if er.ContainerId != "ctr1" || len(er.Cmd) != 2 || !er.Stdout || !er.Stderr || er.Stdin || er.Tty {
		t.Fatalf("ExecRequest = %v", er)
	}
	if got := rec.last(); got.op != "exec" || got.err != nil {
		t.Fatalf("observed %+v", got)
	}

	if _, err := c.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: "ctr1", Stdin: true, Tty: true}); err != nil {
		t.Fatalf("Attach: %v", err)
	}
	ar := fs.reqs[1].(*runtimeapi.AttachRequest)
	if ar.ContainerId != "ctr1" || !ar.Stdin || !ar.Tty || ar.Stdout {
		t.Fatalf("AttachRequest = %v", ar)
	}

	if _, err := c.PortForward(ctx, "sb1", []int32{8080}); err != nil {
		t.Fatalf("PortForward: %v", err)
	}
	pr := fs.reqs[2].(*runtimeapi.PortForwardRequest)
	if pr.PodSandboxId != "sb1" || len(pr.Port) != 1 || pr.Port[0] != 8080 {
		t.Fatalf("PortForwardRequest = %v", pr)
	}
	if got := rec.last(); got.op != "port_forward" {
		t.Fatalf("observed %+v", got)
	}
}

func TestStreamingErrors(t *testing.T) {
	tests := []struct {
		name    string
		url     string
		err     error
		call    string
		want    error
		wantMsg string
	}{
		{name: "not found", err: status.Error(codes.NotFound, "container \"x\" not found"), call: "exec", want: errdefs.ErrNotFound},
		{name: "not running", err: status.Error(codes.FailedPrecondition, "container is not running"), call: "attach", want: errdefs.ErrFailedPrecondition},
		{name: "unimplemented", err: status.Error(codes.Unimplemented, "no streaming"), call: "portforward", want: errdefs.ErrUnimplemented},
		{name: "containerd unknown not found", err: status.Error(codes.Unknown, "failed to find container: not found"), call: "exec", want: errdefs.ErrNotFound},
		{name: "empty url", url: "", call: "exec", want: errdefs.ErrUnknown, wantMsg: "empty streaming URL"},
		{name: "bad scheme", url: "unix:///x", call: "attach", want: errdefs.ErrUnknown, wantMsg: "want http(s)"},
		{name: "empty command", call: "exec-empty", want: errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, fs, _ := startStreamFake(t)
			fs.url, fs.err = tt.url, tt.err
			ctx := context.Background()
			var err error
			switch tt.call {
			case "exec":
				_, err = c.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: "ctr1", Cmd: []string{"sh"}, Stdout: true})
			case "exec-empty":
				_, err = c.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: "ctr1", Stdout: true})
			case "attach":
				_, err = c.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: "ctr1", Stdout: true})
			case "portforward":
				_, err = c.PortForward(ctx, "sb1", nil)
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want class %v", err, tt.want)
			}
			if tt.wantMsg != "" && !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.wantMsg)
			}
		})
	}
}
