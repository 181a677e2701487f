package eviction

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestParseThresholds(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		hard, soft, grace, minReclaim map[string]string
		want                          []string // Threshold.String(), in order
		reclaim                       map[Signal]string
		err                           string // a substring of the error
	}{
		{
			name: "upstream defaults",
			hard: DefaultHard(),
			want: []string{"imagefs.available<15%", "memory.available<100Mi", "nodefs.available<10%", "nodefs.inodesFree<5%"},
		},
		{
			name:  "hard and soft with grace and minimum reclaim",
			hard:  map[string]string{"memory.available": "100Mi", "pid.available": "1k"},
			soft:  map[string]string{"memory.available": "300Mi", "nodefs.available": "15%"},
			grace: map[string]string{"memory.available": "1m30s", "nodefs.available": "2m"},
			minReclaim: map[string]string{
				"memory.available": "50Mi", "nodefs.available": "1%",
			},
			want: []string{"memory.available<100Mi", "pid.available<1k", "memory.available<300Mi for 1m30s", "nodefs.available<15% for 2m0s"},
			reclaim: map[Signal]string{
				SignalMemoryAvailable: "50Mi", SignalNodeFsAvailable: "1%",
			},
		},
		{name: "every signal", hard: map[string]string{
			"memory.available": "1Gi", "allocatableMemory.available": "1Gi", "nodefs.available": "1%", "nodefs.inodesFree": "2%",
			"imagefs.available": "3%", "imagefs.inodesFree": "4%", "pid.available": "100",
		}, want: []string{
			"allocatableMemory.available<1Gi", "imagefs.available<3%", "imagefs.inodesFree<4%", "memory.available<1Gi",
			"nodefs.available<1%", "nodefs.inodesFree<2%", "pid.available<100",
		}},
		{name: "0% and 100% are ignored", hard: map[string]string{"nodefs.available": "0%", "imagefs.available": "100%"}, want: nil},
		{name: "nothing", want: nil},
		{name: "unknown signal", hard: map[string]string{"memory.free": "1Gi"}, err: `eviction-hard memory.free="1Gi": unsupported eviction signal "memory.free"`},
		{name: "bad quantity", hard: map[string]string{"memory.available": "lots"}, err: `eviction-hard memory.available="lots": not a quantity or a percentage`},
		{name: "bad percentage", soft: map[string]string{"nodefs.available": "x%"}, err: `eviction-soft nodefs.available="x%": not a percentage`},
		{name: "percentage above 100", hard: map[string]string{"nodefs.available": "150%"}, err: `eviction-hard nodefs.available="150%": percentage "150%" out of range`},
		{name: "negative quantity", hard: map[string]string{"memory.available": "-1Mi"}, err: `eviction-hard memory.available="-1Mi": the threshold must be positive`},
		{name: "zero quantity", hard: map[string]string{"memory.available": "0"}, err: `the threshold must be positive`},
		{name: "soft without grace", soft: map[string]string{"memory.available": "1Gi"}, err: `eviction-soft memory.available: a grace period must be given`},
		{name: "bad grace", soft: map[string]string{"memory.available": "1Gi"}, grace: map[string]string{"memory.available": "soon"}, err: `eviction-soft-grace-period memory.available="soon"`},
		{name: "negative grace", soft: map[string]string{"memory.available": "1Gi"}, grace: map[string]string{"memory.available": "-1m"}, err: `eviction-soft-grace-period memory.available="-1m": must be positive`},
		{name: "grace of an unknown signal", grace: map[string]string{"disk.available": "1m"}, err: `eviction-soft-grace-period disk.available="1m": unsupported eviction signal`},
		{name: "negative minimum reclaim", minReclaim: map[string]string{"memory.available": "-5Mi"}, err: `eviction-minimum-reclaim memory.available="-5Mi": must not be negative`},
		{name: "zero percent minimum reclaim", minReclaim: map[string]string{"nodefs.available": "0%"}, err: `eviction-minimum-reclaim nodefs.available="0%": a percentage must be positive`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseThresholds(tc.hard, tc.soft, tc.grace, tc.minReclaim)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, th := range got {
				names = append(names, th.String())
				want, ok := tc.reclaim[th.Signal]
				switch {
				case ok && (th.MinReclaim == nil || th.MinReclaim.String() != want):
					t.Errorf("%s: min reclaim %v, want %s", th, th.MinReclaim, want)
				case !ok && th.MinReclaim != nil:
					t.Errorf("%s: min reclaim %v, want none", th, th.MinReclaim)
				}
			}
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Errorf("thresholds = %v, want %v", names, tc.want)
			}
		})
	}
}

