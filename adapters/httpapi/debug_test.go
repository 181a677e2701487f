package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlet/actorlet/supervisors"
)

const testPodUID = "6f1c2a9e-0b7d-4c55-9d0e-3a1f2b4c5d6e"

// podActor does nothing; "boom" makes it panic (for restarts and failures).
type podActor struct{}

func (podActor) Receive(c actor.Context) {
	if c.Message() == "boom" {
		panic("boom on purpose")
	}
}

// nodeActor spawns one pod actor under itself, as the NodeActor does.
type nodeActor struct{ props *actor.Props }

func (n *nodeActor) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); ok {
		_, _ = c.SpawnNamed(n.props, "pod-"+testPodUID)
	}
}

// liveTree spawns root -> node -> pod-<uid> (plus pleg) with the real
// supervision middlewares and strategy, crashes the pod once, and returns
// the registry.
func liveTree(t *testing.T) *supervisors.Registry {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	t.Cleanup(sys.Shutdown)
	log := slog.New(slog.DiscardHandler)
	reg := supervisors.NewRegistry(nil)
	strategy := supervisors.NewStrategy(supervisors.StrategyConfig{}, nil, log, nil)
	mws := supervisors.Middlewares(reg, log, nil)
	props := func(p actor.Producer) *actor.Props {
		return actor.PropsFromProducer(p, actor.WithReceiverMiddleware(mws...), actor.WithSupervisor(strategy))
	}
	podProps := props(func() actor.Actor { return podActor{} })
	root, err := supervisors.SpawnRoot(sys, strategy, mws, []supervisors.Child{
		{Name: "node", Props: props(func() actor.Actor { return &nodeActor{props: podProps} })},
		{Name: "pleg", Props: props(func() actor.Actor { return podActor{} })},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = supervisors.Stop(sys, root) })
	podID := "root/node/pod-" + testPodUID
	waitUntil(t, "pod actor registered", func() bool { return findActor(reg.Snapshot(), podID) != nil })
	sys.Root.Send(actor.NewPID(sys.Address(), podID), "boom")
	waitUntil(t, "pod actor restarted", func() bool {
		a := findActor(reg.Snapshot(), podID)
		return a != nil && a.Restarts == 1
	})
	return reg
}

func findActor(s []supervisors.ActorInfo, pid string) *supervisors.ActorInfo {
	for i := range s {
		if s[i].PID == pid {
			return &s[i]
		}
	}
	return nil
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDebugActorsJSON(t *testing.T) {
	h := NewDebug(liveTree(t))
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
	if node == nil || node.Kind != supervisors.KindNode || len(node.Children) != 1 {
		t.Fatalf("root's children: %s", body)
	}
	pod := node.Children[0]
	if pod.Name != "pod-"+testPodUID || pod.Kind != supervisors.KindPod || pod.Restarts != 1 ||
		!strings.Contains(pod.LastFailure, "boom on purpose") || pod.Messages == 0 || pod.Mailbox != 0 {
		t.Fatalf("pod actor: %+v", pod)
	}
	kinds := map[string]KindSummary{}
	for _, k := range p.Kinds {
		kinds[k.Kind] = k
	}
	if kinds["pod"].Live != 1 || kinds["pod"].Handled == 0 || kinds["root"].Live != 1 {
		t.Fatalf("kinds: %+v", p.Kinds)
	}
}

func TestDebugRoutes(t *testing.T) {
	h := NewDebug(liveTree(t))
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
	srv := httptest.NewServer(NewDebug(liveTree(t)))
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
