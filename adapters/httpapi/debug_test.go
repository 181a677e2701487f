package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actorlet/actorlet/internal/actorkit"
)

const testPodUID = "6f1c2a9e-0b7d-4c55-9d0e-3a1f2b4c5d6e"

// fakeActors is a fixed actor tree: root -> node -> pod-<uid> (restarted
// once after a panic) and root -> pleg, as the supervisors' registry
// reports it. cmd/actorlet tests the page on a live registry.
type fakeActors struct {
	snapshot []actorkit.ActorInfo
	kinds    []actorkit.KindStats
}

var _ ActorSource = (*fakeActors)(nil)

func (f *fakeActors) Snapshot() []actorkit.ActorInfo {
	return append([]actorkit.ActorInfo(nil), f.snapshot...)
}
func (f *fakeActors) KindStats() []actorkit.KindStats {
	return append([]actorkit.KindStats(nil), f.kinds...)
}

func testTree() *fakeActors {
	podID := "root/node/pod-" + testPodUID
	return &fakeActors{
		snapshot: []actorkit.ActorInfo{ // sorted by PID, as the registry sorts them
			{PID: "root", Kind: "root", Messages: 2},
			{PID: "root/node", Kind: "node", Parent: "root", Messages: 5, HandlingNanos: 10000, MeanHandlingMicros: 2},
			{PID: podID, Kind: "pod", Parent: "root/node", Restarts: 1, Messages: 3,
				LastFailure: "boom on purpose", LastFailureAt: time.Now().Add(-5 * time.Second)},
			{PID: "root/pleg", Kind: "pleg", Parent: "root", Mailbox: -1},
		},
		kinds: []actorkit.KindStats{
			{Kind: "node", Live: 1, Handled: 5, HandlingSeconds: 1e-5},
			{Kind: "pleg", Live: 1},
			{Kind: "pod", Live: 1, Handled: 4, HandlingSeconds: 2e-5, MailboxLength: 3, MailboxMax: 3},
			{Kind: "root", Live: 1, Handled: 2},
		},
	}
}

func TestDebugActorsJSON(t *testing.T) {
	h := NewDebug(testTree())
	code, body, hdr := do(t, h, http.MethodGet, "/debug/actors?format=json", "")
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Fatalf("GET ?format=json: %d %s\n%s", code, hdr.Get("Content-Type"), body)
	}
	var p ActorsPage
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Tree) != 1 || p.Tree[0].PID != "root" || p.Actors != 4 {
		t.Fatalf("want one root of 4 actors, got %d roots, %d actors: %s", len(p.Tree), p.Actors, body)
	}
	var node *ActorNode
	for _, c := range p.Tree[0].Children {
		if c.Name == "node" {
			node = c
		}
	}
	if node == nil || node.Kind != "node" || len(node.Children) != 1 {
		t.Fatalf("root's children: %s", body)
	}
	pod := node.Children[0]
	if pod.Name != "pod-"+testPodUID || pod.Kind != "pod" || pod.Restarts != 1 ||
		!strings.Contains(pod.LastFailure, "boom on purpose") || pod.Messages == 0 || pod.Mailbox != 0 {
		t.Fatalf("pod actor: %+v", pod)
	}
	kinds := map[string]KindSummary{}
	for _, k := range p.Kinds {
		kinds[k.Kind] = k
	}
	if kinds["pod"].Live != 1 || kinds["pod"].Handled != 4 || kinds["pod"].MeanHandlingMicros != 5 ||
		kinds["pod"].MailboxMax != 3 || kinds["root"].Live != 1 || kinds["pleg"].MeanHandlingMicros != 0 {
		t.Fatalf("kinds: %+v", p.Kinds)
	}
}

