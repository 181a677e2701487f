// Package podfiles is the PodActor's files on the host: the managed
// /etc/hosts and the termination-log files under <root-dir>/pods/<uid>/,
// the termination messages read back from them (or from the container's
// log), and the probe checkpoints under <root-dir>/probes/; and the
// NodeActor's sweep (sweep.go), which removes the pod directories and pod
// log directories of pods gone. Every call does file I/O; the actors make
// them off their mailboxes.
package podfiles

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/internal/plainfile"
	"github.com/actorlet/actorlet/podspec"
)

// Files implements the PodActor's file interfaces for one node. Make it
// once (New) and share it: its checkpoint writer keeps the writes of one
// pod's checkpoint in order across incarnations of the PodActor, and its
// sweeps (Sweep, the NodeActor's) run one at a time.
type Files struct {
	podsDir, probesDir string
	logsDir            string // pod log directories, for Sweep
	removeVolumes      func(volumesDir string) error
	log                *slog.Logger
	cp                 *writer

	sweepMu   sync.Mutex
	sweepBusy map[types.UID]bool // pods whose volumes kept their directory at the last sweep (logged)
}

// New returns the files under podsDir (upstream <root-dir>/pods) and
// probesDir (checkpoints). An empty podsDir: no hosts file and no
// termination log (Hosts and TerminationLog return ""); an empty probesDir:
// no checkpoints (Load finds none, Save and Remove do nothing).
func New(podsDir, probesDir string, log *slog.Logger, opts ...Option) *Files {
	if log == nil {
		log = slog.Default()
	}
	f := &Files{podsDir: podsDir, probesDir: probesDir, log: log,
		cp: &writer{pending: map[string][]byte{}, writing: map[string][]byte{}, busy: map[string]bool{}}}
	for _, o := range opts {
		o(f)
	}
	return f
}

// Hosts writes the pod's managed /etc/hosts (<pods>/<uid>/etc-hosts) and
// returns its path; "" when no pods directory is set. The first write
// (none there yet: a pod's first container) creates the file in place,
// since no container has it yet; a later one (the pod's next container, a
// restart) leaves a file with that content as it is, so the pod's
// containers share it, and replaces another atomically: a container that
// has the old one keeps reading all of it.
func (f *Files) Hosts(uid types.UID, content []byte) (string, error) {
	if f.podsDir == "" {
		return "", nil
	}
	path := filepath.Join(f.podsDir, string(uid), "etc-hosts")
	if err := writeHosts(path, content); err != nil {
		return "", fmt.Errorf("hosts file: %w", err)
	}
	return path, nil
}

// writeHosts writes a hosts file (mode 0644) at path: created in place
// when there is none (one inode, no temporary file and no rename), left
// alone when it holds content, else replaced atomically.
func writeHosts(path string, content []byte) error {
	const perm = 0o644
	fd, err := plainfile.Open(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return err
		}
		fd, err = plainfile.Open(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	}
	if errors.Is(err, fs.ErrExist) {
		if holds(path, content) {
			return nil
		}
		return writeAtomic(path, content, perm)
	}
	if err != nil {
		return err
	}
	_, werr := fd.Write(content)
	merr := fd.Chmod(perm) // the umask may have cleared bits
	cerr := fd.Close()
	if err := errors.Join(werr, merr, cerr); err != nil {
		_ = os.Remove(path) // a later write starts again
		return err
	}
	return nil
}

