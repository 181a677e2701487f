package podspec

import (
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestLabelNamesAreUpstreams(t *testing.T) {
	// crictl and other node tools read these exact names.
	tests := []struct{ name, got, want string }{
		{name: "pod uid", got: LabelPodUID, want: "io.kubernetes.pod.uid"},
		{name: "pod name", got: LabelPodName, want: "io.kubernetes.pod.name"},
		{name: "pod namespace", got: LabelPodNamespace, want: "io.kubernetes.pod.namespace"},
		{name: "container name", got: LabelContainerName, want: "io.kubernetes.container.name"},
		{name: "container hash", got: AnnotationContainerHash, want: "io.kubernetes.container.hash"},
		{name: "restart count", got: AnnotationRestartCount, want: "io.kubernetes.container.restartCount"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("%q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestLabels(t *testing.T) {
	tests := []struct {
		name string
		pod  *v1.Pod
		want map[string]string
	}{
		{
			name: "pod labels kept, identity added",
			pod:  &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", Labels: map[string]string{"app": "web"}}},
			want: map[string]string{"app": "web", LabelPodUID: "u1", LabelPodName: "web", LabelPodNamespace: "ns"},
		},
		{
			name: "identity wins over a pod label of the same key",
			pod:  &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", Labels: map[string]string{LabelPodUID: "forged"}}},
			want: map[string]string{LabelPodUID: "u1", LabelPodName: "web", LabelPodNamespace: "ns"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Labels(tt.pod)
			if !maps.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			if PodUIDOf(got) != tt.pod.UID {
				t.Fatalf("PodUIDOf = %q", PodUIDOf(got))
			}
		})
	}
}

func TestGetters(t *testing.T) {
	tests := []struct {
		name    string
		labels  map[string]string
		wantUID types.UID
		wantCtr string
	}{
		{name: "container labels", labels: map[string]string{LabelPodUID: "u1", LabelContainerName: "app"}, wantUID: "u1", wantCtr: "app"},
		{name: "sandbox labels", labels: map[string]string{LabelPodUID: "u2"}, wantUID: "u2"},
		{name: "nil", labels: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodUIDOf(tt.labels); got != tt.wantUID {
				t.Errorf("PodUIDOf = %q, want %q", got, tt.wantUID)
			}
			if got := ContainerNameOf(tt.labels); got != tt.wantCtr {
				t.Errorf("ContainerNameOf = %q, want %q", got, tt.wantCtr)
			}
		})
	}
}

func TestPodSelector(t *testing.T) {
	got := PodSelector("u1")
	if want := map[string]string{LabelPodUID: "u1"}; !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
