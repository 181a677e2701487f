package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/actorlet/actorlet/internal/testenv"
	"github.com/actorlet/actorlet/podspec"
)

// The housekeeping sweep runs every 10 s and leaves what changed in the
// last 2 s: a pod's directories are gone well within this.
const sweepWait = 90 * time.Second

// TestE2ESimPodDirectoriesRemoved: once a pod is gone, its directory under
// <root-dir>/pods and its log directory under --pod-logs-dir go too (as
// upstream's housekeeping and container GC); a running pod's stay, and so
// do entries that are not actorlet's. What a crashed actorlet left is found
// at start-up.
func TestE2ESimPodDirectoriesRemoved(t *testing.T) {
	root := t.TempDir()
	podsDir, logsDir := filepath.Join(root, "pods"), filepath.Join(root, "pod-logs")
	// Left by an earlier actorlet: a pod dir and a log dir of a pod that no
	// longer exists, and entries that are none of actorlet's.
	const leftUID = "5b1c2d3e-0000-4000-8000-00000000dead"
	left := []string{
		filepath.Join(podsDir, leftUID, "containers", "app", "0"),
		filepath.Join(podsDir, leftUID, "etc-hosts"),
		filepath.Join(logsDir, "default_old-e2e-node_"+leftUID, "app", "0.log"),
	}
	foreign := []string{
		filepath.Join(podsDir, "not_a_pod", "data"),
		filepath.Join(logsDir, "notes", "data"),
	}
	for _, p := range append(left, foreign...) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	writeManifest(t, dir, "keep.yaml", podYAML("keep", simImage, "", `["sleep", "infinity"]`))
	writePods(t, dir, "gone", 5)
	a := startAgent(t, agentOpts{manifestDir: dir, rootDir: root})
	pods := waitAllRunning(t, a, 6, 2*time.Minute)

	dirsOf := func(p *v1.Pod) []string {
		return []string{filepath.Join(podsDir, string(p.UID)), podspec.PodLogDir(logsDir, p)}
	}
	var keep, gone []string
	for i := range pods {
		if strings.HasPrefix(pods[i].Name, "keep") {
			keep = append(keep, dirsOf(&pods[i])...)
		} else {
			gone = append(gone, dirsOf(&pods[i])...)
		}
	}
	if len(keep) != 2 || len(gone) != 10 {
		t.Fatalf("pods %d keep, %d gone directories", len(keep), len(gone))
	}
	for _, d := range append(append([]string{}, keep...), gone...) {
		if !exists(t, d) {
			t.Fatalf("%s missing while its pod runs", d)
		}
	}
	testenv.WaitFor(t, sweepWait, "the crashed actorlet's leftovers removed", func() (bool, error) {
		return allGone(t, left)
	})

	if err := os.Remove(filepath.Join(dir, "gone-00.yaml")); err != nil {
		t.Fatal(err)
	}
	waitAll(t, a, 1, time.Minute, "Running", isRunning)
	testenv.WaitFor(t, sweepWait, "the deleted pods' directories removed", func() (bool, error) {
		return allGone(t, gone)
	})
	for _, d := range append(append([]string{}, keep...), foreign...) {
		if !exists(t, d) {
			t.Errorf("%s removed", d)
		}
	}
	a.waitPod(10*time.Second, "keep-e2e-node", "still Running", isRunning)
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// allGone reports whether none of paths exists, else an error naming those
// left.
func allGone(t *testing.T, paths []string) (bool, error) {
	t.Helper()
	var left []string
	for _, p := range paths {
		if exists(t, p) {
			left = append(left, p)
		}
	}
	return len(left) == 0, fmt.Errorf("still there: %v", left)
}
