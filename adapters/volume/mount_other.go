//go:build !linux

package volume

import (
	"errors"
	"fmt"
	"os"
)

var errNoMount = errors.New("tmpfs mounts need Linux")

func isMountPoint(string) (bool, error) { return false, nil }

func isTmpfsMount(string) (bool, error) { return false, nil }

func mountTmpfs(dir string, _ int64, _ os.FileMode) error {
	return fmt.Errorf("mount tmpfs on %s: %w", dir, errNoMount)
}

// mountRefused: off Linux nothing is ever mounted.
func mountRefused(err error) bool { return errors.Is(err, errNoMount) }

// unmountVolumes has nothing to unmount: nothing is mounted off Linux.
func unmountVolumes(string) error { return nil }

func removeTree(dir string) error { return os.RemoveAll(dir) }

// unmountUnder has nothing to unmount: nothing is mounted off Linux.
func unmountUnder(string) error { return nil }
