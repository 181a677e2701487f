package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/actorlet/actorlet/internal/testenv"
)

// Eviction on the simulated runtime (issue 12): the node is the sim's own
// (sim://?node-memory=2Gi), pods consume its memory with the sim shell's
// `alloc`, and what a user sees is checked: the pods' status on /pods,
// /stats/summary, /metrics, admission refusals, the runtime itself.

const mi = int64(1) << 20

// summary reads /stats/summary on the read-only port.
func (a *agent) summary() (*statsapi.Summary, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/stats/summary", a.roPort))
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/stats/summary: %d %s", resp.StatusCode, b)
	}
	var s statsapi.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("/stats/summary: %w", err)
	}
	return &s, nil
}

// evWorkingSet is the memory working set of pod's container in s (-1:
// not reported).
func evWorkingSet(s *statsapi.Summary, pod, container string) int64 {
	for _, p := range s.Pods {
		if p.PodRef.Name != pod {
			continue
		}
		for _, c := range p.Containers {
			if c.Name == container && c.Memory != nil && c.Memory.WorkingSetBytes != nil {
				return int64(*c.Memory.WorkingSetBytes)
			}
		}
	}
	return -1
}

// evNodeAvailable is the node's available memory in s (-1: not reported).
func evNodeAvailable(s *statsapi.Summary) int64 {
	if s.Node.Memory == nil || s.Node.Memory.AvailableBytes == nil {
		return -1
	}
	return int64(*s.Node.Memory.AvailableBytes)
}

// evicted: the pod ended Failed with reason Evicted.
func evicted(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodFailed && p.Status.Reason == "Evicted"
}

// evConditionTime is when the pod's condition of type t last changed
// (zero: the pod has no such condition).
func evConditionTime(p *v1.Pod, t v1.PodConditionType) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// evStartedAt is when the pod's first container last started (as the
// runtime reported it; zero if unknown).
func evStartedAt(p *v1.Pod) time.Time {
	if len(p.Status.ContainerStatuses) == 0 {
		return time.Time{}
	}
	s := p.Status.ContainerStatuses[0].State
	switch {
	case s.Running != nil:
		return s.Running.StartedAt.Time
	case s.Terminated != nil:
		return s.Terminated.StartedAt.Time
	}
	return time.Time{}
}

// removePushed deletes a pushed pod through DELETE /pods/{ns}/{name}.
func (a *agent) removePushed(t *testing.T, name string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodDelete, a.mainURL("/pods/default/"+name), nil)
	if err != nil {
		t.Fatal(err)
	}
	if code := statusOf(t)(a.mainClient().Do(req)); code != http.StatusOK {
		t.Fatalf("DELETE /pods/default/%s: %d", name, code)
	}
}

// push posts a manifest and fails the test unless the node took it.
func (a *agent) push(t *testing.T, body string) {
	t.Helper()
	if code, resp := a.postPod(t, body); code != http.StatusCreated {
		t.Fatalf("POST /pods: %d %s", code, resp)
	}
}

