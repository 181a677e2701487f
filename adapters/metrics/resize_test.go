package metrics

import "testing"

func TestPodResizes(t *testing.T) {
	r := New()
	r.IncPodResize(ResizeDeferred)
	r.IncPodResize(ResizeCompleted)
	r.IncPodResize(ResizeCompleted)
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "actorlet_pod_resizes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	if len(got) != 2 || got[ResizeCompleted] != 2 || got[ResizeDeferred] != 1 {
		t.Fatalf("actorlet_pod_resizes_total %v", got)
	}
}
