package kube

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// upstreamPodStatusPatch is the patch as upstream's status manager builds
// it (pkg/util/pod PatchPodStatus, preparePatchBytesForPodStatus): the
// two-way merge patch of the two pods, decoded to add metadata.uid and
// encoded again. It is the reference the patch PatchPodStatus sends is
// checked against, and the "before" of the benchmark.
func upstreamPodStatusPatch(uid types.UID, oldStatus, newStatus *v1.PodStatus) ([]byte, error) {
	oldData, err := json.Marshal(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: *oldStatus})
	if err != nil {
		return nil, err
	}
	newData, err := json.Marshal(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: *newStatus})
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Pod{})
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	m["metadata"] = map[string]any{"uid": string(uid)}
	return json.Marshal(m)
}

// startTransition is a pod's status write when its only container has
// started: Pending to Running, Ready and ContainersReady turn True, the
// container runs, the pod IP is known.
func startTransition() (types.UID, *v1.PodStatus, *v1.PodStatus) {
	created := metav1.NewTime(time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC))
	started := metav1.NewTime(created.Add(2 * time.Second))
	old := &v1.PodStatus{
		Phase: v1.PodPending,
		Conditions: []v1.PodCondition{
			{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue, LastTransitionTime: created},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: created},
			{Type: v1.PodReady, Status: v1.ConditionFalse, LastTransitionTime: created, Reason: "ContainersNotReady", Message: "containers with unready status: [app]"},
			{Type: v1.ContainersReady, Status: v1.ConditionFalse, LastTransitionTime: created, Reason: "ContainersNotReady", Message: "containers with unready status: [app]"},
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: created},
		},
		HostIP:    "10.0.0.5",
		HostIPs:   []v1.HostIP{{IP: "10.0.0.5"}},
		StartTime: &created,
		QOSClass:  v1.PodQOSBestEffort,
		ContainerStatuses: []v1.ContainerStatus{{
			Name:  "app",
			State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}},
			Image: "registry.k8s.io/pause:3.10",
		}},
	}
	started2 := true
	upd := old.DeepCopy()
	upd.Phase = v1.PodRunning
	upd.Conditions[2] = v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: started}
	upd.Conditions[3] = v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: started}
	upd.PodIP = "10.244.1.17"
	upd.PodIPs = []v1.PodIP{{IP: "10.244.1.17"}}
	upd.ContainerStatuses = []v1.ContainerStatus{{
		Name:        "app",
		State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}},
		Ready:       true,
		Started:     &started2,
		Image:       "registry.k8s.io/pause:3.10",
		ImageID:     "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
		ContainerID: "containerd://4f0e3b1a2c7d9e8f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f",
	}}
	return "6a1f3e0c-7b1d-4c55-9a3e-2d9f1c0b8e77", old, upd
}

// decode is a JSON document as a map, to compare patches by content rather
// than by key order.
func decode(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("patch %s: %v", b, err)
	}
	return m
}

func TestWithUID(t *testing.T) {
	tests := []struct {
		name  string
		patch string
		uid   types.UID
		want  string
	}{
		{name: "empty patch", patch: `{}`, uid: "u1", want: `{"metadata":{"uid":"u1"}}`},
		{name: "status patch", patch: `{"status":{"phase":"Running"}}`, uid: "u1",
			want: `{"metadata":{"uid":"u1"},"status":{"phase":"Running"}}`},
		{name: "uid to escape", patch: `{"status":{"phase":"Running"}}`, uid: "a\"b\\c\n<é>\xff",
			want: `{"metadata":{"uid":"a\"b\\c\n\u003cé\u003e\ufffd"},"status":{"phase":"Running"}}`},
		{name: "empty uid", patch: `{}`, uid: "", want: `{"metadata":{"uid":""}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := withUID([]byte(tc.patch), tc.uid)
			if string(got) != tc.want {
				t.Errorf("withUID(%s, %q) = %s, want %s", tc.patch, tc.uid, got, tc.want)
			}
			// Invalid UTF-8 reads back as U+FFFD, as []rune makes it.
			if m := decode(t, got); m["metadata"].(map[string]any)["uid"] != string([]rune(string(tc.uid))) {
				t.Errorf("uid decodes to %q, want %q", m["metadata"].(map[string]any)["uid"], tc.uid)
			}
		})
	}
}

// TestPodStatusPatchStartTransition: the patch of a typical start is the
// upstream one, key for key.
func TestPodStatusPatchStartTransition(t *testing.T) {
	uid, old, upd := startTransition()
	want, err := upstreamPodStatusPatch(uid, old, upd)
	if err != nil {
		t.Fatal(err)
	}
	got, err := podStatusPatch(uid, old, upd)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(decode(t, got), decode(t, want)) {
		t.Errorf("patch\n%s\nwant (upstream)\n%s", got, want)
	}
}

// BenchmarkPodStatusPatch builds the status patch of a typical start
// (startTransition) the upstream way and the way PatchPodStatus does.
func BenchmarkPodStatusPatch(b *testing.B) {
	uid, old, upd := startTransition()
	for _, bc := range []struct {
		name string
		fn   func(types.UID, *v1.PodStatus, *v1.PodStatus) ([]byte, error)
	}{
		{"upstream", upstreamPodStatusPatch},
		{"actorlet", podStatusPatch},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.fn(uid, old, upd); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
