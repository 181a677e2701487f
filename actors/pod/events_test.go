package pod

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEventLog(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"}}
	type rec struct{ reason, key, msg string }
	tests := []struct {
		name    string
		records []rec
		want    []string
	}{
		{
			name:    "one event",
			records: []rec{{"Started", "app/1", "Started container app"}},
			want:    []string{"Normal Started Started container app"},
		},
		{
			name:    "the same key and message again: once",
			records: []rec{{"BackOff", "app", "Back-off 10s"}, {"BackOff", "app", "Back-off 10s"}, {"BackOff", "app", "Back-off 10s"}},
			want:    []string{"Normal BackOff Back-off 10s"},
		},
		{
			name:    "the message changes: again",
			records: []rec{{"BackOff", "app", "Back-off 10s"}, {"BackOff", "app", "Back-off 20s"}},
			want:    []string{"Normal BackOff Back-off 10s", "Normal BackOff Back-off 20s"},
		},
		{
			name:    "back to an earlier message: again (only the last one counts)",
			records: []rec{{"BackOff", "app", "A"}, {"BackOff", "app", "B"}, {"BackOff", "app", "A"}},
			want:    []string{"Normal BackOff A", "Normal BackOff B", "Normal BackOff A"},
		},
		{
			name:    "another key, the same message: recorded",
			records: []rec{{"Killing", "c1", "Stopping container app"}, {"Killing", "c2", "Stopping container app"}},
			want:    []string{"Normal Killing Stopping container app", "Normal Killing Stopping container app"},
		},
		{
			name:    "another reason, the same key: recorded",
			records: []rec{{"Created", "app/1", "x"}, {"Started", "app/1", "x"}},
			want:    []string{"Normal Created x", "Normal Started x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &fakeRecorder{}
			l := eventLog{rec: r}
			for _, e := range tt.records {
				l.record(pod, v1.EventTypeNormal, e.reason, e.key, "%s", e.msg)
			}
			if !slices.Equal(r.events, tt.want) {
				t.Errorf("events %q, want %q", r.events, tt.want)
			}
		})
	}
}

func TestEventLogWithoutRecorderOrPod(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	var none eventLog // no recorder: a no-op
	none.record(pod, v1.EventTypeNormal, "Started", "app", "Started container %s", "app")
	if none.last != nil {
		t.Errorf("a log without recorder remembered %v", none.last)
	}
	r := &fakeRecorder{}
	l := eventLog{rec: r}
	l.record(nil, v1.EventTypeNormal, "Started", "app", "Started container %s", "app") // no pod yet
	l.record(pod, v1.EventTypeNormal, "Started", "app", "Started container %s", "app")
	if want := []string{"Normal Started Started container app"}; !slices.Equal(r.events, want) {
		t.Errorf("events %q, want %q: an event without a pod is dropped and not remembered", r.events, want)
	}
}
