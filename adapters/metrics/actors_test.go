package metrics

import (
	"strings"
	"testing"

	"github.com/actorlet/actorlet/internal/actorkit"
)

func TestActorStats(t *testing.T) {
	tests := []struct {
		name  string
		stats []actorkit.KindStats
		want  []string
		not   []string
	}{
		{
			name: "no source: the counters initialised at zero, live actors as set",
			want: []string{`actorlet_actor_messages_total{kind="pod"} 0`, `actorlet_actors{kind="node"} 1`},
			not:  []string{"actorlet_actor_mailbox_length", "actorlet_actor_message_handling_duration_seconds"},
		},
		{
			name: "mailbox, handled and histogram by kind",
			stats: []actorkit.KindStats{
				{Kind: "pod", Live: 3, MailboxLength: 7, MailboxMax: 5, Handled: 10, HandlingSeconds: 0.25, Buckets: []uint64{4, 5, 1}},
				{Kind: "pleg", Live: 1, Handled: 2, HandlingSeconds: 0.002, Buckets: []uint64{0, 2, 0}},
			},
			want: []string{
				"# TYPE actorlet_actor_mailbox_length gauge",
				`actorlet_actor_mailbox_length{kind="pod"} 7`,
				`actorlet_actor_mailbox_length_max{kind="pod"} 5`,
				`actorlet_actor_messages_total{kind="pod"} 10`,
				`actorlet_actor_messages_total{kind="pleg"} 2`,
				`actorlet_actor_messages_total{kind="image"} 0`,
				"# TYPE actorlet_actor_message_handling_duration_seconds histogram",
				`actorlet_actor_message_handling_duration_seconds_bucket{kind="pod",le="0.001"} 4`,
				`actorlet_actor_message_handling_duration_seconds_bucket{kind="pod",le="0.01"} 9`,
				`actorlet_actor_message_handling_duration_seconds_bucket{kind="pod",le="+Inf"} 10`,
				`actorlet_actor_message_handling_duration_seconds_sum{kind="pod"} 0.25`,
				`actorlet_actor_message_handling_duration_seconds_count{kind="pod"} 10`,
				`actorlet_actors{kind="pod"} 3`,
				`actorlet_actors{kind="pleg"} 1`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := New()
			r.InitActorKinds("pod", "pleg", "image")
			r.SetActors("node", 1)
			if tc.stats != nil {
				r.SetActorStats([]float64{0.001, 0.01}, func() []actorkit.KindStats { return tc.stats })
			}
			out := scrape(t, r)
			lines := strings.Split(out, "\n")
			for _, w := range tc.want {
				if !hasLine(lines, w) {
					t.Errorf("missing %q", w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("unexpected %q", n)
				}
			}
			if t.Failed() {
				t.Logf("exposition:\n%s", grepActorlet(out))
			}
		})
	}
}

func grepActorlet(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "actorlet_") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
