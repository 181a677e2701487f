package cri

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/actorlet/actorlet/errdefs"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		op   string
		err  error
		want error
	}{
		{name: "nil", op: opStartContainer, err: nil, want: nil},
		{name: "not found", op: opContainerStatus, err: status.Error(codes.NotFound, "container x"), want: errdefs.ErrNotFound},
		{name: "already exists", op: opCreateContainer, err: status.Error(codes.AlreadyExists, "x"), want: errdefs.ErrAlreadyExists},
		{name: "invalid argument", op: opRunPodSandbox, err: status.Error(codes.InvalidArgument, "x"), want: errdefs.ErrInvalidArgument},
		{name: "unavailable", op: opListContainers, err: status.Error(codes.Unavailable, "connection refused"), want: errdefs.ErrUnavailable},
		{name: "deadline exceeded", op: opListContainers, err: status.Error(codes.DeadlineExceeded, "x"), want: errdefs.ErrDeadlineExceeded},
		{name: "unimplemented", op: opStatus, err: status.Error(codes.Unimplemented, "x"), want: errdefs.ErrUnimplemented},
		{name: "failed precondition", op: opStartContainer, err: status.Error(codes.FailedPrecondition, "x"), want: errdefs.ErrFailedPrecondition},
		{name: "resource exhausted", op: opPullImage, err: status.Error(codes.ResourceExhausted, "x"), want: errdefs.ErrResourceExhausted},
		{name: "internal", op: opStartContainer, err: status.Error(codes.Internal, "x"), want: errdefs.ErrUnknown},
		{name: "permission denied", op: opStartContainer, err: status.Error(codes.PermissionDenied, "x"), want: errdefs.ErrUnknown},
		{name: "canceled", op: opStartContainer, err: status.Error(codes.Canceled, "x"), want: errdefs.ErrUnknown},
		{name: "plain error", op: opStartContainer, err: errors.New("boom"), want: errdefs.ErrUnknown},
		{name: "context deadline", op: opStartContainer, err: fmt.Errorf("wrapped: %w", context.DeadlineExceeded), want: errdefs.ErrDeadlineExceeded},
		{
			name: "containerd container name reserved",
			op:   opCreateContainer,
			err: status.Error(codes.Unknown, `failed to reserve container name "httpd_pod_default_uid_0": `+
				`name "httpd_pod_default_uid_0" is reserved for "4b2c0f6e"`),
			want: errdefs.ErrAlreadyExists,
		},
		{
			name: "containerd sandbox name reserved",
			op:   opRunPodSandbox,
			err:  status.Error(codes.Unknown, `failed to reserve sandbox name "pod_default_uid_0": name "pod_default_uid_0" is reserved for "9f0e"`),
			want: errdefs.ErrAlreadyExists,
		},
		{
			name: "reserved text in another operation stays unknown",
			op:   opStartContainer,
			err:  status.Error(codes.Unknown, `something is reserved for "x"`),
			want: errdefs.ErrUnknown,
		},
		{
			name: "containerd unknown not found",
			op:   opContainerStatus,
			err:  status.Error(codes.Unknown, `an error occurred when try to find container "abc": not found`),
			want: errdefs.ErrNotFound,
		},
		{name: "unknown other", op: opStartContainer, err: status.Error(codes.Unknown, "failed to create shim task"), want: errdefs.ErrUnknown},
		{name: "already classified", op: opStartContainer, err: errdefs.Wrap(errdefs.ErrInvalidArgument, errors.New("x")), want: errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := classify(tt.op, tt.err)
			if tt.want == nil {
				if got != nil {
					t.Fatalf("classify(nil) = %v", got)
				}
				return
			}
			if !errors.Is(got, tt.want) {
				t.Fatalf("classify(%v) = %v, want class %v", tt.err, got, tt.want)
			}
			for _, c := range classes {
				if c != tt.want && errors.Is(got, c) {
					t.Errorf("classify(%v) also matches class %v", tt.err, c)
				}
			}
			if got.Error() != tt.err.Error() {
				t.Errorf("message changed: %q, want %q", got.Error(), tt.err.Error())
			}
			if s, ok := status.FromError(tt.err); ok && status.Code(got) != s.Code() {
				t.Errorf("status.Code = %v, want %v", status.Code(got), s.Code())
			}
		})
	}
}

func TestClassifyKeepsContextCause(t *testing.T) {
	if err := classify(opListContainers, status.Error(codes.DeadlineExceeded, "x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("DeadlineExceeded: %v does not match context.DeadlineExceeded", err)
	}
	if err := classify(opListContainers, status.Error(codes.Canceled, "x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Canceled: %v does not match context.Canceled", err)
	}
}
