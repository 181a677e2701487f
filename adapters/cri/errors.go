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
	case codes.DeadlineExceeded:
		return errdefs.Wrap(errdefs.ErrDeadlineExceeded, withCause{err, context.DeadlineExceeded})
	case codes.Canceled:
		return errdefs.Wrap(errdefs.ErrUnknown, withCause{err, context.Canceled})
	case codes.Unknown:
		return errdefs.Wrap(classifyUnknown(op, st.Message()), err)
	}
	if class, ok := codeClasses[st.Code()]; ok {
		return errdefs.Wrap(class, err)
	}
	return errdefs.Wrap(errdefs.ErrUnknown, err)
}

// codeClasses are the gRPC codes that name a class of their own.
var codeClasses = map[codes.Code]error{
	codes.NotFound:           errdefs.ErrNotFound,
	codes.AlreadyExists:      errdefs.ErrAlreadyExists,
	codes.InvalidArgument:    errdefs.ErrInvalidArgument,
	codes.Unavailable:        errdefs.ErrUnavailable,
	codes.Unimplemented:      errdefs.ErrUnimplemented,
	codes.FailedPrecondition: errdefs.ErrFailedPrecondition,
	codes.ResourceExhausted:  errdefs.ErrResourceExhausted,
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