// holds tells whether path is a regular file (not a symlink) with exactly
// content: a read of one byte more says it.
func holds(path string, content []byte) bool {
	fd, err := plainfile.Open(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer func() { _ = fd.Close() }()
	buf := make([]byte, len(content)+1)
	n, err := io.ReadFull(fd, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false
	}
	return n == len(content) && bytes.Equal(buf[:n], content)
}

// TerminationLog creates the empty host file mounted at a container's
// terminationMessagePath (writable by anyone in the container, as
// upstream) and returns its path; "" when no pods directory is set.
func (f *Files) TerminationLog(uid types.UID, container string, attempt uint32) (string, error) {
	if f.podsDir == "" {
		return "", nil
	}
	path := podspec.TerminationLogPath(f.podsDir, string(uid), container, attempt)
	// The first attempt of a container (most often in a pod started
	// now) finds no directory: made first, rather than after a failed
	// create.
	if err := createEmptyFile(path, attempt == 0); err != nil {
		return "", fmt.Errorf("termination message file: %w", err)
	}
	return path, nil
}

// Termination messages, as upstream: at most 4096 bytes from the file; from
// the log, the last 80 lines and at most 2048 bytes.
const (
	maxTerminationMessageBytes = 4096
	maxTerminationLogLines     = 80
	maxTerminationLogBytes     = 2048
)

// TerminationMessage reads an exited container's termination message: the
// host file mounted at its terminationMessagePath, or with
// FallbackToLogsOnError and a failure, the tail of its log.
func (f *Files) TerminationMessage(c *runtimeapi.ContainerStatus) string {
	path := c.GetAnnotations()[podspec.AnnotationTerminationMsgPath]
	if path != "" {
		for _, m := range c.GetMounts() {
			if m.GetContainerPath() != path || m.GetHostPath() == "" {
				continue
			}
			if msg := readLimited(m.GetHostPath(), maxTerminationMessageBytes); msg != "" {
				return msg
			}
		}
	}
	if c.GetAnnotations()[podspec.AnnotationTerminationMsgPolicy] == string(v1.TerminationMessageFallbackToLogsOnError) &&
		c.ExitCode != 0 && c.GetLogPath() != "" {
		return logTail(c.GetLogPath(), maxTerminationLogLines, maxTerminationLogBytes)
	}
	return ""
}

func (f *Files) checkpointPath(uid types.UID) string {
	if f.probesDir == "" {
		return ""
	}
	return filepath.Join(f.probesDir, string(uid)+".json")
}

// LoadCheckpoint returns the pod's checkpoint: the newest content saved,
// even if not yet on disk. A missing checkpoint is (nil, nil).
func (f *Files) LoadCheckpoint(uid types.UID) ([]byte, error) {
	path := f.checkpointPath(uid)
	if path == "" {
		return nil, nil
	}
	b, err := f.cp.read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// SaveCheckpoint queues the pod's checkpoint for writing (atomically, off
// the caller; the newest content wins) and returns at once.
func (f *Files) SaveCheckpoint(uid types.UID, b []byte) {
	if path := f.checkpointPath(uid); path != "" && b != nil {
		f.cp.put(path, b, f.log)
	}
}

// RemoveCheckpoint queues the removal of the pod's checkpoint.
func (f *Files) RemoveCheckpoint(uid types.UID) {
	if path := f.checkpointPath(uid); path != "" {
		f.cp.put(path, nil, f.log)
	}
}

// Idle reports whether every checkpoint save and remove queued so far is
// done on disk (none waiting, none being written).
func (f *Files) Idle() bool {
	f.cp.mu.Lock()
	defer f.cp.mu.Unlock()
	return len(f.cp.busy) == 0
}

// writer writes checkpoints off the callers: a file per pod, the newest
// content wins, and writes of one path never run out of order.
type writer struct {
	mu      sync.Mutex
	pending map[string][]byte // path -> newest content not yet taken (nil: remove)
	writing map[string][]byte // path -> content being written now
	busy    map[string]bool   // a goroutine is writing this path
}

func (w *writer) put(path string, b []byte, log *slog.Logger) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending[path] = b
	if w.busy[path] {
		return // the running writer picks the newest content up
	}
	w.busy[path] = true
	go w.drain(path, log)
}

// read returns a path's newest content: one still waiting to be written,
// else the file's.
func (w *writer) read(path string) ([]byte, error) {
	w.mu.Lock()
	b, ok := w.pending[path]
	if !ok {
		b, ok = w.writing[path]
	}
	w.mu.Unlock()
	if ok {
		if b == nil {
			return nil, fs.ErrNotExist
		}
		return b, nil
	}
	return os.ReadFile(path)
}

func (w *writer) drain(path string, log *slog.Logger) {
	for {
		w.mu.Lock()
		delete(w.writing, path)
		b, ok := w.pending[path]
		if !ok {
			delete(w.busy, path)
			w.mu.Unlock()
			return
		}
		delete(w.pending, path)
		w.writing[path] = b
		w.mu.Unlock()
		var err error
		if b == nil {
			err = os.Remove(path)
			if errors.Is(err, fs.ErrNotExist) {
				err = nil
			}
		} else {
			err = writeAtomic(path, b, 0o600)
		}
		if err != nil {
			log.Warn("probe checkpoint", "path", path, "err", err)
		}
	}
}

// writeAtomic writes b to path, with mode perm, through a temporary file
// in the same directory and a rename: a reader sees the old file or the
// whole new one, already with its mode. The directory (0750) is made only
// when missing, after a create that failed for it.
func writeAtomic(path string, b []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	pattern := "." + filepath.Base(path) + ".tmp*"
	f, err := os.CreateTemp(dir, pattern)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
		f, err = os.CreateTemp(dir, pattern)
	}
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	var merr error
	if perm != 0o600 { // CreateTemp's mode, whatever the umask
		merr = f.Chmod(perm)
	}
	cerr := f.Close()
	if err := errors.Join(werr, merr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	// syscall.Rename, not os.Rename: the latter first stats path to
	// refuse replacing a directory, which rename(2) refuses as well.
	if err := syscall.Rename(f.Name(), path); err != nil {
		_ = os.Remove(f.Name())
		return &os.LinkError{Op: "rename", Old: f.Name(), New: path, Err: err}
	}
	return nil
}

func readLimited(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return string(b)
}

// logTail returns the content of the last lines of a CRI log file (partial
// lines joined), at most maxBytes from the end.
func logTail(path string, lines, maxBytes int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	const window = 64 * 1024
	if st, err := f.Stat(); err == nil && st.Size() > window {
		_, _ = f.Seek(st.Size()-window, io.SeekStart)
	}
	var out []string
	var partial strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// <timestamp> <stream> <P|F> <content>
		parts := bytes.SplitN(sc.Bytes(), []byte(" "), 4)
		if len(parts) < 3 {
			continue
		}
		content := ""
		if len(parts) == 4 {
			content = string(parts[3])
		}
		partial.WriteString(content)
		if string(parts[2]) == "P" {
			continue
		}
		out = append(out, partial.String()+"\n")
		partial.Reset()
	}
	if partial.Len() > 0 {
		// The program's last output had no newline ("echo -n DONE"): a
		// partial line with no closing entry, kept as written.
		out = append(out, partial.String())
	}
	if len(out) > lines {
		out = out[len(out)-lines:]
	}
	s := strings.Join(out, "")
	if len(s) > maxBytes {
		s = s[len(s)-maxBytes:]
	}
	return s
}

