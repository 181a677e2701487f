package kube

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
)

func managed() []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}
}

// TestWatchPodsDropsManagedFields: the pods the node's informer hands on
// carry no managedFields, and everything else the node reads (labels,
// annotations, spec, status) is kept.
func TestWatchPodsDropsManagedFields(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", Labels: map[string]string{"app": "a"},
			Annotations: map[string]string{"k": "v"}, ManagedFields: managed()},
		Spec:   v1.PodSpec{NodeName: "node-a", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	c := NewForClientset(fake.NewClientset(pod), "node-a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan *v1.Pod, 1)
	go c.WatchPods(ctx, func(p *v1.Pod) { got <- p.DeepCopy() }, func(*v1.Pod) {}, func() {})
	select {
	case p := <-got:
		if p.ManagedFields != nil {
			t.Errorf("managedFields kept: %v", p.ManagedFields)
		}
		if p.Labels["app"] != "a" || p.Annotations["k"] != "v" || len(p.Spec.Containers) != 1 || p.Status.Phase != v1.PodPending {
			t.Errorf("pod lost fields the node reads: %+v", p)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no pod from the informer")
	}
}

func TestStripTransforms(t *testing.T) {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "s1", ResourceVersion: "7", ManagedFields: managed(),
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"}, Labels: map[string]string{"a": "b"}},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: "10.0.0.10", ClusterIPs: []string{"10.0.0.10"},
			Selector: map[string]string{"app": "web"},
			Ports:    []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	tests := []struct {
		name  string
		fn    func(any) (any, error)
		in    any
		check func(t *testing.T, out any)
	}{
		{name: "configmap keeps its data", fn: stripManagedFields,
			in: &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", ManagedFields: managed()}, Data: map[string]string{"a": "1"}},
			check: func(t *testing.T, out any) {
				cm := out.(*v1.ConfigMap)
				if cm.ManagedFields != nil || cm.Data["a"] != "1" || cm.Name != "cm" {
					t.Errorf("got %+v", cm)
				}
			}},
		{name: "a non-object passes", fn: stripManagedFields, in: "tombstone",
			check: func(t *testing.T, out any) {
				if out != "tombstone" {
					t.Errorf("got %v", out)
				}
			}},
		{name: "service keeps what its env variables need", fn: stripService, in: svc,
			check: func(t *testing.T, out any) {
				s := out.(*v1.Service)
				if s.Name != "web" || s.Namespace != "ns" || s.ResourceVersion != "7" || s.Spec.ClusterIP != "10.0.0.10" ||
					len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 80 || s.Spec.Ports[0].Protocol != v1.ProtocolTCP {
					t.Errorf("service lost what ServiceEnv reads: %+v", s)
				}
				if s.ManagedFields != nil || s.Annotations != nil || s.Labels != nil || s.Spec.Selector != nil {
					t.Errorf("service kept what the node never reads: %+v", s)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.fn(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, out)
		})
	}
}

// TestPatchPodStatusAnswersWithoutSpec: the answer of a status write
// carries what the status writer keeps (UID, resource version, status) and
// neither the spec nor managedFields.
func TestPatchPodStatusAnswersWithoutSpec(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", ManagedFields: managed()},
		Spec:       v1.PodSpec{NodeName: "node-a", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		Status:     v1.PodStatus{Phase: v1.PodPending},
	}
	c := NewForClientset(fake.NewClientset(pod), "node-a")
	got, err := c.PatchPodStatus(context.Background(), "ns", "p", "u1", &pod.Status, &v1.PodStatus{Phase: v1.PodRunning})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != "u1" || got.Name != "p" || got.Status.Phase != v1.PodRunning {
		t.Errorf("answer %+v, want pod u1 Running", got)
	}
	if len(got.Spec.Containers) != 0 || got.ManagedFields != nil {
		t.Errorf("answer kept the spec or managedFields: %+v", got)
	}
}
