// Package errdefs holds the error classes shared by adapters and actors.
//
// Outbound adapters classify the errors of their I/O once (a gRPC code, an
// HTTP status, an errno) by wrapping them with one of these sentinels; actors
// branch with errors.Is and never look at transport details. The package has
// no dependencies so that both sides may import it without breaking the import
// rules in docs/DESIGN.md.
package errdefs

import "errors"

// Error classes. Wrap with fmt.Errorf("%w: ...", ErrNotFound) or Wrap.
var (
	ErrNotFound           = errors.New("not found")
	ErrAlreadyExists      = errors.New("already exists")
	ErrInvalidArgument    = errors.New("invalid argument")
	ErrUnavailable        = errors.New("unavailable")
	ErrDeadlineExceeded   = errors.New("deadline exceeded")
	ErrUnimplemented      = errors.New("unimplemented")
	ErrFailedPrecondition = errors.New("failed precondition")
	ErrResourceExhausted  = errors.New("resource exhausted")
	ErrUnknown            = errors.New("unknown")
)

// classed joins a class sentinel and the original error so that errors.Is
// matches both, while Error() keeps the original text.
type classed struct {
	class error
	err   error
}

func (c *classed) Error() string   { return c.err.Error() }
func (c *classed) Unwrap() []error { return []error{c.class, c.err} }

// Wrap marks err as belonging to class. A nil err stays nil.
func Wrap(class, err error) error {
	if err == nil {
		return nil
	}
	return &classed{class: class, err: err}
}

// IsNotFound reports whether err is of class ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsAlreadyExists reports whether err is of class ErrAlreadyExists.
func IsAlreadyExists(err error) bool { return errors.Is(err, ErrAlreadyExists) }

// IsUnavailable reports whether err is of class ErrUnavailable.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// ErrConflict is an optimistic-concurrency conflict (a stale resource
// version or a UID precondition that failed).
var ErrConflict = errors.New("conflict")

// ErrForbidden is a request the server refused to authorize.
var ErrForbidden = errors.New("forbidden")
