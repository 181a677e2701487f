package podfiles

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Option configures Files.
type Option func(*Files)

// WithPodLogsDir is the root of the pods' log directories
// (<namespace>_<name>_<uid>, podspec.PodLogDir): Sweep removes those of
// pods gone. Without it Sweep leaves logs alone.
func WithPodLogsDir(dir string) Option {
	return func(f *Files) { f.logsDir = dir }
}

// WithVolumes is how Sweep tears down the volumes of a pod gone (a
// pod's volumes/ directory: the VolumeActor's teardown, which unmounts
// their tmpfs first and never removes through a mount), as upstream's
// volume manager tears down the volumes of the pods its housekeeping
// finds orphaned. It is needed after actorlet restarted: a pod that went
// meanwhile (deleted while actorlet was down, with nothing left in the
// runtime) gets no PodActor, and so no teardown from the VolumeActor.
// Without it, Sweep keeps a pod directory whose volumes/ holds anything.
func WithVolumes(remove func(volumesDir string) error) Option {
	return func(f *Files) { f.removeVolumes = remove }
}

// sweepMinAge: an entry changed more recently than this is left for the
// next sweep. The caller's keep set is computed before the sweep runs, so
// a pod admitted meanwhile (its directory new, or an old one of the same
// UID written again) is not in it.
const sweepMinAge = 2 * time.Second

// Sweep removes what pods not in keep left on disk, as upstream's
// housekeeping (cleanupOrphanedPodDirs) and container GC
// (evictPodLogsDirectories) do: <pods>/<uid> and <logs>/<ns>_<name>_<uid>.
// It touches only real directories directly under those two whose names
// are its own (a UID; namespace_name_UID) and never follows a symlink;
// a pod directory whose volumes/ is not empty is removed once they are
// torn down (WithVolumes; without it, or where it fails, the directory
// stays, logged once per pod); an entry changed in the last sweepMinAge
// stays. Sweeps run one at a time. It returns the paths removed and
// the errors of the others.
func (f *Files) Sweep(ctx context.Context, keep map[types.UID]bool) ([]string, error) {
	f.sweepMu.Lock()
	defer f.sweepMu.Unlock()
	now := time.Now()
	var removed []string
	var errs []error
	busy := map[types.UID]bool{}
	for _, root := range []struct {
		dir   string
		uid   func(name string) (types.UID, bool)
		isPod bool
	}{
		{dir: f.podsDir, uid: podDirUID, isPod: true},
		{dir: f.logsDir, uid: logDirUID},
	} {
		if root.dir == "" {
			continue
		}
		entries, err := os.ReadDir(root.dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return removed, errors.Join(append(errs, err)...)
			}
			uid, ok := root.uid(e.Name())
			if !ok || keep[uid] || !e.IsDir() { // IsDir is false for a symlink
				continue
			}
			path := filepath.Join(root.dir, e.Name())
			st, err := os.Lstat(path)
			if err != nil || !st.IsDir() || now.Sub(st.ModTime()) < sweepMinAge {
				continue
			}
			if root.isPod {
				if held, err := volumesHeld(path); held {
					if err == nil && f.removeVolumes != nil {
						err = f.removeVolumes(filepath.Join(path, "volumes"))
					}
					if err != nil || f.removeVolumes == nil {
						busy[uid] = true
						if !f.sweepBusy[uid] {
							f.log.Info("pod directory kept: its volumes are not torn down", "path", path, "err", err)
						}
						continue
					}
				}
			}
			if err := os.RemoveAll(path); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", path, err))
				continue
			}
			removed = append(removed, path)
		}
	}
	f.sweepBusy = busy
	return removed, errors.Join(errs...)
}

// volumesHeld reports whether a pod directory's volumes/ holds anything
// (or is not a plain directory, or cannot be read).
func volumesHeld(podDir string) (bool, error) {
	dir := filepath.Join(podDir, "volumes")
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	if !st.IsDir() {
		return true, fmt.Errorf("%s is not a directory", dir)
	}
	d, err := os.Open(dir)
	if err != nil {
		return true, err
	}
	defer func() { _ = d.Close() }()
	names, err := d.Readdirnames(1)
	if errors.Is(err, io.EOF) && len(names) == 0 {
		return false, nil
	}
	return true, err
}

// podDirUID: a pod directory is named by its pod's UID.
func podDirUID(name string) (types.UID, bool) {
	return types.UID(name), uidShaped(name)
}

// logDirUID: a pod log directory is named <namespace>_<name>_<uid>.
func logDirUID(name string) (types.UID, bool) {
	parts := strings.Split(name, "_")
	if len(parts) != 3 || !uidShaped(parts[2]) ||
		len(validation.IsDNS1123Label(parts[0])) > 0 || len(validation.IsDNS1123Subdomain(parts[1])) > 0 {
		return "", false
	}
	return types.UID(parts[2]), true
}

// uidShaped: letters, digits and '-', starting with a letter or digit, at
// most 128 (UUIDs of the API server, the hex hashes of static pods, the
// UIDs given to pushed pods).
func uidShaped(s string) bool {
	if s == "" || len(s) > 128 || s[0] == '-' {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-':
		default:
			return false
		}
	}
	return true
}
