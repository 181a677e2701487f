package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIsCriticalPod(t *testing.T) {
	prio := func(n int32) *int32 { return &n }
	pod := func(source string, mirror bool, priority *int32) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}, Spec: v1.PodSpec{Priority: priority}}
		if source != "" {
			p.Annotations[ConfigSourceAnnotation] = source
		}
		if mirror {
			p.Annotations[ConfigMirrorAnnotation] = "hash"
		}
		return p
	}
	for _, tt := range []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"API pod", pod("api", false, nil), false},
		{"pushed pod", pod("push", false, nil), false},
		{"static pod from a file", pod("file", false, nil), true},
		{"static pod from a URL", pod("http", false, nil), true},
		{"mirror pod", pod("api", true, nil), true},
		{"system-critical priority", pod("api", false, prio(2000001000)), true},
		{"high but not critical priority", pod("api", false, prio(1000000)), false},
		{"no source annotation", pod("", false, nil), false},
		{"nil", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsCriticalPod(tt.pod); got != tt.want {
				t.Fatalf("IsCriticalPod = %v, want %v", got, tt.want)
			}
		})
	}
}