func TestThresholdValueOf(t *testing.T) {
	capacity := resource.MustParse("10Gi")
	for _, tc := range []struct {
		name string
		v    string
		want string
	}{
		{name: "quantity", v: "100Mi", want: "100Mi"},
		{name: "percentage", v: "10%", want: "1Gi"},
		{name: "fraction of a percent", v: "0.5%", want: "53687091"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := parseValue(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			got := v.Of(capacity)
			if got.Cmp(resource.MustParse(tc.want)) != 0 {
				t.Errorf("%s of 10Gi = %s, want %s", tc.v, got.String(), tc.want)
			}
		})
	}
}

func TestSynchronizeSoftGraceAndTransition(t *testing.T) {
	ts, err := ParseThresholds(map[string]string{"memory.available": "100Mi"}, map[string]string{"memory.available": "500Mi"},
		map[string]string{"memory.available": "1m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	obs := func(avail string) observations {
		return observations{SignalMemoryAvailable: {available: resource.MustParse(avail), capacity: resource.MustParse("8Gi")}}
	}
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name     string
		steps    []string        // availability at t0, t0+30s, t0+60s, ...
		pressure bool            // MemoryPressure after the last step
		acts     []string        // thresholds acted on at the last step
		after    []time.Duration // optional: override the step times
	}{
		{name: "soft met once: pressure, no action", steps: []string{"400Mi"}, pressure: true},
		{name: "soft met for its grace period: acts", steps: []string{"400Mi", "400Mi", "400Mi"}, pressure: true, acts: []string{"memory.available<500Mi for 1m0s"}},
		{name: "a break restarts the grace period", steps: []string{"400Mi", "1Gi", "400Mi", "400Mi"}, pressure: true},
		{name: "hard acts at once", steps: []string{"50Mi"}, pressure: true, acts: []string{"memory.available<100Mi"}},
		{name: "pressure held within the transition period", steps: []string{"50Mi", "1Gi", "1Gi"}, pressure: true},
		{name: "pressure clears after the transition period", steps: []string{"50Mi", "1Gi"}, after: []time.Duration{0, 5 * time.Minute}, pressure: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newState()
			var d decision
			for i, avail := range tc.steps {
				at := t0.Add(time.Duration(i) * 30 * time.Second)
				if tc.after != nil {
					at = t0.Add(tc.after[i])
				}
				d = synchronize(&st, ts, obs(avail), at, 5*time.Minute)
			}
			if got := d.conditions["MemoryPressure"]; got != tc.pressure {
				t.Errorf("MemoryPressure = %v, want %v", got, tc.pressure)
			}
			var acts []string
			for _, th := range d.act {
				acts = append(acts, th.String())
			}
			if strings.Join(acts, ",") != strings.Join(tc.acts, ",") {
				t.Errorf("acts on %v, want %v", acts, tc.acts)
			}
		})
	}
}

func TestMinimumReclaimKeepsThresholdMet(t *testing.T) {
	ts, err := ParseThresholds(map[string]string{"memory.available": "100Mi"}, nil, nil, map[string]string{"memory.available": "200Mi"})
	if err != nil {
		t.Fatal(err)
	}
	obs := func(avail string) observations {
		return observations{SignalMemoryAvailable: {available: resource.MustParse(avail), capacity: resource.MustParse("8Gi")}}
	}
	st := newState()
	t0 := time.Unix(1000, 0)
	if d := synchronize(&st, ts, obs("50Mi"), t0, time.Minute); len(d.act) != 1 {
		t.Fatalf("met below the threshold: acts %v", d.act)
	}
	// Above the threshold but below threshold + minimum reclaim: still met.
	if d := synchronize(&st, ts, obs("250Mi"), t0.Add(10*time.Second), time.Minute); len(d.act) != 1 {
		t.Fatalf("not yet reclaimed down to the minimum reclaim: acts %v", d.act)
	}
	if d := synchronize(&st, ts, obs("400Mi"), t0.Add(20*time.Second), time.Minute); len(d.act) != 0 {
		t.Fatalf("reclaimed past the minimum: acts %v", d.act)
	}
}

func TestHardEvictionReservation(t *testing.T) {
	ts, err := ParseThresholds(DefaultHard(), map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "1m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := HardEvictionReservation(ts, map[v1.ResourceName]resource.Quantity{
		v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	})
	if m, d := got[v1.ResourceMemory], got[v1.ResourceEphemeralStorage]; m.String() != "100Mi" || d.String() != "10Gi" || len(got) != 2 {
		t.Errorf("reservation %v, want memory 100Mi (the soft threshold does not count) and ephemeral-storage 10Gi", got)
	}
	if got := HardEvictionReservation(ts, nil); len(got) != 1 {
		t.Errorf("without capacity: %v, want memory only", got)
	}
}
