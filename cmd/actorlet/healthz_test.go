package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/adapters/metrics"
	"github.com/actorlet/actorlet/internal/actortest"
)

// TestHealthzOnTheLiveTree wires the real actor tree on the embedded sim
// runtime, as agent does, and serves /healthz from it: every singleton of
// the tree is probed, and one that is dead (stopped for good, as a
// singleton whose supervisor gave up is) fails the check by name.
func TestHealthzOnTheLiveTree(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	o := defaultOptions()
	o.RootDir = t.TempDir()
	o.PodLogsDir = filepath.Join(o.RootDir, "pod-logs")
	o.ContainerRuntimeEndpoint = "sim://"
	o.PLEGRelistPeriod = 100 * time.Millisecond
	m := metrics.New()
	rt, err := startRuntime(ctx, o, m, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.client.Close() })
	w := &wiring{o: o, name: "n1", hostIP: "127.0.0.1", rt: rt, clk: clock.RealClock{}, log: log, m: m}
	w.stats = newStats(ctx, w)
	tr, err := spawnTree(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.stop(log) })
	srv, err := newNodeAPI(w, tr)
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Healthz()
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, string(b)
	}

	var body string
	actortest.EventuallyDetail(t, "healthz passes (first relist done)", func() bool {
		var code int
		code, body = get("/healthz?verbose")
		return code == http.StatusOK
	}, func() string { return body })
	on, _, _ := plan(treeActors(w))
	for _, a := range on {
		if !strings.Contains(body, "[+]actor-"+a.name+" ok\n") {
			t.Errorf("verbose healthz does not list %s:\n%s", a.name, body)
		}
	}
	for _, want := range []string{"[+]pleg ok\n", "[+]runtime ok\n", "healthz check passed"} {
		if !strings.Contains(body, want) {
			t.Errorf("verbose healthz lacks %q:\n%s", want, body)
		}
	}

	if err := tr.sys.Root.StopFuture(tr.pid("images")).Wait(); err != nil {
		t.Fatal(err)
	}
	actortest.EventuallyDetail(t, "healthz fails naming the dead singleton", func() bool {
		var code int
		code, body = get("/healthz")
		return code == http.StatusInternalServerError &&
			strings.Contains(body, "[-]actor-images failed: actor (root/images) is not running\n")
	}, func() string { return body })
	for _, want := range []string{"[+]actor-node ok\n", "[+]actor-status ok\n", "[+]pleg ok\n", "healthz check failed"} {
		if !strings.Contains(body, want) {
			t.Errorf("failing healthz lacks %q:\n%s", want, body)
		}
	}
}
