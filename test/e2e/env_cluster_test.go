package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/actorlet/actorlet/internal/testenv"
)

// TestE2EClusterServiceEnvVars: a container gets the variables of the
// services of its namespace (enableServiceLinks, the default) and of the
// master service `kubernetes` always, as upstream ("Pods should contain
// environment variables for services" of the NodeConformance suite).
func TestE2EClusterServiceEnvVars(t *testing.T) {
	c := newCluster(t)
	a := c.startNode(t, "e2e-svcenv", agentOpts{})
	c.waitNodeReady(t, "e2e-svcenv", v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "fooservice", Namespace: "default"},
		Spec: v1.ServiceSpec{Selector: map[string]string{"name": "srv"},
			Ports: []v1.ServicePort{{Port: 8765, TargetPort: intstr.FromInt32(8080)}}},
	}
	created, err := c.cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.cs.CoreV1().Services("default").Delete(context.Background(), "fooservice", metav1.DeleteOptions{})
	})
	master, err := c.cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	script := "echo FOO=$FOOSERVICE_SERVICE_HOST:$FOOSERVICE_SERVICE_PORT LINK=$FOOSERVICE_PORT_8765_TCP_ADDR K=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT; sleep 3600"
	linked := apiPod("svcenv-linked", "e2e-svcenv", simImage, "sh", "-c", script)
	unlinked := apiPod("svcenv-unlinked", "e2e-svcenv", simImage, "sh", "-c", script)
	no := false
	unlinked.Spec.EnableServiceLinks = &no
	for _, p := range []*v1.Pod{linked, unlinked} {
		if _, err := c.cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.waitPod(t, "default", p.Name, "Running", time.Minute, isRunning)
	}
	k := "K=" + master.Spec.ClusterIP + ":" + itoa(master.Spec.Ports[0].Port)
	a.waitLog(t, "svcenv-linked", "main", "the linked pod sees the namespace's service and the master service", func(log string) bool {
		return strings.Contains(log, "FOO="+created.Spec.ClusterIP+":8765 LINK="+created.Spec.ClusterIP+" "+k)
	})
	a.waitLog(t, "svcenv-unlinked", "main", "the unlinked pod sees the master service only", func(log string) bool {
		return strings.Contains(log, "FOO=: LINK= "+k)
	})
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// TestE2EClusterFinalizerKeepsTerminalStatus: a pod held by a finalizer,
// once deleted, is killed and its terminal status (phase Failed or
// Succeeded, its container terminated) is written before the final
// delete, as upstream ("Lifecycle Sleep Hook" specs read the container's
// finish time from it); once the finalizer is removed the pod is gone. On
// the old code the pod stayed Running in the API.
func TestE2EClusterFinalizerKeepsTerminalStatus(t *testing.T) {
	c := newCluster(t)
	c.startNode(t, "e2e-final", agentOpts{})
	c.waitNodeReady(t, "e2e-final", v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	const finalizer = "e2e.actorlet.io/hold"
	p := apiPod("held", "e2e-final", simImage, "sleep", "infinity")
	p.Finalizers = []string{finalizer}
	if _, err := c.cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	unhold := func() {
		_, _ = c.cs.CoreV1().Pods("default").Patch(context.Background(), "held", types.JSONPatchType,
			[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
	}
	t.Cleanup(unhold)
	c.waitPod(t, "default", "held", "Running", time.Minute, isRunning)
	if err := c.cs.CoreV1().Pods("default").Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got := c.waitPod(t, "default", "held", "terminal with its container terminated", time.Minute, func(p *v1.Pod) bool {
		return (p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded) &&
			len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Terminated != nil
	})
	term := got.Status.ContainerStatuses[0].State.Terminated
	if term.FinishedAt.IsZero() || term.ContainerID == "" {
		t.Errorf("terminated state %+v: want its finish time and container ID", term)
	}
	if got.DeletionTimestamp == nil {
		t.Errorf("the pod is not being deleted: %+v", got.ObjectMeta)
	}
	unhold()
	testenv.WaitFor(t, time.Minute, "held deleted once its finalizer is removed", func() (bool, error) {
		_, err := c.cs.CoreV1().Pods("default").Get(ctx, "held", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

// TestE2EClusterDeletedPodLogsRemoved: the log directory of a pod deleted
// from the API (<pod-logs-dir>/<ns>_<name>_<uid>) is removed by the
// housekeeping sweep, as upstream's container GC removes the logs of pods
// gone.
func TestE2EClusterDeletedPodLogsRemoved(t *testing.T) {
	c := newCluster(t)
	a := c.startNode(t, "e2e-podlogs", agentOpts{})
	c.waitNodeReady(t, "e2e-podlogs", v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	p := apiPod("logged", "e2e-podlogs", simImage, "sh", "-c", "echo hello; sleep 3600")
	if _, err := c.cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := c.waitPod(t, "default", "logged", "Running", time.Minute, isRunning)
	dir := filepath.Join(a.logsDir, "default_logged_"+string(got.UID))
	testenv.WaitFor(t, 30*time.Second, "the pod's log directory", func() (bool, error) {
		_, err := os.Stat(dir)
		return err == nil, err
	})
	if err := c.cs.CoreV1().Pods("default").Delete(ctx, "logged", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "logged deleted from the API", func() (bool, error) {
		_, err := c.cs.CoreV1().Pods("default").Get(ctx, "logged", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
	testenv.WaitFor(t, time.Minute, "the pod's log directory removed", func() (bool, error) {
		_, err := os.Stat(dir)
		return os.IsNotExist(err), fmt.Errorf("%s: %v; agent log: %s", dir, err, a.logTail(20))
	})
}
