package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// namespacedConfigMapWatches is the API server's count of the watches on
// ConfigMaps of one namespace open now (apiserver_longrunning_requests;
// a single-object watch has scope "resource"), every client's: the node's
// and the control plane's own (kube-system/extension-apiserver-authentication).
func (c *cluster) namespacedConfigMapWatches(t *testing.T) float64 {
	t.Helper()
	return apiMetricSum(t, c.cs, func(line string) bool {
		return strings.HasPrefix(line, "apiserver_longrunning_requests{") && strings.Contains(line, `resource="configmaps"`) &&
			!strings.Contains(line, `scope="cluster"`) && strings.Contains(line, `verb="WATCH"`)
	})
}

// TestE2EClusterObjectWatchEndsWithLastPod: a pod of a new namespace reads
// its kube-root-ca.crt (the projected kube-api-access volume and a
// configMap volume) through a watch on that one object; once the pod and
// its namespace are deleted the node's watch is gone at once, and the
// node never lists the object again (the Node authorizer would refuse it:
// issue 10, "kube-root-ca.crt listed in namespaces deleted long ago"). On
// the old code the watch stayed open until the 10 minute idle timeout.
func TestE2EClusterObjectWatchEndsWithLastPod(t *testing.T) {
	c := newCluster(t)
	const node = "e2e-objwatch"
	a := c.startNode(t, node, agentOpts{})
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	ctx := context.Background()

	ns := fmt.Sprintf("objwatch-%d", time.Now().UnixNano()%1e6)
	if _, err := c.cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	testenv.WaitFor(t, time.Minute, ns+": default ServiceAccount and kube-root-ca.crt", func() (bool, error) {
		if _, err := c.cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, err
		}
		_, err := c.cs.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, err
	})
	base := c.namespacedConfigMapWatches(t)

	p := apiPod("reader", node, simImage, "sleep", "infinity")
	p.Namespace = ns
	p.Spec.Volumes = []v1.Volume{{Name: "ca", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "ca", MountPath: "/ca"}}
	if _, err := c.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitPod(t, ns, "reader", "Running and Ready", time.Minute, func(p *v1.Pod) bool { return isRunning(p) && podReady(p) })
	testenv.WaitFor(t, 30*time.Second, "the node's watch on kube-root-ca.crt", func() (bool, error) {
		n := c.namespacedConfigMapWatches(t)
		return n > base, fmt.Errorf("%v namespaced ConfigMap watches, %v before the pod", n, base)
	})

	if err := c.cs.CoreV1().Pods(ns).Delete(ctx, "reader", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "reader deleted from the API", func() (bool, error) {
		_, err := c.cs.CoreV1().Pods(ns).Get(ctx, "reader", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
	testenv.WaitFor(t, 15*time.Second, "the node's watch on kube-root-ca.crt stopped", func() (bool, error) {
		n := c.namespacedConfigMapWatches(t)
		return n <= base, fmt.Errorf("%v namespaced ConfigMap watches, %v before the pod", n, base)
	})

	if err := c.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 2*time.Minute, ns+" deleted", func() (bool, error) {
		_, err := c.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
	if n := c.namespacedConfigMapWatches(t); n > base {
		t.Errorf("%v namespaced ConfigMap watches after %s is gone, %v before the pod", n, ns, base)
	}
	if a.logContains(`kube-root-ca.crt\" is forbidden`) || a.logContains(`kube-root-ca.crt" is forbidden`) {
		t.Errorf("the node was refused kube-root-ca.crt:\n%s", a.logTail(40))
	}
}
