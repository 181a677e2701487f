package podfiles_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/adapters/podfiles"
	"github.com/actorlet/actorlet/internal/actortest"
	"github.com/actorlet/actorlet/podspec"
)

var quiet = slog.New(slog.DiscardHandler)

// names lists a directory's entries.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// aFile returns a path that is a regular file: a directory under it cannot
// be made.
func aFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return st.Mode().Perm()
}

// --- hosts file ---

func TestHosts(t *testing.T) {
	const uid = types.UID("u1")
	tests := []struct {
		name    string
		pods    func(t *testing.T) string
		writes  []string
		want    string // content on disk after the writes
		noFile  bool   // no pods directory: nothing written, path ""
		wantErr bool
	}{
		{
			name:   "writes the managed hosts file",
			pods:   func(t *testing.T) string { return t.TempDir() },
			writes: []string{"127.0.0.1\tlocalhost\n10.88.0.5\tweb-0\n"},
			want:   "127.0.0.1\tlocalhost\n10.88.0.5\tweb-0\n",
		},
		{
			name:   "a rewrite replaces the whole file",
			pods:   func(t *testing.T) string { return t.TempDir() },
			writes: []string{"127.0.0.1\tlocalhost\n10.88.0.5\ta-long-host-name\n", "127.0.0.1\tlocalhost\n"},
			want:   "127.0.0.1\tlocalhost\n",
		},
		{
			name:   "an empty content is an empty file",
			pods:   func(t *testing.T) string { return t.TempDir() },
			writes: []string{""},
			want:   "",
		},
		{
			name:   "no pods directory: nothing written",
			pods:   func(*testing.T) string { return "" },
			writes: []string{"127.0.0.1\tlocalhost\n"},
			noFile: true,
		},
		{
			name:    "a pods directory that cannot be made: an error",
			pods:    aFile,
			writes:  []string{"127.0.0.1\tlocalhost\n"},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := tt.pods(t)
			f := podfiles.New(pods, "", quiet)
			var path string
			var err error
			for _, w := range tt.writes {
				path, err = f.Hosts(uid, []byte(w))
				if err != nil {
					break
				}
			}
			if !fileMade(t, "Hosts", path, err, tt.wantErr, tt.noFile) {
				return
			}
			if want := filepath.Join(pods, string(uid), "etc-hosts"); path != want {
				t.Errorf("path = %q, want %q", path, want)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("content = %q, want %q", b, tt.want)
			}
			if m := mode(t, path); m != 0o644 {
				t.Errorf("mode = %v, want 0644", m)
			}
			if got := names(t, filepath.Dir(path)); len(got) != 1 || got[0] != "etc-hosts" {
				t.Errorf("pod directory holds %v, want only etc-hosts (no temporary file left)", got)
			}
		})
	}
}

// fileMade checks what call (a podfiles method) answered: an error where
// wantErr, no file (path "") where noFile, else a path to check further
// (it says whether there is one).
func fileMade(t *testing.T, call, path string, err error, wantErr, noFile bool) bool {
	t.Helper()
	switch {
	case wantErr:
		if err == nil {
			t.Fatalf("%s = %q, nil; want an error", call, path)
		}
		return false
	case err != nil:
		t.Fatalf("%s: %v", call, err)
	case noFile:
		if path != "" {
			t.Fatalf("%s = %q with no pods directory, want \"\"", call, path)
		}
		return false
	}
	return true
}

