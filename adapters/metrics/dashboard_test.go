package metrics

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/actorlet/actorlet/internal/actorkit"
)

// TestDashboardMetricsExist checks that every metric the Grafana dashboard
// (deploy/grafana) queries is one this registry exports, so a rename
// breaks this test rather than a panel.
func TestDashboardMetricsExist(t *testing.T) {
	b, err := os.ReadFile("../../deploy/grafana/actorlet-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard is not JSON: %v", err)
	}
	r := New()
	r.InitActorKinds("pod")
	r.SetActors("pod", 1)
	r.SetRunningContainers("running", 1)
	r.SetDesiredPods(true, 1)
	r.ObservePodStart(time.Second)
	r.ObservePLEGRelist(time.Millisecond, time.Second)
	r.ObserveRuntimeOp("run_podsandbox", time.Millisecond, errors.New("boom"))
	r.IncStartedContainers(ContainerTypeContainer)
	r.ObserveProbe(ProbeReadiness, ProbeResultSuccessful, "c", "p", "ns", "uid", time.Millisecond)
	r.IncActorRestart("pod")
	r.IncActorPanic("pod")
	r.SetActorStats([]float64{0.001}, func() []actorkit.KindStats {
		return []actorkit.KindStats{{Kind: "pod", Live: 1, Handled: 1, Buckets: []uint64{1, 0}}}
	})
	exported := map[string]bool{}
	for _, l := range strings.Split(scrape(t, r), "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "#" && f[1] == "TYPE" {
			exported[f[2]] = true
		}
	}
	name := regexp.MustCompile(`\b((?:kubelet|actorlet|prober|process|go)_[a-z_]+)\b`)
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				n++
				base := m
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if exported[strings.TrimSuffix(m, suf)] {
						base = strings.TrimSuffix(m, suf)
					}
				}
				if !exported[base] {
					t.Errorf("panel %q queries %s, which is not exported", p.Title, m)
				}
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d metric references found in the dashboard", n)
	}
}
