package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/actorlet/actorlet/internal/testenv"
)

// massDeletePods is how many pods TestE2EClusterMassDeleteUnderChaos
// creates and deletes: ACTORLET_E2E_MASS_DELETE_PODS, else the issue's
// 2,000 (about 80 s on a shared 2-core machine with the agent built with
// -race; set it lower for a quick run).
func massDeletePods(t *testing.T) int {
	t.Helper()
	v := os.Getenv("ACTORLET_E2E_MASS_DELETE_PODS")
	if v == "" {
		return 2000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("ACTORLET_E2E_MASS_DELETE_PODS=%q: want a positive count", v)
	}
	return n
}

// TestE2EClusterMassDeleteUnderChaos is issue 9's failure 8: pods bound
// to the node through the API server, all Running, then all deleted at
// once (graceful), while the agent crashes random actors of every kind.
// Every pod must be gone from the API within a bound (none left
// Terminating), each with one final DELETE from the node: the API
// server counts the node's pod deletes itself (a FlowSchema that matches
// only the node's user), so extra deletes (answered 404) show.
func TestE2EClusterMassDeleteUnderChaos(t *testing.T) {
	n := massDeletePods(t)
	c := newCluster(t)
	const node = "e2e-massdel"
	ctx := context.Background()
	a := c.startNode(t, node, agentOpts{extra: []string{
		"--max-pods", strconv.Itoa(n + 10),
		"--kube-api-qps", "500", "--kube-api-burst", "1000",
		"--pleg-relist-period", "1s",
		"--chaos-kill-rate", "5", "--chaos-seed", "9",
		"--chaos-kinds", "pod,probe,pleg,image,status,node,source",
		// The chaos picks among live actors: as the last pods go, the
		// singletons take nearly all of the 5 crashes a second, and at
		// the default 10 restarts a minute they escalate until the root
		// gives up and the agent exits (by design). 20 keeps the agent
		// alive through the end of the deletion on a slow machine.
		"--actor-max-restarts", "20",
	}})
	c.waitNodeReady(t, node, v1.ConditionTrue, time.Minute)
	deletes := countNodeDeletes(t, c.cs, node)

	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("massdel-%05d", i)
	}
	parallel(t, names, 20, func(name string) error {
		p := apiPod(name, node, simImage, "sleep", "infinity")
		no := false
		p.Spec.AutomountServiceAccountToken = &no // one API call less per pod: a shorter test
		_, err := c.cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		return err
	})
	testenv.WaitFor(t, time.Duration(n)*time.Second/5+2*time.Minute, fmt.Sprintf("%d pods Running in the API", n), func() (bool, error) {
		pods, err := nodePods(ctx, c.cs, node)
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods {
			if p.Status.Phase == v1.PodRunning {
				running++
			}
		}
		return running == n, fmt.Errorf("%d of %d Running", running, n)
	})
	if !a.logContains("chaos injector") {
		t.Fatalf("no chaos injector in the agent's log")
	}

	// All at once: graceful deletes (the pods' 2 s grace), 50 in flight.
	before := deletes.read(t)
	singletons0 := restartsByKind(t, a)
	t0 := time.Now()
	parallel(t, names, 50, func(name string) error {
		return c.cs.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{})
	})
	// What must hold is that the node converges, not how fast: under
	// this chaos the status actor spends much of the tail in its restart
	// back-off (2,000 pods took 4m05s and 6m14s on a slow 2-core machine,
	// 64 and 97 status/node restarts, and over 9m40s on a slower one, pods
	// still leaving the API at the end). So the wait goes on while pods
	// keep leaving the API, and fails once none has left for stall (the
	// node stuck), or at bound.
	const stall = 3 * time.Minute
	bound := 5*time.Minute + time.Duration(n)*time.Second/3
	var left []v1.Pod
	defer func() {
		if t.Failed() && len(left) > 0 {
			t.Logf("%d of %d pods still in the API:\n%s", len(left), n, stuckReport(a, left))
		}
	}()
	var listed time.Time
	fewest, progressed := n+1, time.Now()
	testenv.WaitFor(t, bound, fmt.Sprintf("every one of %d deleted pods gone from the API", n), func() (bool, error) {
		if time.Since(listed) < time.Second {
			return false, nil // a list of 2,000 pods costs the API server: once a second
		}
		listed = time.Now()
		pods, err := nodePods(ctx, c.cs, node)
		if err != nil {
			return false, err
		}
		left = pods
		if len(left) < fewest {
			fewest, progressed = len(left), time.Now()
		} else if time.Since(progressed) > stall {
			t.Fatalf("no deleted pod left the API in %v: %d of %d still there after %v", stall, len(left), n, time.Since(t0).Round(time.Second))
		}
		return len(left) == 0, fmt.Errorf("%d pods left", len(left))
	})
	gone := time.Since(t0)
	crashes := actorRestarts(t, a)
	// Read now, while the agent runs: with no pod left, the chaos keeps
	// crashing the singletons, and the agent may exit before the settle
	// below (which reads the API server only).
	singletons1 := restartsByKind(t, a)
	// Deletes that trail the last pod's removal (a retry that lost the
	// race) count too: wait until the node's count has held still for 2 s.
	var after float64
	var changed time.Time
	testenv.WaitFor(t, time.Minute, "the node's pod deletes settled", func() (bool, error) {
		cur := deletes.read(t)
		if cur != after || changed.IsZero() {
			after, changed = cur, time.Now()
		}
		return time.Since(changed) >= 2*time.Second && after-before >= float64(n),
			fmt.Errorf("%v deletes of %d pods", after-before, n)
	})
	// A restart in the settle counts too, when the agent still answers.
	if later, err := readRestartsByKind(a); err == nil {
		singletons1 = later
	}
	extra := after - before - float64(n)
	// The StatusActor holds the final deletes and the NodeActor what ended
	// here: a restart of either during the deletion (and the settle, when
	// the agent lived through it) loses which deletes were sent, and those of pods not yet
	// seen gone are sent again (at least once, as upstream after a
	// restart).
	lost := singletons1["status"] - singletons0["status"] + singletons1["node"] - singletons0["node"]
	t.Logf("%d pods deleted from the API in %s under chaos (%d actor restarts, %d of the status and node actors during the deletion); the node sent %.0f pod DELETEs (%.0f extra)",
		n, gone.Round(100*time.Millisecond), crashes, lost, after-before, extra)
	if crashes == 0 {
		t.Fatalf("no actor restarted under chaos while %d pods started and were deleted", n)
	}
	// Before the fix 59-75 % were extra (the issue: 35-70 %), with or
	// without chaos. Now: none without a restart of the status or node
	// actor (0 of 300 measured without chaos; 1 % allowed), and 0-14 % with
	// them (0 with 1 restart, 118 with 3, 275 with 9, of 2,000: the pods
	// deleted but not yet seen gone at each restart; a third allowed).
	allowed := n / 100
	if lost > 0 {
		allowed = n / 3
	}
	if extra > float64(allowed) {
		t.Errorf("%.0f extra pod DELETEs from the node for %d pods (answered 404), %d status/node restarts during the deletion: want at most %d",
			extra, n, lost, allowed)
	}
}

