package podfiles_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/adapters/podfiles"
	"github.com/actorlet/actorlet/adapters/volume"
	"github.com/actorlet/actorlet/internal/testenv"
	"github.com/actorlet/actorlet/podspec"
)

// UIDs of the sweep tests: an API server UUID, a static pod's hash, a
// pushed pod's own.
const (
	uidKept  = "0f4ac6a8-2f5b-4b8e-9d1c-3c0de6a1b001"
	uidGone  = "0f4ac6a8-2f5b-4b8e-9d1c-3c0de6a1b002"
	uidGone2 = "d41d8cd98f00b204e9800998ecf8427e"
	uidGone3 = "pushed-1"
)

// tree lays out entries under root: "d" a directory, "f" a file, "l:<target>"
// a symlink to target (a path under outside). Every entry is made an hour
// old except those in fresh.
type tree map[string]string

func (tr tree) make(t *testing.T, root, outside string, fresh []string) {
	t.Helper()
	paths := make([]string, 0, len(tr))
	for p := range tr {
		paths = append(paths, p)
	}
	slices.Sort(paths) // parents first
	for _, p := range paths {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		switch kind := tr[p]; {
		case kind == "d":
			err := os.Mkdir(full, 0o755)
			if err != nil {
				t.Fatal(err)
			}
		case kind == "f":
			if err := os.WriteFile(full, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(kind, "l:"):
			if err := os.Symlink(filepath.Join(outside, strings.TrimPrefix(kind, "l:")), full); err != nil {
				t.Fatal(err)
			}
		}
	}
	old := time.Now().Add(-time.Hour)
	slices.Reverse(paths) // children first: a parent's time is set last
	for _, p := range paths {
		if strings.HasPrefix(tr[p], "l:") || slices.Contains(fresh, p) {
			continue
		}
		if err := os.Chtimes(filepath.Join(root, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSweep(t *testing.T) {
	podDir := func(uid string) tree {
		return tree{
			uid:                              "d",
			uid + "/etc-hosts":               "f",
			uid + "/containers":              "d",
			uid + "/containers/main":         "d",
			uid + "/containers/main/0":       "f",
			uid + "/containers/main/1":       "f",
			uid + "/volumes":                 "d",
			uid + "/volumes/kubernetes.io~x": "d",
		}
	}
	merge := func(ts ...tree) tree {
		out := tree{}
		for _, t := range ts {
			for k, v := range t {
				out[k] = v
			}
		}
		return out
	}
	// without drops paths (and what is under them) from a tree.
	without := func(tr tree, drop ...string) tree {
		out := tree{}
		for k, v := range tr {
			if !slices.ContainsFunc(drop, func(d string) bool { return k == d || strings.HasPrefix(k, d+"/") }) {
				out[k] = v
			}
		}
		return out
	}
	tests := []struct {
		name        string
		keep        []types.UID
		pods, logs  tree
		fresh       []string // pods/... or logs/...: changed just now
		wantPods    []string // what remains under pods/
		wantLogs    []string // and under logs/
		wantRemoved []string // relative to the test's root
		wantLog     string   // in the log
	}{
		{
			name: "kept UIDs stay, the others go",
			keep: []types.UID{uidKept},
			pods: merge(without(podDir(uidKept), uidKept+"/volumes/kubernetes.io~x"), without(podDir(uidGone), uidGone+"/volumes"),
				without(podDir(uidGone2), uidGone2+"/volumes/kubernetes.io~x")),
			wantPods:    []string{uidKept},
			wantRemoved: []string{"pods/" + uidGone, "pods/" + uidGone2},
		},
		{
			name:     "a kept pod with volumes stays",
			keep:     []types.UID{uidKept},
			pods:     podDir(uidKept),
			wantPods: []string{uidKept},
		},
		{
			name:     "a pod gone whose volumes are not torn down stays, logged",
			pods:     merge(podDir(uidGone), tree{uidGone2: "d", uidGone2 + "/volumes": "f"}),
			wantPods: []string{uidGone, uidGone2},
			wantLog:  "its volumes are not torn down",
		},
		{
			name: "foreign names and non-directories stay",
			pods: tree{
				"lost+found": "d", ".tmp": "d", "not_a_uid": "d", "-x": "d", uidGone: "f",
				strings.Repeat("a", 129): "d",
			},
			logs: tree{
				"default_web": "d", "Default_web_" + uidGone: "d", "default_web_" + uidGone + "_x": "d",
				"default_web_": "d", "default_web_" + uidGone2: "f", "README": "f",
			},
			wantPods: []string{"-x", ".tmp", uidGone, strings.Repeat("a", 129), "lost+found", "not_a_uid"},
			wantLogs: []string{"Default_web_" + uidGone, "README", "default_web", "default_web_", "default_web_" + uidGone + "_x", "default_web_" + uidGone2},
		},
		{
			name:     "symlinks are neither removed nor followed",
			pods:     tree{uidGone: "l:target", uidGone2: "l:missing"},
			logs:     tree{"default_web_" + uidGone: "l:target"},
			wantPods: []string{uidGone, uidGone2},
			wantLogs: []string{"default_web_" + uidGone},
		},
		{
			name: "log directories go by the UID after the last underscore",
			keep: []types.UID{uidKept},
			logs: tree{
				"default_web_" + uidKept: "d", "default_web_" + uidKept + "/main": "d", "default_web_" + uidKept + "/main/0.log": "f",
				"default_web_" + uidGone: "d", "default_web_" + uidGone + "/main": "d", "default_web_" + uidGone + "/main/0.log": "f",
				"kube-system_static-web-node.a_" + uidGone2: "d",
				"ns-1_pushed_" + uidGone3:                   "d",
			},
			wantLogs: []string{"default_web_" + uidKept},
			wantRemoved: []string{"logs/default_web_" + uidGone, "logs/kube-system_static-web-node.a_" + uidGone2,
				"logs/ns-1_pushed_" + uidGone3},
		},
		{
			name: "what changed just now waits for the next sweep",
			pods: without(podDir(uidGone), uidGone+"/volumes"),
			logs: tree{"default_web_" + uidGone: "d", "default_web_" + uidGone2: "d"},
			fresh: []string{
				"pods/" + uidGone, "logs/default_web_" + uidGone,
			},
			wantPods:    []string{uidGone},
			wantLogs:    []string{"default_web_" + uidGone},
			wantRemoved: []string{"logs/default_web_" + uidGone2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, outside := t.TempDir(), t.TempDir()
			if err := os.Mkdir(filepath.Join(outside, "target"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "target", "precious"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			pods, logs := filepath.Join(root, "pods"), filepath.Join(root, "logs")
			for _, d := range []string{pods, logs} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			var fresh []string
			for _, p := range tt.fresh {
				fresh = append(fresh, strings.SplitN(p, "/", 2)[1])
			}
			tt.pods.make(t, pods, outside, fresh)
			tt.logs.make(t, logs, outside, fresh)
			var buf bytes.Buffer
			f := podfiles.New(pods, "", slog.New(slog.NewTextHandler(&buf, nil)), podfiles.WithPodLogsDir(logs))
			keep := map[types.UID]bool{}
			for _, uid := range tt.keep {
				keep[uid] = true
			}
			removed, err := f.Sweep(context.Background(), keep)
			if err != nil {
				t.Fatalf("Sweep: %v", err)
			}
			var rel []string
			for _, p := range removed {
				r, _ := filepath.Rel(root, p)
				rel = append(rel, r)
			}
			slices.Sort(rel)
			if !slices.Equal(rel, tt.wantRemoved) {
				t.Errorf("removed %q, want %q", rel, tt.wantRemoved)
			}
			if got := names(t, pods); !slices.Equal(got, tt.wantPods) {
				t.Errorf("pods/ holds %q, want %q", got, tt.wantPods)
			}
			if got := names(t, logs); !slices.Equal(got, tt.wantLogs) {
				t.Errorf("logs/ holds %q, want %q", got, tt.wantLogs)
			}
			if _, err := os.Stat(filepath.Join(outside, "target", "precious")); err != nil {
				t.Errorf("a file outside was touched: %v", err)
			}
			if tt.wantLog != "" && !strings.Contains(buf.String(), tt.wantLog) {
				t.Errorf("log %q lacks %q", buf.String(), tt.wantLog)
			}
		})
	}
}

func TestSweepLogsKeptVolumesOncePerPod(t *testing.T) {
	root := t.TempDir()
	pods := filepath.Join(root, "pods")
	tree{uidGone: "d", uidGone + "/volumes": "d", uidGone + "/volumes/token": "f"}.make(t, pods, root, nil)
	var buf bytes.Buffer
	f := podfiles.New(pods, "", slog.New(slog.NewTextHandler(&buf, nil)))
	for range 3 {
		if removed, err := f.Sweep(context.Background(), nil); len(removed) != 0 || err != nil {
			t.Fatalf("Sweep = %q, %v; want nothing removed", removed, err)
		}
	}
	if n := strings.Count(buf.String(), "volumes are not torn down"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, buf.String())
	}
	// Torn down: the next sweep removes the directory.
	if err := os.RemoveAll(filepath.Join(pods, uidGone, "volumes")); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(pods, uidGone), old, old); err != nil {
		t.Fatal(err)
	}
	if removed, err := f.Sweep(context.Background(), nil); len(removed) != 1 || err != nil {
		t.Fatalf("Sweep after the teardown = %q, %v; want the pod directory removed", removed, err)
	}
}

func TestSweepWithoutDirectories(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name string
		f    *podfiles.Files
	}{
		{name: "none set", f: podfiles.New("", "", quiet)},
		{name: "not made yet", f: podfiles.New(missing, "", quiet, podfiles.WithPodLogsDir(missing))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if removed, err := tt.f.Sweep(context.Background(), nil); removed != nil || err != nil {
				t.Fatalf("Sweep = %q, %v; want nil, nil", removed, err)
			}
		})
	}
}

func TestSweepStopsWithItsContext(t *testing.T) {
	root := t.TempDir()
	pods := filepath.Join(root, "pods")
	tree{uidGone: "d"}.make(t, pods, root, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if removed, err := podfiles.New(pods, "", quiet).Sweep(ctx, nil); len(removed) != 0 || err == nil {
		t.Fatalf("Sweep = %q, %v; want nothing removed and the context's error", removed, err)
	}
	if got := names(t, pods); !slices.Equal(got, []string{uidGone}) {
		t.Fatalf("pods/ holds %q", got)
	}
}

// After a restart of actorlet, a pod gone meanwhile has no PodActor and
// so no teardown from the VolumeActor: the sweep tears its volumes down
// (WithVolumes, here the VolumeActor's own adapter: its tmpfs unmounted
// first) and removes its directory; one whose teardown fails (a tmpfs
// kept busy) stays, and goes at a later sweep.
func TestSweepTearsDownTheVolumesOfPodsGone(t *testing.T) {
	testenv.NeedRoot(t)
	root := t.TempDir()
	pods := filepath.Join(root, "pods")
	vf := volume.New(quiet)
	t.Cleanup(func() {
		for _, uid := range []string{uidKept, uidGone} {
			_ = vf.RemoveAll(filepath.Join(pods, uid, "volumes"))
		}
	})
	token := map[string]podspec.VolumeFile{"token": {Data: []byte("t"), Mode: 0o644}}
	volDir := func(uid string) string {
		return filepath.Join(pods, uid, "volumes", "kubernetes.io~projected", "kube-api-access-x")
	}
	for _, uid := range []string{uidKept, uidGone} {
		if err := vf.WriteAtomic(volDir(uid), token, nil, true, 1<<20); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(filepath.Join(pods, uid), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if !mounted(t, volDir(uidGone)) {
		t.Fatal("the volume is not a tmpfs mount")
	}
	f := podfiles.New(pods, "", quiet, podfiles.WithVolumes(vf.RemoveAll))
	keep := map[types.UID]bool{uidKept: true}
	// Busy (a process has a file open in it): kept, nothing removed.
	busy, err := os.Open(filepath.Join(volDir(uidGone), "token"))
	if err != nil {
		t.Fatal(err)
	}
	removed, err := f.Sweep(context.Background(), keep)
	busy.Close()
	if len(removed) != 0 || err != nil {
		t.Fatalf("Sweep with a busy volume = %q, %v; want nothing removed", removed, err)
	}
	if b, err := os.ReadFile(filepath.Join(volDir(uidGone), "token")); err != nil || string(b) != "t" {
		t.Fatalf("the busy volume's file: %q, %v", b, err)
	}
	removed, err = f.Sweep(context.Background(), keep)
	if err != nil || !slices.Equal(removed, []string{filepath.Join(pods, uidGone)}) {
		t.Fatalf("Sweep = %q, %v; want the pod gone's directory removed", removed, err)
	}
	if mounted(t, volDir(uidGone)) {
		t.Error("the pod gone's tmpfs is still mounted")
	}
	if got := names(t, pods); !slices.Equal(got, []string{uidKept}) {
		t.Errorf("pods/ holds %q, want the kept pod only", got)
	}
	if !mounted(t, volDir(uidKept)) {
		t.Error("the kept pod's tmpfs was unmounted")
	}
}

// mounted tells whether dir is a mount point in /proc/self/mountinfo.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}
