package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/testenv"
)

const (
	refusedMark   = "actorlet.io/e2e-deny-status"
	refusedPolicy = "e2e-deny-marked-pod-status"
	// statusRefusedCondition is status.ConditionStatusRefused.
	statusRefusedCondition = "actorlet.io/StatusWriteRefused"
)

// denyMarkedPodStatus installs a ValidatingAdmissionPolicy that refuses
// every write of pods/status of a pod labelled refusedMark, and waits
// until the API server enforces it (policies load asynchronously). The
// returned func removes its binding.
func denyMarkedPodStatus(t *testing.T, c *cluster) (unbind func()) {
	t.Helper()
	ctx := context.Background()
	ar := c.cs.AdmissionregistrationV1()
	fail := admissionv1.Fail
	// The reason of the denial: 403 Forbidden (a policy's default is 422
	// Invalid, which the unit tests cover).
	forbidden := metav1.StatusReasonForbidden
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: refusedPolicy},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/status"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("!has(object.metadata.labels) || !(%q in object.metadata.labels)", refusedMark),
				Message:    "status writes of marked pods are denied",
				Reason:     &forbidden,
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: refusedPolicy},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        refusedPolicy,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	_ = ar.ValidatingAdmissionPolicyBindings().Delete(ctx, refusedPolicy, metav1.DeleteOptions{})
	_ = ar.ValidatingAdmissionPolicies().Delete(ctx, refusedPolicy, metav1.DeleteOptions{})
	if _, err := ar.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the policy (is ValidatingAdmissionPolicy on in kube-apiserver?): %v", err)
	}
	if _, err := ar.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	unbind = func() {
		_ = ar.ValidatingAdmissionPolicyBindings().Delete(context.Background(), refusedPolicy, metav1.DeleteOptions{})
	}
	t.Cleanup(func() {
		unbind()
		_ = ar.ValidatingAdmissionPolicies().Delete(context.Background(), refusedPolicy, metav1.DeleteOptions{})
	})

	// A marked pod bound to no node: its status patch is refused once
	// the policy is enforced.
	pods := c.cs.CoreV1().Pods("default")
	probe := apiPod("refused-status-probe", "no-such-node", "localhost/none:1", "true")
	probe.Labels[refusedMark] = "yes"
	if _, err := pods.Create(ctx, probe, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = pods.Delete(context.Background(), probe.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	testenv.WaitFor(t, time.Minute, "the policy enforced", func() (bool, error) {
		_, err := pods.Patch(ctx, probe.Name, types.MergePatchType, []byte(`{"status":{"message":"probe"}}`),
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, "status")
		return apierrors.IsForbidden(err), fmt.Errorf("dry-run status patch: %v", err)
	})
	return unbind
}

// metricValue is the value of the series of /metrics whose name and labels
// are exactly series (`name{a="x",b="y"}`, labels in exposition order).
func metricValue(text, series string) (float64, bool) {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// TestE2EClusterContainerdStatusRefused: a ValidatingAdmissionPolicy
// refuses every status write of a marked pod that runs on real
// containerd. The agent logs the refusal once with the API server's
// reason and message, records a FailedStatusUpdate event on the pod,
// counts actorlet_pod_status_refused_total{reason="Forbidden"}, shows the
// actorlet.io/StatusWriteRefused condition in its /pods, and keeps
// retrying with back-off only; once the policy is unbound its next try is
// taken, the pod is Running in the API and the condition goes.
func TestE2EClusterContainerdStatusRefused(t *testing.T) {
	const node, name = "e2e-status-refused", "status-refused"
	c := newCluster(t)
	env := testenv.ContainerdInfo(t)
	unbind := denyMarkedPodStatus(t, c)
	a := c.startNode(t, node, agentOpts{endpoint: env.Endpoint})
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	pods := c.cs.CoreV1().Pods("default")
	p := apiPod(name, node, env.BusyboxImage, "sleep", "3600")
	p.Labels[refusedMark] = "yes"
	created, err := pods.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = pods.Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})

	// /pods: the container runs, and the condition says why the API
	// server does not show it.
	served := a.waitPod(2*time.Minute, name, "running with the refused condition", func(p *v1.Pod) bool {
		return isRunning(p) && refusedCondOf(p) != nil
	})
	cond := refusedCondOf(served)
	if cond.Reason != "Forbidden" || !strings.Contains(cond.Message, "403") || !strings.Contains(cond.Message, refusedPolicy) ||
		!strings.Contains(cond.Message, "status writes of marked pods are denied") {
		t.Errorf("condition %+v", cond)
	}
	t.Logf("/pods condition: %s %s: %s", cond.Type, cond.Reason, cond.Message)

	// The event on the pod.
	var ev v1.Event
	testenv.WaitFor(t, 30*time.Second, "a FailedStatusUpdate event", func() (bool, error) {
		l, err := c.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.uid=" + string(created.UID) + ",reason=FailedStatusUpdate"})
		if err != nil || len(l.Items) == 0 {
			return false, fmt.Errorf("events: %v %v", l, err)
		}
		ev = l.Items[0]
		return true, nil
	})
	if ev.Type != v1.EventTypeWarning || !strings.Contains(ev.Message, refusedPolicy) {
		t.Errorf("event %s %s: %s", ev.Type, ev.Reason, ev.Message)
	}
	t.Logf("event: %s %s: %s", ev.Type, ev.Reason, ev.Message)

	// The metric.
	var refused float64
	testenv.WaitFor(t, 30*time.Second, "the refusal counted", func() (bool, error) {
		v, ok := metricValue(a.metrics(), `actorlet_pod_status_refused_total{reason="Forbidden"}`)
		refused = v
		return ok && v >= 1, fmt.Errorf("value %v found %v", v, ok)
	})

	// The API server still shows no Running pod.
	if got, err := pods.Get(ctx, name, metav1.GetOptions{}); err != nil || got.Status.Phase == v1.PodRunning {
		t.Fatalf("the API shows %v (%v) while its status writes are denied", got.Status.Phase, err)
	}

	// Logged once (per reason and field), however many retries.
	logLine := regexp.MustCompile(`pod status refused by the API server.*pod=default/` + name + `\b`)
	if n := len(logLine.FindAll(readFile(t, a.logPath), -1)); n != 1 {
		t.Errorf("%d refusal log lines, want 1:\n%s", n, a.logTail(40))
	}

	// Unbound: a later try is taken (back-off at most a minute).
	unbind()
	c.waitPod(t, "default", name, "Running in the API", 90*time.Second, isRunning)
	a.waitPod(30*time.Second, name, "the refused condition gone", func(p *v1.Pod) bool { return refusedCondOf(p) == nil })
	v, _ := metricValue(a.metrics(), `actorlet_pod_status_refused_total{reason="Forbidden"}`)
	t.Logf("refused writes counted: %v at first report, %v in all (bounded by the back-off)", refused, v)
	if !a.logContains("pod status taken by the API server again") {
		t.Errorf("no log line of the refusal's end")
	}
}

