// Package plainfile opens regular files without the poller's round trip.
//
// os.OpenFile tries to register every file it opens with the runtime's
// network poller: it sets the descriptor non-blocking (two fcntl calls),
// asks epoll to watch it (refused for a regular file) and sets it blocking
// again (two more). On a regular file that is five system calls for
// nothing, and a pod start writes several small files (its hosts file, a
// termination-log file per container, its token volume's files). Open
// opens the file with one openat and wraps the descriptor with os.NewFile
// (one fcntl to read its flags): reads and writes block their thread, as
// they do for a regular file opened by os.OpenFile.
package plainfile

import (
	"errors"
	"os"
	"syscall"
)

// Open opens path as os.OpenFile(path, flag, perm) does (close-on-exec,
// retried when a signal interrupts it, errors as *os.PathError), for
// regular files only: a FIFO, socket or terminal opened here is never
// polled, so reading it blocks a thread.
func Open(path string, flag int, perm os.FileMode) (*os.File, error) {
	for {
		fd, err := syscall.Open(path, flag|syscall.O_CLOEXEC, mode(perm))
		if err == nil {
			return os.NewFile(uintptr(fd), path), nil
		}
		if !errors.Is(err, syscall.EINTR) {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
	}
}

// mode turns perm into the mode bits open(2) takes, as package os does.
func mode(perm os.FileMode) uint32 {
	m := uint32(perm.Perm())
	if perm&os.ModeSetuid != 0 {
		m |= syscall.S_ISUID
	}
	if perm&os.ModeSetgid != 0 {
		m |= syscall.S_ISGID
	}
	if perm&os.ModeSticky != 0 {
		m |= syscall.S_ISVTX
	}
	return m
}
