package volume

import (
	"sync"
	"syscall"
)

// setUmask sets the process's umask for a test and returns what restores
// it; the cached umask of the package is read again after each change.
func setUmask(m int) (restore func()) {
	old := syscall.Umask(m)
	umaskOnce = sync.Once{}
	return func() {
		syscall.Umask(old)
		umaskOnce = sync.Once{}
	}
}