// createEmptyFile creates path (and its directory) as an empty file anyone in
// the container can write, as upstream does for the termination log.
// dirFirst: the directory is likely missing, make it before the create
// (one mkdir less than after a create that fails); else it is made only
// when the create fails for it.
func createEmptyFile(path string, dirFirst bool) error {
	dir := filepath.Dir(path)
	if dirFirst {
		if err := mkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	f, err := plainfile.Open(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o666)
	if errors.Is(err, fs.ErrNotExist) && !dirFirst {
		if err := mkdirAll(dir, 0o755); err != nil {
			return err
		}
		f, err = plainfile.Open(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o666)
	}
	if err != nil {
		return err
	}
	// On the open file: the umask may have cleared bits of 0666.
	merr := f.Chmod(0o666)
	return errors.Join(merr, f.Close())
}

// mkdirAll creates dir and its missing parents with perm (under the
// umask) as os.MkdirAll, trying dir first and climbing only when its
// parent is missing: a directory whose parent exists costs one mkdir and
// no stat.
func mkdirAll(dir string, perm os.FileMode) error {
	err := os.Mkdir(dir, perm)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return nil
	}
	parent := filepath.Dir(dir)
	if !errors.Is(err, fs.ErrNotExist) || parent == dir {
		return err
	}
	if err := mkdirAll(parent, perm); err != nil {
		return err
	}
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}