// A rewrite never changes the file in place: a reader that opened the old
// file keeps reading all of the old content.
func TestHostsRewriteIsAtomic(t *testing.T) {
	f := podfiles.New(t.TempDir(), "", quiet)
	old := "127.0.0.1\tlocalhost\n10.88.0.5\told-name\n"
	path, err := f.Hosts("u1", []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	if _, err := f.Hosts("u1", []byte("127.0.0.1\tlocalhost\n")); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := got.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	if got.String() != old {
		t.Errorf("the old file now reads %q, want %q", got.String(), old)
	}
}

// The pod's next container (or a restart) asks for the same content: the
// file is left as it is, so the containers share one file; another
// content replaces it.
func TestHostsSameContentKeepsTheFile(t *testing.T) {
	f := podfiles.New(t.TempDir(), "", quiet)
	content := []byte("127.0.0.1\tlocalhost\n10.88.0.5\tweb-0\n")
	stat := func(path string) os.FileInfo {
		t.Helper()
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	path, err := f.Hosts("u1", content)
	if err != nil {
		t.Fatal(err)
	}
	first := stat(path)
	if _, err := f.Hosts("u1", content); err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(first, stat(path)) {
		t.Error("the same content was written again into another file")
	}
	// A longer and a shorter content: each replaces the file.
	for _, c := range []string{string(content) + "10.88.0.6\tweb-1\n", "127.0.0.1\tlocalhost\n"} {
		before := stat(path)
		if _, err := f.Hosts("u1", []byte(c)); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != c {
			t.Fatalf("content = %q (%v), want %q", b, err, c)
		}
		if os.SameFile(before, stat(path)) {
			t.Error("another content was written in place")
		}
	}
}

// --- termination log ---

func TestTerminationLog(t *testing.T) {
	const uid = types.UID("u1")
	tests := []struct {
		name      string
		pods      func(t *testing.T) string
		container string
		attempt   uint32
		left      string // content left by an earlier run at the path
		noFile    bool
		wantErr   bool
	}{
		{
			name:      "creates an empty file anyone can write",
			pods:      func(t *testing.T) string { return t.TempDir() },
			container: "app",
			attempt:   0,
		},
		{
			name:      "one file per attempt",
			pods:      func(t *testing.T) string { return t.TempDir() },
			container: "app",
			attempt:   3,
		},
		{
			name:      "a file left by an earlier run is emptied",
			pods:      func(t *testing.T) string { return t.TempDir() },
			container: "app",
			attempt:   1,
			left:      "old message",
		},
		{
			name:      "no pods directory: nothing created",
			pods:      func(*testing.T) string { return "" },
			container: "app",
			noFile:    true,
		},
		{
			name:      "a pods directory that cannot be made: an error",
			pods:      aFile,
			container: "app",
			wantErr:   true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := tt.pods(t)
			want := filepath.Join(pods, string(uid), "containers", tt.container, fmt.Sprint(tt.attempt))
			if tt.left != "" {
				if err := os.MkdirAll(filepath.Dir(want), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(want, []byte(tt.left), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			path, err := podfiles.New(pods, "", quiet).TerminationLog(uid, tt.container, tt.attempt)
			if !fileMade(t, "TerminationLog", path, err, tt.wantErr, tt.noFile) {
				return
			}
			if path != want || path != podspec.TerminationLogPath(pods, string(uid), tt.container, tt.attempt) {
				t.Errorf("path = %q, want %q", path, want)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != 0 {
				t.Errorf("content = %q, want empty", b)
			}
			if m := mode(t, path); m != 0o666 {
				t.Errorf("mode = %v, want 0666", m)
			}
		})
	}
}

// --- termination message ---

// criLog is a CRI log file's content: each entry is "<tag> <content>"
// (tag F or P), written on stdout.
func criLog(entries ...string) string {
	var b strings.Builder
	for _, e := range entries {
		b.WriteString("2026-01-01T00:00:00.000000000Z stdout " + e + "\n")
	}
	return b.String()
}

// full returns n full log lines "line i" (i from 0) and the content of the
// last k of them.
func full(n, k int) (entries []string, tail string) {
	var b strings.Builder
	for i := range n {
		entries = append(entries, fmt.Sprintf("F line %d", i))
		if i >= n-k {
			fmt.Fprintf(&b, "line %d\n", i)
		}
	}
	return entries, b.String()
}

func TestTerminationMessage(t *testing.T) {
	const msgPath = "/dev/termination-log"
	hundred, last80 := full(100, 80)
	var long []string
	var longContent strings.Builder
	for i := range 40 {
		line := fmt.Sprintf("%02d%s", i, strings.Repeat("x", 98))
		long = append(long, "F "+line)
		longContent.WriteString(line + "\n")
	}
	big, bigTail := full(3000, 80)
	huge := strings.Repeat("m", 5000)
	fallback := string(v1.TerminationMessageFallbackToLogsOnError)
	file := string(v1.TerminationMessageReadFile)
	str := func(s string) *string { return &s }

	tests := []struct {
		name       string
		noAnnot    bool    // no terminationMessagePath annotation
		mountAt    string  // the container path the host file is mounted at; msgPath when ""
		message    *string // the host file's content; nil: no such file
		policy     string
		exitCode   int32
		log        *string // the CRI log's content; nil: no log path
		missingLog bool    // a log path whose file does not exist
		want       string
	}{
		{
			name:    "the message file",
			message: str("disk full\n"),
			want:    "disk full\n",
		},
		{
			name:    "at most 4096 bytes of the message file",
			message: str(huge),
			want:    huge[:4096],
		},
		{
			name:     "an empty message file: no message",
			message:  str(""),
			policy:   file,
			exitCode: 1,
			log:      str(criLog("F boom")),
			want:     "",
		},
		{
			name:    "no annotation: no message",
			noAnnot: true,
			message: str("disk full\n"),
			want:    "",
		},
		{
			name:    "nothing mounted at the path: no message",
			mountAt: "/other",
			message: str("disk full\n"),
			want:    "",
		},
		{
			name: "the mounted file is missing: no message",
			want: "",
		},
		{
			name:     "FallbackToLogsOnError, a failure and an empty file: the log's tail",
			message:  str(""),
			policy:   fallback,
			exitCode: 2,
			log:      str(criLog("F starting", "F panic: boom")),
			want:     "starting\npanic: boom\n",
		},
		{
			name:     "FallbackToLogsOnError, a failure and no file: the log's tail",
			policy:   fallback,
			exitCode: 137,
			log:      str(criLog("F killed")),
			want:     "killed\n",
		},
		{
			name:     "FallbackToLogsOnError and a last line with no newline (echo -n): kept as written",
			policy:   fallback,
			exitCode: 1,
			log:      str(criLog("F first", "P DO", "P NE")),
			want:     "first\nDONE",
		},
		{
			name:     "FallbackToLogsOnError: the message file wins over the log",
			message:  str("disk full\n"),
			policy:   fallback,
			exitCode: 1,
			log:      str(criLog("F boom")),
			want:     "disk full\n",
		},
		{
			name:     "FallbackToLogsOnError and exit code 0: no log",
			message:  str(""),
			policy:   fallback,
			exitCode: 0,
			log:      str(criLog("F done")),
			want:     "",
		},
		{
			name:     "File policy and a failure: no log",
			message:  str(""),
			policy:   file,
			exitCode: 1,
			log:      str(criLog("F boom")),
			want:     "",
		},
		{
			name:     "FallbackToLogsOnError and no log path: no message",
			policy:   fallback,
			exitCode: 1,
			want:     "",
		},
		{
			name:       "FallbackToLogsOnError and a missing log: no message",
			policy:     fallback,
			exitCode:   1,
			missingLog: true,
			want:       "",
		},
		{
			name:     "the last 80 lines of the log",
			policy:   fallback,
			exitCode: 1,
			log:      str(criLog(hundred...)),
			want:     last80,
		},
		{
			name:     "at most 2048 bytes, from the log's end",
			policy:   fallback,
			exitCode: 1,
			log:      str(criLog(long...)),
			want:     longContent.String()[longContent.Len()-2048:],
		},
		{
			name:     "partial lines are joined",
			policy:   fallback,
			exitCode: 1,
			log:      str(criLog("P hel", "P lo ", "F world", "F bye")),
			want:     "hello world\nbye\n",
		},
		{
			name:     "stderr lines count, malformed lines are skipped, empty lines kept",
			policy:   fallback,
			exitCode: 1,
			log: str("2026-01-01T00:00:00Z stdout F one\n" +
				"garbage\n" +
				"2026-01-01T00:00:01Z stderr F two words\n" +
				"2026-01-01T00:00:02Z stderr F\n" +
				"2026-01-01T00:00:03Z stdout F three\n"),
			want: "one\ntwo words\n\nthree\n",
		},
		{
			name:     "a log larger than what is read: still its last 80 lines",
			policy:   fallback,
			exitCode: 1,
			log:      str(criLog(big...)),
			want:     bigTail,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			hostFile := filepath.Join(dir, "termination-log")
			if tt.message != nil {
				if err := os.WriteFile(hostFile, []byte(*tt.message), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			mountAt := tt.mountAt
			if mountAt == "" {
				mountAt = msgPath
			}
			c := &runtimeapi.ContainerStatus{
				ExitCode:    tt.exitCode,
				Annotations: map[string]string{},
				Mounts: []*runtimeapi.Mount{
					{ContainerPath: "/etc/hosts", HostPath: filepath.Join(dir, "etc-hosts")},
					{ContainerPath: mountAt, HostPath: hostFile},
				},
			}
			if !tt.noAnnot {
				c.Annotations[podspec.AnnotationTerminationMsgPath] = msgPath
			}
			if tt.policy != "" {
				c.Annotations[podspec.AnnotationTerminationMsgPolicy] = tt.policy
			}
			switch {
			case tt.log != nil:
				c.LogPath = filepath.Join(dir, "0.log")
				if err := os.WriteFile(c.LogPath, []byte(*tt.log), 0o600); err != nil {
					t.Fatal(err)
				}
			case tt.missingLog:
				c.LogPath = filepath.Join(dir, "missing.log")
			}
			// Reading a message needs no pods or probes directory.
			if got := podfiles.New("", "", quiet).TerminationMessage(c); got != tt.want {
				t.Errorf("message = %q, want %q", got, tt.want)
			}
		})
	}
}

// --- probe checkpoints ---

// onDisk reports whether the checkpoint file at path holds want (nil: no
// file).
func onDisk(path string, want []byte) bool {
	b, err := os.ReadFile(path)
	if want == nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	return err == nil && bytes.Equal(b, want)
}

func checkpointPath(dir string, uid types.UID) string {
	return filepath.Join(dir, string(uid)+".json")
}

func load(t *testing.T, f *podfiles.Files, uid types.UID) []byte {
	t.Helper()
	b, err := f.LoadCheckpoint(uid)
	if err != nil {
		t.Fatalf("LoadCheckpoint(%s): %v", uid, err)
	}
	return b
}

func TestCheckpoints(t *testing.T) {
	type op struct {
		uid    types.UID
		save   string // content to save
		remove bool
		nilb   bool // save nil
	}
	save := func(uid types.UID, s string) op { return op{uid: uid, save: s} }
	remove := func(uid types.UID) op { return op{uid: uid, remove: true} }
	tests := []struct {
		name string
		left map[types.UID]string // files from an earlier run
		ops  []op
		want map[types.UID]string // what every pod loads and has on disk at the end; absent: none
	}{
		{
			name: "a missing checkpoint is none, with no error",
			want: map[types.UID]string{},
		},
		{
			name: "a saved checkpoint is loaded back and reaches the disk",
			ops:  []op{save("u1", `{"a":1}`)},
			want: map[types.UID]string{"u1": `{"a":1}`},
		},
		{
			name: "a checkpoint from an earlier run is loaded",
			left: map[types.UID]string{"u1": `{"old":true}`},
			want: map[types.UID]string{"u1": `{"old":true}`},
		},
		{
			name: "the newest save wins",
			left: map[types.UID]string{"u1": `{"old":true}`},
			ops:  []op{save("u1", `{"a":1}`), save("u1", `{"a":2}`), save("u1", `{"a":3}`)},
			want: map[types.UID]string{"u1": `{"a":3}`},
		},
		{
			name: "a remove after a save leaves no file",
			ops:  []op{save("u1", `{"a":1}`), remove("u1")},
			want: map[types.UID]string{},
		},
		{
			name: "a remove deletes a checkpoint from an earlier run",
			left: map[types.UID]string{"u1": `{"old":true}`},
			ops:  []op{remove("u1")},
			want: map[types.UID]string{},
		},
		{
			name: "a save after a remove writes the file again",
			ops:  []op{save("u1", `{"a":1}`), remove("u1"), save("u1", `{"a":2}`)},
			want: map[types.UID]string{"u1": `{"a":2}`},
		},
		{
			name: "removing a missing checkpoint is fine",
			ops:  []op{remove("u1")},
			want: map[types.UID]string{},
		},
		{
			name: "saving nil changes nothing",
			ops:  []op{save("u1", `{"a":1}`), {uid: "u1", nilb: true}},
			want: map[types.UID]string{"u1": `{"a":1}`},
		},
		{
			name: "an empty checkpoint is saved as such",
			ops:  []op{save("u1", "")},
			want: map[types.UID]string{"u1": ""},
		},
		{
			name: "each pod has its own checkpoint",
			ops:  []op{save("u1", `{"a":1}`), save("u2", `{"b":1}`), remove("u1"), save("u3", `{"c":1}`), remove("u3")},
			want: map[types.UID]string{"u2": `{"b":1}`},
		},
	}
	uids := []types.UID{"u1", "u2", "u3"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for uid, s := range tt.left {
				if err := os.WriteFile(checkpointPath(dir, uid), []byte(s), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			f := podfiles.New("", dir, quiet)
			newest := map[types.UID][]byte{}
			for uid, s := range tt.left {
				newest[uid] = []byte(s)
			}
			for _, o := range tt.ops {
				switch {
				case o.remove:
					f.RemoveCheckpoint(o.uid)
					delete(newest, o.uid)
				case o.nilb:
					f.SaveCheckpoint(o.uid, nil)
				default:
					f.SaveCheckpoint(o.uid, []byte(o.save))
					newest[o.uid] = []byte(o.save)
				}
				// Loaded at once, written or not.
				if got, want := load(t, f, o.uid), newest[o.uid]; !bytes.Equal(got, want) || (got == nil) != (want == nil) {
					t.Fatalf("after %+v: LoadCheckpoint = %q, want %q", o, got, want)
				}
			}
			// The writes are queued: a file may not exist yet that a
			// pending remove will delete after a pending save wrote it.
			actortest.Eventually(t, "the checkpoint writes done", f.Idle)
			for _, uid := range uids {
				want, ok := tt.want[uid]
				var wantB []byte
				if ok {
					wantB = []byte(want)
				}
				if got := load(t, f, uid); !bytes.Equal(got, wantB) || (got == nil) != !ok {
					t.Errorf("LoadCheckpoint(%s) = %q, want %q (present: %v)", uid, got, want, ok)
				}
				path := checkpointPath(dir, uid)
				actortest.Eventually(t, fmt.Sprintf("%s to hold %q (present: %v)", path, want, ok), func() bool { return onDisk(path, wantB) })
				// What a restarted actorlet loads.
				if got := load(t, podfiles.New("", dir, quiet), uid); !bytes.Equal(got, wantB) || (got == nil) != !ok {
					t.Errorf("after a restart, LoadCheckpoint(%s) = %q, want %q (present: %v)", uid, got, want, ok)
				}
			}
		})
	}
}

// content is pod p's save i: large enough that writes take a while and a
// stale one could land after a newer one.
func content(p, i int) []byte {
	return []byte(fmt.Sprintf(`{"pod":%d,"save":%d,"pad":%q}`, p, i, strings.Repeat("x", 32<<10)))
}

func TestCheckpointManySavesEndWithTheLast(t *testing.T) {
	dir := t.TempDir()
	f := podfiles.New("", dir, quiet)
	const pods, saves = 8, 100
	var wg sync.WaitGroup
	for p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			uid := types.UID(fmt.Sprintf("u%d", p))
			for i := range saves {
				b := content(p, i)
				f.SaveCheckpoint(uid, b)
				if got, err := f.LoadCheckpoint(uid); err != nil || !bytes.Equal(got, b) {
					t.Errorf("%s save %d: LoadCheckpoint = %.40q, %v; want %.40q", uid, i, got, err, b)
					return
				}
			}
		}()
	}
	wg.Wait()
	var want []string
	for p := range pods {
		uid := types.UID(fmt.Sprintf("u%d", p))
		last := content(p, saves-1)
		path := checkpointPath(dir, uid)
		actortest.Eventually(t, path+" to hold the last save", func() bool { return onDisk(path, last) })
		want = append(want, string(uid)+".json")
	}
	// The last content of every path is on disk: every write is done and
	// no temporary file is left.
	if got := names(t, dir); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("checkpoint directory holds %v, want %v", got, want)
	}

	// A remove after all that: gone at once for Load, then from the disk.
	for p := range pods {
		uid := types.UID(fmt.Sprintf("u%d", p))
		f.RemoveCheckpoint(uid)
		if got := load(t, f, uid); got != nil {
			t.Errorf("LoadCheckpoint(%s) after remove = %q, want nil", uid, got)
		}
	}
	for p := range pods {
		path := checkpointPath(dir, types.UID(fmt.Sprintf("u%d", p)))
		actortest.Eventually(t, path+" to be removed", func() bool { return onDisk(path, nil) })
	}
}

func TestCheckpointThatCannotBeReadIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(checkpointPath(dir, "u1"), 0o750); err != nil {
		t.Fatal(err)
	}
	if b, err := podfiles.New("", dir, quiet).LoadCheckpoint("u1"); err == nil {
		t.Fatalf("LoadCheckpoint = %q, nil; want an error", b)
	}
}

// records keeps the messages of the records logged at Warn or above.
type records struct {
	mu   sync.Mutex
	msgs []string
}

func (r *records) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

func TestCheckpointWriteFailureIsLogged(t *testing.T) {
	rec := &records{}
	f := podfiles.New("", filepath.Join(aFile(t), "probes"), slog.New(rec))
	f.SaveCheckpoint("u1", []byte(`{"a":1}`))
	actortest.Eventually(t, "the failed write to be logged", func() bool { return rec.count() > 0 })
}

// --- no directories ---

func TestEmptyDirectoriesDisableTheFiles(t *testing.T) {
	cwd := t.TempDir()
	t.Chdir(cwd) // nothing may land in the working directory either
	f := podfiles.New("", "", quiet)
	tests := []struct {
		name string
		do   func() (string, error)
	}{
		{name: "Hosts", do: func() (string, error) { return f.Hosts("u1", []byte("127.0.0.1\tlocalhost\n")) }},
		{name: "TerminationLog", do: func() (string, error) { return f.TerminationLog("u1", "app", 0) }},
		{name: "SaveCheckpoint then LoadCheckpoint", do: func() (string, error) {
			f.SaveCheckpoint("u1", []byte(`{"a":1}`))
			b, err := f.LoadCheckpoint("u1")
			return string(b), err
		}},
		{name: "RemoveCheckpoint then LoadCheckpoint", do: func() (string, error) {
			f.RemoveCheckpoint("u1")
			b, err := f.LoadCheckpoint("u1")
			return string(b), err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := tt.do(); got != "" || err != nil {
				t.Errorf("= %q, %v; want \"\", nil", got, err)
			}
			if got := names(t, cwd); len(got) != 0 {
				t.Errorf("files written: %v", got)
			}
		})
	}
}
