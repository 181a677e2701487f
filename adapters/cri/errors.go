package cri

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/actorlet/actorlet/errdefs"
)

// classify maps an error from a CRI call to an errdefs class. It is the only
// place in actorlet that looks at gRPC codes or runtime error strings; callers
// branch with errors.Is on the errdefs sentinels. The original error stays in
// the chain (status.Code and the message still work), and a deadline or a
// cancellation also matches context.DeadlineExceeded or context.Canceled.
//
// op is the operation name (see the op* constants); it scopes the containerd
// string cases that apply to one call only.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	// Already classified (e.g. a local validation error): leave it.
	if isClassified(err) {
		return err
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return errdefs.Wrap(errdefs.ErrDeadlineExceeded, err)
	case errors.Is(err, context.Canceled):
		return errdefs.Wrap(errdefs.ErrUnknown, err)
	}
	st, ok := status.FromError(err)
	if !ok {
		return errdefs.Wrap(errdefs.ErrUnknown, err)
	}
	switch st.Code() {
	case codes.NotFound:
		return errdefs.Wrap(errdefs.ErrNotFound, err)
	case codes.AlreadyExists:
		return errdefs.Wrap(errdefs.ErrAlreadyExists, err)
	case codes.InvalidArgument:
		return errdefs.Wrap(errdefs.ErrInvalidArgument, err)
	case codes.Unavailable:
		return errdefs.Wrap(errdefs.ErrUnavailable, err)
	case codes.DeadlineExceeded:
		return errdefs.Wrap(errdefs.ErrDeadlineExceeded, withCause{err, context.DeadlineExceeded})
	case codes.Canceled:
		return errdefs.Wrap(errdefs.ErrUnknown, withCause{err, context.Canceled})
	case codes.Unimplemented:
		return errdefs.Wrap(errdefs.ErrUnimplemented, err)
	case codes.FailedPrecondition:
		return errdefs.Wrap(errdefs.ErrFailedPrecondition, err)
	case codes.ResourceExhausted:
		return errdefs.Wrap(errdefs.ErrResourceExhausted, err)
	case codes.Unknown:
		return errdefs.Wrap(classifyUnknown(op, st.Message()), err)
	default:
		return errdefs.Wrap(errdefs.ErrUnknown, err)
	}
}

// classifyUnknown handles runtimes (containerd 1.6) that return codes.Unknown
// with a meaningful message.
func classifyUnknown(op, msg string) error {
	switch {
	case (op == opRunPodSandbox || op == opCreateContainer) && strings.Contains(msg, "is reserved for"):
		// containerd: `failed to reserve container name "...": name "..." is reserved for "<id>"`
		return errdefs.ErrAlreadyExists
	case strings.Contains(msg, "not found"):
		return errdefs.ErrNotFound
	default:
		return errdefs.ErrUnknown
	}
}

var classes = []error{
	errdefs.ErrNotFound, errdefs.ErrAlreadyExists, errdefs.ErrInvalidArgument,
	errdefs.ErrUnavailable, errdefs.ErrDeadlineExceeded, errdefs.ErrUnimplemented,
	errdefs.ErrFailedPrecondition, errdefs.ErrResourceExhausted, errdefs.ErrUnknown,
}

func isClassified(err error) bool {
	for _, c := range classes {
		if errors.Is(err, c) {
			return true
		}
	}
	return false
}

// withCause keeps err's message and adds cause to the chain.
type withCause struct {
	err   error
	cause error
}

func (w withCause) Error() string   { return w.err.Error() }
func (w withCause) Unwrap() []error { return []error{w.err, w.cause} }
