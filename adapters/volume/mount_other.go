//go:build !linux

package volume

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

var errNoMount = errors.New("tmpfs mounts need Linux")

func isTmpfsMount(string) (bool, error) { return false, nil }

func mountTmpfs(dir string, _ int64) error {
	return fmt.Errorf("mount tmpfs on %s: %w", dir, errNoMount)
}

// unmountUnder has nothing to unmount: nothing is mounted off Linux.
func unmountUnder(dir string) error {
	_, err := os.Stat(filepath.Clean(dir))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