func refusedCondOf(p *v1.Pod) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == statusRefusedCondition {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(b)
}

// TestE2EClusterContainerdTerminatedContainersMetric: a pod whose init
// container completes and whose container exits 42 on real containerd is
// counted in kubelet_terminated_containers_total with upstream's labels
// (container_type, exit_code, reason), once each.
func TestE2EClusterContainerdTerminatedContainersMetric(t *testing.T) {
	const node, name = "e2e-terminated", "terminated-42"
	c := newCluster(t)
	env := testenv.ContainerdInfo(t)
	a := c.startNode(t, node, agentOpts{endpoint: env.Endpoint})
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	ctx := context.Background()
	pods := c.cs.CoreV1().Pods("default")
	p := apiPod(name, node, env.BusyboxImage, "sh", "-c", "exit 42")
	p.Spec.RestartPolicy = v1.RestartPolicyNever
	p.Spec.InitContainers = []v1.Container{{Name: "init", Image: env.BusyboxImage, Command: []string{"true"}, ImagePullPolicy: v1.PullIfNotPresent}}
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = pods.Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	c.waitPod(t, "default", name, "Failed", 2*time.Minute, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	want := map[string]float64{
		`kubelet_terminated_containers_total{container_type="container",exit_code="42",reason="Error"}`:         1,
		`kubelet_terminated_containers_total{container_type="init_container",exit_code="0",reason="Completed"}`: 1,
	}
	m := a.metrics()
	for series, n := range want {
		if v, ok := metricValue(m, series); !ok || v != n {
			t.Errorf("%s = %v (found %v), want %v", series, v, ok, n)
		}
	}
	if t.Failed() {
		t.Logf("/metrics terminated series:\n%s", grepLines(m, "kubelet_terminated_containers_total"))
	}
}

func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