func TestBuildTree(t *testing.T) {
	tests := []struct {
		name string
		snap []actorkit.ActorInfo
		want string // roots and children, as names
	}{
		{name: "empty", want: ""},
		{name: "root with children", snap: []actorkit.ActorInfo{
			{PID: "root"}, {PID: "root/a", Parent: "root"}, {PID: "root/a/x", Parent: "root/a"}, {PID: "root/b", Parent: "root"},
		}, want: "root(a(x) b)"},
		{name: "parent gone: its child is a root", snap: []actorkit.ActorInfo{
			{PID: "root"}, {PID: "root/a/x", Parent: "root/a"},
		}, want: "root x"},
	}
	var draw func(ns []*ActorNode) string
	draw = func(ns []*ActorNode) string {
		var parts []string
		for _, n := range ns {
			s := n.Name
			if len(n.Children) > 0 {
				s += "(" + draw(n.Children) + ")"
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, " ")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := draw(buildTree(tc.snap)); got != tc.want {
				t.Fatalf("buildTree: %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDebugRoutes(t *testing.T) {
	h := NewDebug(testTree())
	tests := []struct {
		name, path string
		code       int
		contains   string
	}{
		{"html page", "/debug/actors", 200, `data-pid="root/node/pod-` + testPodUID + `"`},
		{"html child limit", "/debug/actors?limit=1", 200, "and 1 more"},
		{"pprof index", "/debug/pprof/", 200, "goroutine"},
		{"pprof heap", "/debug/pprof/heap?debug=1", 200, "heap profile"},
		{"pprof cmdline", "/debug/pprof/cmdline", 200, ""},
		{"unknown", "/debug/nothing", 404, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body, _ := do(t, h, http.MethodGet, tc.path, "")
			if code != tc.code || !strings.Contains(body, tc.contains) {
				t.Fatalf("GET %s: %d, want %d containing %q\n%.500s", tc.path, code, tc.code, tc.contains, body)
			}
		})
	}
}

// TestDebugActorsInChromium renders /debug/actors, served over HTTP from a
// live actor tree, in headless Chromium (Debian's package, installed when
// missing and possible) and checks the tree is drawn, also after the
// page's own refresh.
func TestDebugActorsInChromium(t *testing.T) {
	browser := chromium(t)
	srv := httptest.NewServer(NewDebug(testTree()))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	args := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + filepath.Join(dir, "profile"),
		// Let the page's 2 s refresh run once before the DOM is dumped.
		"--virtual-time-budget=3000",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, append(args, "--dump-dom", srv.URL+"/debug/actors")...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v\n%s", err, tailLines(stderr.String(), 20))
	}
	dom := string(out)
	for _, want := range []string{
		`id="actor-root"`, `data-kind="root"`,
		`id="actor-root/node"`, `data-kind="node"`,
		`id="actor-root/node/pod-` + testPodUID + `"`, `data-kind="pod"`,
		`id="actor-root/pleg"`,
		"restarts 1", "boom on purpose",
		`<tr data-kind="pod">`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q", want)
		}
	}
	// The pod is drawn inside the node, inside the root.
	iRoot, iNode, iPod := strings.Index(dom, `id="actor-root"`), strings.Index(dom, `id="actor-root/node"`), strings.Index(dom, `id="actor-root/node/pod-`)
	if !(iRoot < iNode && iNode < iPod) {
		t.Errorf("tree order: root at %d, node at %d, pod at %d", iRoot, iNode, iPod)
	}
	if t.Failed() {
		t.Logf("DOM:\n%.3000s", dom)
	}
	if os.Getenv("ACTORLET_DEBUG_SCREENSHOT") != "" {
		shot := exec.CommandContext(ctx, browser, append(args, "--window-size=1280,720",
			"--screenshot="+os.Getenv("ACTORLET_DEBUG_SCREENSHOT"), srv.URL+"/debug/actors")...)
		if out, err := shot.CombinedOutput(); err != nil {
			t.Logf("screenshot: %v\n%s", err, out)
		}
	}
}

var chromiumOnce struct {
	sync.Once
	path string
	err  error
}

// chromium returns Debian's chromium, installing it with apt-get when it is
// missing and we are root. Without it the test skips, or fails with
// CI=true.
func chromium(t *testing.T) string {
	t.Helper()
	chromiumOnce.Do(func() {
		if p, err := exec.LookPath("chromium"); err == nil {
			chromiumOnce.path = p
			return
		}
		if os.Geteuid() != 0 {
			chromiumOnce.err = errors.New("chromium is not installed and installing it needs root (apt-get install -y chromium)")
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		install := func() ([]byte, error) {
			cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "--no-install-recommends", "chromium")
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			return cmd.CombinedOutput()
		}
		out, err := install()
		if err != nil { // stale package lists: update once and retry
			_, _ = exec.CommandContext(ctx, "apt-get", "update").CombinedOutput()
			out, err = install()
		}
		if err != nil {
			chromiumOnce.err = errors.New("apt-get install chromium: " + err.Error() + "\n" + tailLines(string(out), 10))
			return
		}
		chromiumOnce.path, chromiumOnce.err = exec.LookPath("chromium")
	})
	if chromiumOnce.err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("headless Chromium needed (CI=true): %v", chromiumOnce.err)
		}
		t.Skipf("skipping: %v", chromiumOnce.err)
	}
	return chromiumOnce.path
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
