package pod

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestImageWaits(t *testing.T) {
	app := &v1.Container{Name: "app", Image: "app:1"}
	side := &v1.Container{Name: "side", Image: "side:1"}
	type step struct {
		op       string // add, take, drop
		c        *v1.Container
		id       uint64 // take: the ID; add: the ID wanted
		wantOK   bool   // take
		wantName string // take
	}
	tests := []struct {
		name    string
		steps   []step
		wantAny bool
	}{
		{name: "nothing waits", wantAny: false},
		{
			name:    "an add waits, with the first ID",
			steps:   []step{{op: "add", c: app, id: 1}},
			wantAny: true,
		},
		{
			name:    "IDs grow",
			steps:   []step{{op: "add", c: app, id: 1}, {op: "add", c: side, id: 2}},
			wantAny: true,
		},
		{
			name:  "take returns the start and forgets it",
			steps: []step{{op: "add", c: app, id: 1}, {op: "take", id: 1, wantOK: true, wantName: "app"}},
		},
		{
			name: "take of each of two",
			steps: []step{{op: "add", c: app, id: 1}, {op: "add", c: side, id: 2},
				{op: "take", id: 2, wantOK: true, wantName: "side"}, {op: "take", id: 1, wantOK: true, wantName: "app"}},
		},
		{
			name:    "one of two taken: the other still waits",
			steps:   []step{{op: "add", c: app, id: 1}, {op: "add", c: side, id: 2}, {op: "take", id: 1, wantOK: true, wantName: "app"}},
			wantAny: true,
		},
		{
			name:  "a second take of the same ID finds nothing",
			steps: []step{{op: "add", c: app, id: 1}, {op: "take", id: 1, wantOK: true, wantName: "app"}, {op: "take", id: 1}},
		},
		{
			name:    "take of an unknown ID finds nothing",
			steps:   []step{{op: "add", c: app, id: 1}, {op: "take", id: 7}},
			wantAny: true,
		},
		{name: "take on the zero value finds nothing", steps: []step{{op: "take", id: 1}}},
		{
			name:  "drop forgets every wait",
			steps: []step{{op: "add", c: app, id: 1}, {op: "add", c: side, id: 2}, {op: "drop"}, {op: "take", id: 1}, {op: "take", id: 2}},
		},
		{name: "drop on the zero value", steps: []step{{op: "drop"}}},
		{
			name: "IDs are not reused after a drop: a late answer matches nothing",
			steps: []step{{op: "add", c: app, id: 1}, {op: "drop"}, {op: "add", c: side, id: 2},
				{op: "take", id: 1}, {op: "take", id: 2, wantOK: true, wantName: "side"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w imageWaits
			for i, s := range tt.steps {
				switch s.op {
				case "add":
					if got := w.add(action{kind: actStartContainer, container: s.c}); got != s.id {
						t.Fatalf("step %d: add = %d, want %d", i, got, s.id)
					}
				case "take":
					act, ok := w.take(s.id)
					if ok != s.wantOK {
						t.Fatalf("step %d: take(%d) ok = %v, want %v", i, s.id, ok, s.wantOK)
					}
					if ok && act.container.Name != s.wantName {
						t.Fatalf("step %d: take(%d) = %s, want %s", i, s.id, act.container.Name, s.wantName)
					}
				case "drop":
					w.drop()
				}
			}
			if got := w.any(); got != tt.wantAny {
				t.Errorf("any() = %v, want %v", got, tt.wantAny)
			}
		})
	}
}
