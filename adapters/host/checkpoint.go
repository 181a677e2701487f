package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FileStore keeps one checkpoint file (the DevicesActor's allocations,
// upstream's kubelet_internal_checkpoint): written to a temporary file,
// synced and renamed over the old one, so a crash leaves either the old
// checkpoint or the new one, never half of one.
type FileStore struct {
	Path string
}

// Load returns the checkpoint's bytes; nil and no error when there is none.
func (s FileStore) Load() ([]byte, error) {
	b, err := os.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", s.Path, err)
	}
	return b, nil
}

// Save replaces the checkpoint with b.
func (s FileStore) Save(b []byte) error {
	dir := filepath.Dir(s.Path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("checkpoint dir %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(s.Path)+".*")
	if err != nil {
		return fmt.Errorf("write checkpoint %s: %w", s.Path, err)
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }() // a no-op after the rename
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.Path)
	}
	if err != nil {
		return fmt.Errorf("write checkpoint %s: %w", s.Path, err)
	}
	return nil
}