// restartsByKind reads actorlet_actor_restarts_total by actor kind.
func restartsByKind(t *testing.T, a *agent) map[string]int {
	t.Helper()
	var out map[string]int
	testenv.WaitFor(t, 30*time.Second, "the agent's /metrics", func() (bool, error) {
		var err error
		out, err = readRestartsByKind(a)
		return err == nil, err
	})
	return out
}

// readRestartsByKind reads actorlet_actor_restarts_total by actor kind
// once.
func readRestartsByKind(a *agent) (map[string]int, error) {
	b, err := a.readMetrics()
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^actorlet_actor_restarts_total\{kind="([a-z]+)"\} (\d+)`).FindAllSubmatch(b, -1) {
		out[string(m[1])], _ = strconv.Atoi(string(m[2]))
	}
	return out, nil
}

// parallel runs f for each name with width callers; the first error
// fails the test.
func parallel(t *testing.T, names []string, width int, f func(name string) error) {
	t.Helper()
	work := make(chan string)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range width {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range work {
				if err := f(name); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", name, err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d calls failed, first: %v", len(errs), errs[0])
	}
}

func nodePods(ctx context.Context, cs kubernetes.Interface, node string) ([]v1.Pod, error) {
	l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// stuckReport describes pods left in the API and what the agent logged
// about each (at most 5).
func stuckReport(a *agent, pods []v1.Pod) string {
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	b, _ := os.ReadFile(a.logPath)
	lines := strings.Split(string(b), "\n")
	var out strings.Builder
	for i, p := range pods {
		if i == 5 {
			fmt.Fprintf(&out, "... and %d more\n", len(pods)-5)
			break
		}
		fmt.Fprintf(&out, "%s uid %s phase %s deletionTimestamp %v\n", p.Name, p.UID, p.Status.Phase, p.DeletionTimestamp)
		for _, l := range lines {
			if strings.Contains(l, string(p.UID)) || strings.Contains(l, p.Name) {
				fmt.Fprintf(&out, "    %s\n", l)
			}
		}
	}
	return out.String()
}

// nodeDeletes counts the pod DELETEs the API server dispatched for one
// node's user, through an API Priority and Fairness FlowSchema that
// matches only that user and only pod deletes (on upstream's "system"
// priority level, where the node's requests go anyway).
type nodeDeletes struct {
	cs     kubernetes.Interface
	schema string
}

func countNodeDeletes(t *testing.T, cs kubernetes.Interface, node string) *nodeDeletes {
	t.Helper()
	ctx := context.Background()
	d := &nodeDeletes{cs: cs, schema: "e2e-count-deletes-" + node}
	_ = cs.FlowcontrolV1().FlowSchemas().Delete(ctx, d.schema, metav1.DeleteOptions{})
	fs := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: d.schema},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "system"},
			MatchingPrecedence:         390,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser,
					User: &flowcontrolv1.UserSubject{Name: "system:node:" + node}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"delete"}, APIGroups: []string{""},
					Resources: []string{"pods"}, Namespaces: []string{"*"}}},
			}},
		},
	}
	if _, err := cs.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil {
		t.Fatalf("FlowSchema to count the node's deletes: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.FlowcontrolV1().FlowSchemas().Delete(context.Background(), d.schema, metav1.DeleteOptions{})
	})
	// The API server's APF controller marks the schema (Dangling=False)
	// when it has taken it.
	testenv.WaitFor(t, 30*time.Second, "FlowSchema "+d.schema+" taken", func() (bool, error) {
		got, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, d.schema, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
				return true, nil
			}
		}
		return false, errors.New("no Dangling condition yet")
	})
	return d
}

// read returns the deletes dispatched so far (0 before the first).
func (d *nodeDeletes) read(t *testing.T) float64 {
	t.Helper()
	return apiMetricSum(t, d.cs, func(line string) bool {
		return strings.HasPrefix(line, "apiserver_flowcontrol_dispatched_requests_total{") &&
			strings.Contains(line, `flow_schema="`+d.schema+`"`)
	})
}

// apiMetricSum is the sum of the API server's /metrics samples whose lines
// match (retried for up to 30 s while /metrics does not answer).
func apiMetricSum(t *testing.T, cs kubernetes.Interface, match func(line string) bool) float64 {
	t.Helper()
	var sum float64
	testenv.WaitFor(t, 30*time.Second, "the API server's /metrics", func() (bool, error) {
		b, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
		if err != nil {
			return false, err
		}
		sum = 0
		for _, line := range strings.Split(string(b), "\n") {
			if !match(line) {
				continue
			}
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				return false, fmt.Errorf("%q: %w", line, err)
			}
			sum += v
		}
		return true, nil
	})
	return sum
}