// A pushed Burstable pod that grows its memory (kubectl exec ... alloc
// 800Mi) past memory.available<1Gi on a node of 2Gi is evicted at once (a
// hard threshold): Failed/Evicted with upstream's message naming the
// threshold and its usage over its request; a Guaranteed pod using less
// than its request keeps running, untouched. /stats/summary shows both
// pods' usage and the node's available memory on either side of the
// threshold; kubelet_evictions{eviction_signal="memory.available"} counts
// one eviction.
func TestE2ESimEvictionHogBeforeGuaranteed(t *testing.T) {
	a := startAgent(t, agentOpts{endpoint: "sim://?node-memory=2Gi", extra: []string{
		"--eviction-hard", "memory.available<1Gi",
	}})
	a.push(t, busyboxPod("steady", grace2, `command: ["sh", "-c", "alloc 128Mi; sleep infinity"]`,
		"resources: {requests: {cpu: 100m, memory: 256Mi}, limits: {cpu: 100m, memory: 256Mi}}"))
	a.push(t, busyboxPod("hog", grace2, `command: ["sh", "-c", "alloc 32Mi; sleep infinity"]`,
		"resources: {requests: {memory: 64Mi}}"))
	steady := a.waitPod(time.Minute, "steady-e2e-node", "Running", isRunning)
	a.waitPod(time.Minute, "hog-e2e-node", "Running", isRunning)
	if steady.Status.QOSClass != v1.PodQOSGuaranteed {
		t.Fatalf("steady is %s, want Guaranteed", steady.Status.QOSClass)
	}

	// Before: the sim's container is 4 MiB plus what it allocated; the
	// node (256 MiB of its own) is far from the threshold.
	var before *statsapi.Summary
	testenv.WaitFor(t, 30*time.Second, "/stats/summary shows both pods' memory", func() (bool, error) {
		s, err := a.summary()
		if err != nil {
			return false, err
		}
		before = s
		h, g := evWorkingSet(s, "hog-e2e-node", "app"), evWorkingSet(s, "steady-e2e-node", "app")
		return h == 36*mi && g == 132*mi, fmt.Errorf("hog %d, steady %d bytes, want 36Mi and 132Mi", h, g)
	})
	if av := evNodeAvailable(before); av < 1024*mi || av > 2048*mi-256*mi-168*mi {
		t.Fatalf("node available memory %d MiB before the growth: want at least 1Gi and at most 2Gi less the node's and the pods' use", av/mi)
	}
	if strings.Contains(a.metrics(), "kubelet_evictions{") {
		t.Fatal("an eviction counted before any threshold was met")
	}

	// The hog grows by 800Mi through kubectl exec: the node has less than
	// 1Gi available.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r := a.execIn(ctx, false, "hog-e2e-node", "app", nil, "alloc", "800Mi"); r.err != nil {
		t.Fatalf("exec alloc 800Mi: %v (%s)", r.err, r.stderr)
	}
	if s, err := a.summary(); err == nil && evWorkingSet(s, "hog-e2e-node", "app") > 0 {
		// Read before the next pass evicted it (almost always).
		if h, av := evWorkingSet(s, "hog-e2e-node", "app"), evNodeAvailable(s); h != 836*mi || av >= 1024*mi {
			t.Errorf("after the growth: hog %d MiB, node available %d MiB; want 836 and under 1Gi", h/mi, av/mi)
		}
	}

	hog := a.waitPod(time.Minute, "hog-e2e-node", "Failed/Evicted", evicted)
	t.Logf("hog evicted: %q", hog.Status.Message)
	if !strings.HasPrefix(hog.Status.Message, "The node was low on resource: memory. Threshold quantity: 1Gi, available: ") ||
		!strings.HasSuffix(hog.Status.Message, "Container app was using 836Mi, request is 64Mi, has larger consumption of memory. ") {
		t.Errorf("hog's message %q, want upstream's naming the threshold and the container's 836Mi over its 64Mi request", hog.Status.Message)
	}
	if podCondition(hog, v1.DisruptionTarget) != v1.ConditionTrue {
		t.Errorf("hog's conditions %v: want DisruptionTarget True", hog.Status.Conditions)
	}

	// The Guaranteed pod was not touched: same container, never restarted.
	now, err := a.pod("steady-e2e-node")
	if err != nil {
		t.Fatal(err)
	}
	if !isRunning(now) || now.Status.ContainerStatuses[0].ContainerID != steady.Status.ContainerStatuses[0].ContainerID ||
		now.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Fatalf("steady after the eviction: %s, container %s (was %s)", describe(now), now.Status.ContainerStatuses[0].ContainerID,
			steady.Status.ContainerStatuses[0].ContainerID)
	}
	// The runtime runs nothing of the hog any more.
	rt := a.runtime()
	for _, c := range containersOf(t, rt, string(hog.UID)) {
		if c.State.String() == "CONTAINER_RUNNING" {
			t.Errorf("the hog's container %s still runs in the runtime", c.Id)
		}
	}

	// Counted once, by signal; the node has its memory back.
	testenv.WaitFor(t, 30*time.Second, "kubelet_evictions counts one memory.available eviction", func() (bool, error) {
		m := a.metrics()
		return strings.Contains(m, `kubelet_evictions{eviction_signal="memory.available"} 1`+"\n"), fmt.Errorf("kubelet_evictions lines: %q", evGrep(m, "kubelet_evictions"))
	})
	testenv.WaitFor(t, 30*time.Second, "/stats/summary: the node above the threshold again", func() (bool, error) {
		s, err := a.summary()
		if err != nil {
			return false, err
		}
		av := evNodeAvailable(s)
		return av >= 1024*mi && evWorkingSet(s, "steady-e2e-node", "app") == 132*mi, fmt.Errorf("node available %d MiB, steady %d bytes", av/mi, evWorkingSet(s, "steady-e2e-node", "app"))
	})
}

