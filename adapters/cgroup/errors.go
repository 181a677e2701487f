package cgroup

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/actorlet/actorlet/errdefs"
)

// errnoClass is the errdefs class of an errno from a cgroup file.
func errnoClass(errno unix.Errno) error {
	switch errno {
	case unix.ENOENT, unix.ENODEV:
		return errdefs.ErrNotFound
	case unix.EBUSY, unix.EPERM, unix.EACCES, unix.EROFS, unix.ENOTEMPTY:
		return errdefs.ErrFailedPrecondition
	case unix.EINVAL, unix.ERANGE, unix.EOPNOTSUPP:
		return errdefs.ErrInvalidArgument
	case unix.ENOSPC, unix.EAGAIN:
		return errdefs.ErrResourceExhausted
	case unix.EEXIST:
		return errdefs.ErrAlreadyExists
	}
	return errdefs.ErrUnknown
}

// classifyErr marks err with the class of the errno it carries
// (ErrUnknown without one).
func classifyErr(err error) error {
	if err == nil {
		return nil
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errdefs.Wrap(errnoClass(errno), err)
	}
	return errdefs.Wrap(errdefs.ErrUnknown, err)
}

// writeError is a cgroup write that failed: which cgroup, which files and
// values, where, and why. It unwraps to its errdefs class, the errno
// (unix.EBUSY, ...) where one is known and the library's error.
type writeError struct {
	cgroup string // the name as a cgroupfs path
	dir    string // the directory written
	what   string // "memory.limit_in_bytes=1048576"
	class  error
	errno  unix.Errno // 0 when unknown
	reason string     // what the errno means here, if more than its text
	err    error
}

func (e *writeError) Error() string {
	msg := fmt.Sprintf("cgroup %s: writing %s in %s: %v", e.cgroup, e.what, e.dir, e.err)
	if e.reason != "" {
		msg += " (" + e.reason + ")"
	}
	return msg
}

func (e *writeError) Unwrap() []error {
	errs := []error{e.class}
	if e.errno != 0 {
		errs = append(errs, e.errno)
	}
	return append(errs, e.err)
}

// newWriteError classifies a failed write of what in dir by the errno err
// carries; reason, when not "", says what it means.
func newWriteError(cgroup, dir, what string, err error) *writeError {
	e := &writeError{cgroup: cgroup, dir: dir, what: what, class: errdefs.ErrUnknown, err: err}
	if errors.As(err, &e.errno) {
		e.class = errnoClass(e.errno)
		if e.errno == unix.EBUSY {
			e.reason = "EBUSY: the kernel refused the value in the cgroup's current state"
		}
		if e.errno == unix.EINVAL {
			e.reason = "EINVAL: the kernel refused the value"
		}
		if e.errno == unix.ENOSPC {
			e.reason = "ENOSPC"
		}
	}
	return e
}
