package podspec

import (
	"encoding/json"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// FuzzCRILabels checks the labels and annotations a restarted actorlet (and
// crictl) reads back from CRI objects, for any pod: the getters give back
// the pod's UID and container name whatever labels the pod brings (a pod
// label under io.kubernetes.* cannot spoof them), PodSelector selects the
// pod's sandbox, and the restart count, grace period and ports annotations
// parse back to what was written, as actors/pod parses them.
func FuzzCRILabels(f *testing.F) {
	f.Add("web", "default", "0b8e3f5a-uid", "app", "v1", "main", uint32(0), int64(30), int32(8080))
	f.Add("", "", "", LabelPodUID, "spoofed-uid", "", uint32(4294967295), int64(-5), int32(0))
	f.Add("p", "ns", "u", LabelContainerName, "other", "c\x00\n", uint32(7), int64(0), int32(-1))
	f.Add("p", "ns", "u", LabelPodName, "x", "c", uint32(1), int64(1<<62), int32(65535))
	f.Fuzz(func(t *testing.T, name, ns, uid, key, value, ctr string, attempt uint32, grace int64, port int32) {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(uid), Labels: map[string]string{key: value}},
			Spec: v1.PodSpec{
				TerminationGracePeriodSeconds: &grace,
				Containers:                    []v1.Container{{Name: ctr, Ports: []v1.ContainerPort{{ContainerPort: port}}}},
			},
		}
		sb := Labels(pod)
		if got := PodUIDOf(sb); got != pod.UID {
			t.Fatalf("sandbox labels give uid %q, want %q", got, pod.UID)
		}
		if sb[LabelPodName] != name || sb[LabelPodNamespace] != ns {
			t.Fatalf("sandbox labels name %q/%q, want %q/%q", sb[LabelPodNamespace], sb[LabelPodName], ns, name)
		}
		if key != LabelPodUID && key != LabelPodName && key != LabelPodNamespace && sb[key] != value {
			t.Fatalf("the pod's label %q=%q is lost: %v", key, value, sb)
		}
		for k, v := range PodSelector(pod.UID) {
			if sb[k] != v {
				t.Fatalf("PodSelector %s=%s does not select the sandbox (%v)", k, v, sb)
			}
		}
		if got := SandboxConfig(pod, attempt, "/var/log/pods").GetLabels(); PodUIDOf(got) != pod.UID {
			t.Fatalf("sandbox config labels give uid %q, want %q", PodUIDOf(got), pod.UID)
		}

		c := &pod.Spec.Containers[0]
		cfg := ContainerConfig(pod, c, attempt, "sha256:x", attempt%2 == 0)
		if got := ContainerNameOf(cfg.GetLabels()); got != ctr {
			t.Fatalf("container labels give name %q, want %q", got, ctr)
		}
		if got := PodUIDOf(cfg.GetLabels()); got != pod.UID {
			t.Fatalf("container labels give uid %q, want %q", got, pod.UID)
		}
		ann := cfg.GetAnnotations()
		if n, err := strconv.Atoi(ann[AnnotationRestartCount]); err != nil || n != int(attempt) {
			t.Fatalf("restart count annotation %q: %d %v, want %d", ann[AnnotationRestartCount], n, err, attempt)
		}
		if g, err := strconv.ParseInt(ann[AnnotationPodTerminationGrace], 10, 64); err != nil || g != GracePeriod(pod, nil) {
			t.Fatalf("grace annotation %q: %d %v, want %d", ann[AnnotationPodTerminationGrace], g, err, GracePeriod(pod, nil))
		}
		if (ann[AnnotationContainerInit] == "true") != (attempt%2 == 0) {
			t.Fatalf("init annotation %q for init=%v", ann[AnnotationContainerInit], attempt%2 == 0)
		}
		var ports []v1.ContainerPort
		if err := json.Unmarshal([]byte(ann[AnnotationContainerPorts]), &ports); err != nil || len(ports) != 1 || ports[0].ContainerPort != port {
			t.Fatalf("ports annotation %q: %v %v", ann[AnnotationContainerPorts], ports, err)
		}
		if h := ann[AnnotationContainerHash]; h == "" || h != ContainerHash(c) {
			t.Fatalf("hash annotation %q, want %q", h, ContainerHash(c))
		}
		if PodUIDOf(nil) != "" || ContainerNameOf(nil) != "" {
			t.Fatal("getters on nil labels")
		}
	})
}