// evGrep returns the lines of s that contain sub.
func evGrep(s, sub string) []string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// A soft threshold acts only once its signal has held for its grace
// period, and the evicted pod's own grace period is capped by
// --eviction-max-pod-grace-period. The hog takes the node under
// memory.available<1Gi (soft, 20 s) as it starts: the pressure is reported
// at once (a BestEffort pod pushed then is refused, reason Evicted, "The
// node had condition: [MemoryPressure]. ") while the hog is still Running;
// it is evicted no sooner than 20 s after it started (its DisruptionTarget
// condition against its container's start, both on this host's clock). Its
// own grace period is 600 s and its preStop hook sleeps 600 s: it ends
// Failed/Evicted within a minute only because the eviction capped its
// grace to 2 s.
func TestE2ESimEvictionSoftGracePeriod(t *testing.T) {
	const grace = 20 * time.Second
	a := startAgent(t, agentOpts{endpoint: "sim://?node-memory=2Gi", extra: []string{
		"--eviction-hard", "",
		"--eviction-soft", "memory.available<1Gi",
		"--eviction-soft-grace-period", "memory.available=" + grace.String(),
		"--eviction-max-pod-grace-period", "2",
		"--eviction-pressure-transition-period", "5s",
	}})
	a.push(t, busyboxPod("hog", "spec.terminationGracePeriodSeconds: 600",
		`command: ["sh", "-c", "alloc 900Mi; sleep infinity"]`,
		`lifecycle: {preStop: {exec: {command: ["sleep", "600"]}}}`,
		"resources: {requests: {memory: 64Mi}}"))
	hog := a.waitPod(time.Minute, "hog-e2e-node", "Running", isRunning)
	started := evStartedAt(hog)
	if started.IsZero() {
		t.Fatalf("hog has no start time: %s", describe(hog))
	}

	// The pressure shows at the first pass after the hog started: a
	// BestEffort pod pushed from then on is refused. One pushed before
	// is admitted; it is removed and another tried.
	var refused *v1.Pod
	var refusedAt time.Time
	tries := 0
	testenv.WaitFor(t, time.Minute, "a BestEffort pod refused under MemoryPressure", func() (bool, error) {
		name := fmt.Sprintf("probe-%d-e2e-node", tries)
		tries++
		a.push(t, busyboxPod(strings.TrimSuffix(name, "-e2e-node"), "spec.terminationGracePeriodSeconds: 0", sleepForever))
		p := a.waitPod(time.Minute, name, "refused (Evicted) or Running", func(p *v1.Pod) bool {
			return evicted(p) || isRunning(p)
		})
		if evicted(p) {
			refused, refusedAt = p, time.Now()
			return true, nil
		}
		a.removePushed(t, name)
		return false, fmt.Errorf("%s admitted: no pressure yet", name)
	})
	if refused.Status.Message != "The node had condition: [MemoryPressure]. " {
		t.Errorf("refused %s: message %q, want upstream's", refused.Name, refused.Status.Message)
	}
	now, err := a.pod("hog-e2e-node")
	if err != nil {
		t.Fatal(err)
	}
	if !isRunning(now) || podCondition(now, v1.DisruptionTarget) != "" {
		t.Fatalf("under MemoryPressure, before the grace period: hog is %s %s (conditions %v), want still Running",
			now.Status.Phase, describe(now), now.Status.Conditions)
	}

	hog = a.waitPod(time.Minute, "hog-e2e-node", "Failed/Evicted (its grace capped to 2 s, not its own 600 s)", evicted)
	seen := time.Now()
	if !strings.HasPrefix(hog.Status.Message, "The node was low on resource: memory. Threshold quantity: 1Gi, available: ") {
		t.Errorf("hog's message %q, want upstream's", hog.Status.Message)
	}
	disrupted := evConditionTime(hog, v1.DisruptionTarget)
	if disrupted.IsZero() {
		t.Fatalf("hog's conditions %v: want DisruptionTarget", hog.Status.Conditions)
	}
	// Both times are this host's, in whole seconds.
	if d := disrupted.Sub(started); d < grace-time.Second {
		t.Errorf("hog evicted %s after it started (and took the memory): before the soft grace period of %s", d, grace)
	}
	t.Logf("%d BestEffort pods pushed until one was refused; hog started %s, pressure seen (refusal) %s later, evicted %s after the start; Failed seen %s after the refusal",
		tries, started.Format(time.RFC3339), refusedAt.Sub(started).Round(time.Second), disrupted.Sub(started), seen.Sub(refusedAt).Round(100*time.Millisecond))
	if !strings.Contains(a.metrics(), `kubelet_evictions{eviction_signal="memory.available"} 1`+"\n") {
		t.Errorf("kubelet_evictions: %q, want one memory.available eviction", evGrep(a.metrics(), "kubelet_evictions"))
	}
}
