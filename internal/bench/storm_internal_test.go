package bench

import (
	"testing"
	"time"
)

// The status-storm scenario's defaults: issue 38's 50 pods, 20 rejected
// pods/s for 5 minutes; flags override them; other scenarios keep theirs.
func TestStormDefaults(t *testing.T) {
	o := Options{Scenario: ScenarioStatusStorm, Binary: "/bin/true"}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.Pods != 50 || o.ChurnRate != 20 || o.Duration != 5*time.Minute {
		t.Fatalf("pods %d rate %g duration %s", o.Pods, o.ChurnRate, o.Duration)
	}
	if w := stormWarmup(o.Duration); w != 200*time.Second {
		t.Fatalf("warm-up %s", w)
	}
	o = Options{Scenario: ScenarioStatusStorm, Binary: "/bin/true", Pods: 10, ChurnRate: 5, Duration: 30 * time.Second}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.Pods != 10 || o.ChurnRate != 5 || o.Duration != 30*time.Second || stormWarmup(o.Duration) != 20*time.Second {
		t.Fatalf("flags not kept: pods %d rate %g duration %s", o.Pods, o.ChurnRate, o.Duration)
	}
	o = Options{Scenario: ScenarioChurn, Binary: "/bin/true"}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.ChurnRate != 0 || o.Duration != 30*time.Second {
		t.Fatalf("churn got the storm's defaults: rate %g duration %s", o.ChurnRate, o.Duration)
	}
	if ratio(300, 200) != 1.5 || ratio(1, 0) != 0 {
		t.Fatalf("ratio")
	}
}
