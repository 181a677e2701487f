package bench

import "testing"

func TestSizedSim(t *testing.T) {
	tests := []struct {
		name  string
		query string
		pods  int
		want  string
	}{
		{"no options", "", 10000, "node-memory=101065949184"},
		{"other options kept", "start-latency=50ms", 100, "start-latency=50ms&node-memory=18018729984"},
		{"leading question mark", "?start-latency=50ms", 100, "start-latency=50ms&node-memory=18018729984"},
		{"the user's node memory wins", "node-memory=64Gi", 10000, "node-memory=64Gi"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sizedSim(tc.query, tc.pods); got != tc.want {
				t.Errorf("sizedSim(%q, %d) = %q, want %q", tc.query, tc.pods, got, tc.want)
			}
		})
	}
}
