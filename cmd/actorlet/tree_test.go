package main

import (
	"slices"
	"testing"
)

// TestPlan checks which actors each configuration spawns, in which order,
// and the pod sources the node waits for.
func TestPlan(t *testing.T) {
	base := []string{"status", "images", "volumes", "devices", "dra", "gc", "eviction", "node", "pleg", "source-push"}
	tests := []struct {
		name        string
		manifestDir string
		manifestURL string
		cluster     bool
		cgroups     bool // pod cgroups managed (a real runtime)
		wantActors  []string
		wantSources []string
		wantPIDs    []string
	}{
		{name: "standalone, push only", wantActors: base,
			wantSources: []string{"push"}, wantPIDs: []string{"source-push"}},
		{name: "standalone with a manifest dir", manifestDir: "/etc/kubernetes/manifests",
			wantActors:  []string{"status", "images", "source-file", "volumes", "devices", "dra", "gc", "eviction", "node", "pleg", "source-push"},
			wantSources: []string{"push", "file"}, wantPIDs: []string{"source-push", "source-file"}},
		{name: "cluster with every source", manifestDir: "/m", manifestURL: "http://x/pods.yaml", cluster: true,
			wantActors: []string{"status", "images", "source-file", "source-url", "volumes", "devices", "dra", "gc", "eviction", "source-api",
				"node", "pleg", "source-push", "nodestatus"},
			wantSources: []string{"push", "file", "http", "api"},
			wantPIDs:    []string{"source-push", "source-file", "source-url", "source-api"}},
		{name: "real runtime: the CgroupActor before the node", cgroups: true,
			wantActors:  []string{"status", "images", "volumes", "devices", "dra", "gc", "eviction", "cgroups", "node", "pleg", "source-push"},
			wantSources: []string{"push"}, wantPIDs: []string{"source-push"}},
		{name: "cluster, no static pods", cluster: true,
			wantActors:  []string{"status", "images", "volumes", "devices", "dra", "gc", "eviction", "source-api", "node", "pleg", "source-push", "nodestatus"},
			wantSources: []string{"push", "api"}, wantPIDs: []string{"source-push", "source-api"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := defaultOptions()
			o.PodManifestPath, o.ManifestURL = tc.manifestDir, tc.manifestURL
			w := &wiring{o: o}
			if tc.cluster {
				w.cluster = &clusterParts{}
			}
			if tc.cgroups {
				w.cgroups = &cgroupPlan{}
			}
			on, sources, sourceActors := plan(treeActors(w))
			var names []string
			for _, a := range on {
				if a.build == nil {
					t.Errorf("actor %s has no build function", a.name)
				}
				names = append(names, a.name)
			}
			if !slices.Equal(names, tc.wantActors) {
				t.Errorf("actors %v, want %v", names, tc.wantActors)
			}
			if !slices.Equal(sources, tc.wantSources) || !slices.Equal(sourceActors, tc.wantPIDs) {
				t.Errorf("sources %v from %v, want %v from %v", sources, sourceActors, tc.wantSources, tc.wantPIDs)
			}
		})
	}
}

func TestTreeActorNamesAreUnique(t *testing.T) {
	w := &wiring{o: defaultOptions(), cluster: &clusterParts{}}
	seen := map[string]bool{}
	for _, a := range treeActors(w) {
		if seen[a.name] {
			t.Errorf("two actors named %q", a.name)
		}
		seen[a.name] = true
		if a.source != "" && !slices.Contains(sourceOrder, a.source) {
			t.Errorf("source %q of %s is not in sourceOrder", a.source, a.name)
		}
	}
}
