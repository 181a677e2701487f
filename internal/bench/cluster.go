package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"
)

// runClusterSim is N pods created through a real API server with nodeName
// set, by o.Concurrency callers with the admin credentials, until all are
// Ready as seen by a watch on the API server. The agent runs in cluster mode
// on sim:// with the node's own credentials and upstream's API limits (QPS
// 50, burst 100).
//
// API requests the agent makes are counted by the API server itself, by
// verb and resource, for the node's identity only: the bench adds API
// Priority and Fairness FlowSchemas that match the user
// system:node:<node> (one per verb and resource, ahead of upstream's
// system-node-high and system-nodes, sending the requests to the same
// priority levels) and reads apiserver_flowcontrol_dispatched_requests_total
// per FlowSchema before and after. apiserver_request_total has no label for
// the client, so it cannot tell the agent's requests from the bench's,
// the scheduler's or the controller manager's.
func runClusterSim(ctx context.Context, o Options, r *Result) error {
	r.Goal = GoalReady
	c, nodeKubeconfig, err := openCluster(ctx, &o, "cluster-sim", true)
	if err != nil {
		return err
	}
	defer c.cleanup(context.WithoutCancel(ctx))
	cs, node := c.cs, c.node
	apf := &apfCounter{cs: cs, node: node}
	if err := apf.setup(ctx); err != nil {
		return err
	}
	defer apf.teardown(context.WithoutCancel(ctx))
	before, err := apf.snapshot(ctx)
	if err != nil {
		return err
	}
	var atStart map[string]float64
	s, err := openWith(ctx, o, sessionConfig{
		runtime: "sim://" + simQuery(o.Sim),
		goal:    GoalReady,
		node:    node,
		maxPods: o.Pods + 10,
		extra: []string{"--kubeconfig", nodeKubeconfig,
			"--kube-api-qps", "50", "--kube-api-burst", "100"},
		ready: func(ctx context.Context) error {
			if err := c.waitNodeReady(ctx, 2*time.Minute); err != nil {
				return err
			}
			// Give the agent's informers their first sync, then take the
			// counts the load is measured from.
			time.Sleep(500 * time.Millisecond)
			var err error
			atStart, err = apf.snapshot(ctx)
			return err
		},
		target: apiTarget{cs: cs, node: node},
		feed:   c.watch,
	})
	if err != nil {
		return err
	}
	specs := make([]podSpec, o.Pods)
	for i := range specs {
		specs[i] = podSpec{name: fmt.Sprintf("bench-%05d", i), image: o.Image, noToken: o.NoToken}
	}
	o.Log.Info("creating pods through the API server", "pods", o.Pods, "node", node, "concurrency", o.Concurrency)
	created, _, cerr := s.createAll(ctx, specs)
	r.CreatedSeconds = round3(time.Since(s.start).Seconds())
	o.Log.Info("pods created", "seconds", r.CreatedSeconds)
	lat, last := s.waitAll(ctx, created, o.Timeout)
	finish(r, s, lat, last)
	if atReady, err := apf.snapshot(ctx); err != nil {
		o.Log.Warn("API request counts failed", "err", err)
	} else {
		r.APIRequestsStartup = diffCounts(atStart, before, 1)
		r.APIWritesPerPodAtReady = writes(diffCounts(atReady, atStart, float64(r.Pods)))
		// Writes that trail Ready (events, a last status) belong to the
		// pods too: count until the pod-related writes stop.
		after := apf.settle(ctx, atReady, 2*time.Second, time.Minute)
		r.APIRequestsPerPod = diffCounts(after, atStart, float64(r.Pods))
		r.APIWritesPerPod = writes(r.APIRequestsPerPod)
	}
	s.close(ctx, r)
	return goalErr(r, cerr)
}

// clusterKubeconfigs returns the admin and node kubeconfigs: the user's, or
// deploy/local/controlplane.sh's (brought up if needed).
func clusterKubeconfigs(ctx context.Context, o *Options, node string) (admin, nodeCfg string, err error) {
	admin, nodeCfg = o.Kubeconfig, o.NodeKubeconfig
	if admin != "" {
		if _, err := os.Stat(admin); err != nil {
			return "", "", fmt.Errorf("cluster-sim: --kubeconfig: %w", err)
		}
	}
	if admin != "" && nodeCfg != "" {
		return admin, nodeCfg, nil
	}
	script, err := findScript("deploy/local/controlplane.sh")
	if err != nil {
		if admin != "" {
			return "", "", fmt.Errorf("cluster-sim: give --node-kubeconfig (system:node:%s credentials), or run from the repository: %w", node, err)
		}
		return "", "", fmt.Errorf("cluster-sim: give --kubeconfig (admin) and --node-kubeconfig, or run from the repository: %w", err)
	}
	if admin == "" {
		o.Log.Info("bringing up the control plane (the first run builds it: ~11 min)", "script", script)
		vals, err := runScript(ctx, script, "up")
		if err != nil {
			return "", "", err
		}
		if admin = vals["ADMIN_KUBECONFIG"]; admin == "" {
			return "", "", fmt.Errorf("%s up printed no ADMIN_KUBECONFIG", script)
		}
	}
	if nodeCfg == "" {
		vals, err := runScript(ctx, script, "node-kubeconfig", node)
		if err != nil {
			return "", "", err
		}
		if nodeCfg = vals["NODE_KUBECONFIG"]; nodeCfg == "" {
			return "", "", fmt.Errorf("%s node-kubeconfig %s printed no NODE_KUBECONFIG", script, node)
		}
	}
	return admin, nodeCfg, nil
}

// runScript runs script args and returns its KEY=VALUE stdout lines.
func runScript(ctx context.Context, script string, args ...string) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, script, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", script, strings.Join(args, " "), err)
	}
	vals := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
			vals[k] = v
		}
	}
	return vals, nil
}

// clusterSim is the API side of a cluster-sim run.
type clusterSim struct {
	cs   kubernetes.Interface
	node string
	o    Options
}

// prepare makes the namespace (and waits for its default ServiceAccount,
// which pod admission needs) and removes what a killed run left.
func (c *clusterSim) prepare(ctx context.Context) error {
	_, err := c.cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cluster-sim: create namespace %s: %w", Namespace, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := c.cs.CoreV1().ServiceAccounts(Namespace).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster-sim: no default ServiceAccount in %s (is kube-controller-manager running?): %w", Namespace, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	c.cleanup(ctx)
	return nil
}

// cleanup deletes the node's pods with grace 0 and the Node.
func (c *clusterSim) cleanup(ctx context.Context) {
	pods, err := c.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + c.node})
	if err != nil {
		c.o.Log.Warn("cleanup: list pods", "err", err)
	} else if len(pods.Items) > 0 {
		c.o.Log.Info("deleting pods", "pods", len(pods.Items))
		zero := int64(0)
		sem := make(chan struct{}, 50)
		var wg sync.WaitGroup
		for _, p := range pods.Items {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				err := c.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
				if err != nil && !apierrors.IsNotFound(err) {
					c.o.Log.Warn("cleanup: delete pod", "pod", p.Name, "err", err)
				}
			}()
		}
		wg.Wait()
	}
	err = c.cs.CoreV1().Nodes().Delete(ctx, c.node, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		c.o.Log.Warn("cleanup: delete node", "err", err)
	}
}

func (c *clusterSim) waitNodeReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n, err := c.cs.CoreV1().Nodes().Get(ctx, c.node, metav1.GetOptions{})
		if err == nil {
			for _, cond := range n.Status.Conditions {
				if cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster-sim: node %s not Ready after %s (last error: %v)", c.node, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// watch feeds obs with the node's pods as the API server shows them, until
// ctx is done.
func (c *clusterSim) watch(ctx context.Context, obs *observer) {
	sel := "spec.nodeName=" + c.node
	pods := c.cs.CoreV1().Pods(Namespace)
	for ctx.Err() == nil {
		list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			c.o.Log.Warn("watch: list pods", "err", err)
			time.Sleep(time.Second)
			continue
		}
		now := time.Now()
		for i := range list.Items {
			obs.applyEvent(liteFromPod(&list.Items[i]), false, now)
		}
		lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = sel
			return pods.Watch(ctx, opts)
		}}
		w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, lw)
		if err != nil {
			c.o.Log.Warn("watch pods", "err", err)
			time.Sleep(time.Second)
			continue
		}
		c.drain(ctx, w, obs)
		w.Stop()
	}
}

func (c *clusterSim) drain(ctx context.Context, w *watchtools.RetryWatcher, obs *observer) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			now := time.Now()
			p, isPod := ev.Object.(*v1.Pod)
			switch {
			case ev.Type == watch.Error:
				c.o.Log.Warn("watch error", "err", apierrors.FromObject(ev.Object))
				return
			case !isPod:
			case ev.Type == watch.Deleted:
				obs.applyEvent(liteFromPod(p), true, now)
			default:
				obs.applyEvent(liteFromPod(p), false, now)
			}
		}
	}
}

func liteFromPod(p *v1.Pod) podLite {
	var l podLite
	b, err := json.Marshal(struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Status   v1.PodStatus      `json:"status"`
	}{p.ObjectMeta, p.Status})
	if err == nil {
		_ = json.Unmarshal(b, &l)
	}
	return l
}

// apiTarget creates pods through the API server with nodeName set.
type apiTarget struct {
	cs   kubernetes.Interface
	node string
}

// loadClient is the load tool's client of the API server, with the admin
// kubeconfig: the callers, not a client-side limiter, set the create
// rate; protobuf, as the agents' own clients, so the API server spends no
// more on the load than it must (it is on the same cores as the agent).
// openCluster is what the cluster scenarios share: with checkAgent, a
// refusal of an actorlet without cluster mode; the node's name (o.Node or
// the bench's), the control plane's kubeconfigs (o takes the admin one),
// the admin client and the clusterSim prepared on the node, whose cleanup
// the caller defers; and the node's kubeconfig.
func openCluster(ctx context.Context, o *Options, scenario string, checkAgent bool) (*clusterSim, string, error) {
	if checkAgent && o.Endpoint == "" && !agentHasFlag(ctx, o.Binary, "--kubeconfig") {
		return nil, "", fmt.Errorf("%w: %s needs cluster mode (--kubeconfig), which this actorlet (%s) does not have", ErrNotYet, scenario, o.Binary)
	}
	node := o.Node
	if node == "" {
		node = benchNode
	}
	admin, nodeKubeconfig, err := clusterKubeconfigs(ctx, o, node)
	if err != nil {
		return nil, "", err
	}
	cs, err := loadClient(admin)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", scenario, err)
	}
	c := &clusterSim{cs: cs, node: node, o: *o}
	if err := c.prepare(ctx); err != nil {
		return nil, "", err
	}
	return c, nodeKubeconfig, nil
}

func loadClient(admin string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", admin)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", admin, err)
	}
	cfg.QPS, cfg.Burst, cfg.Timeout = 5000, 10000, time.Minute
	cfg.UserAgent = "actorlet-bench"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return kubernetes.NewForConfig(cfg)
}

func (t apiTarget) create(ctx context.Context, p podSpec) (created, error) {
	grace := int64(1)
	var automount *bool
	if p.noToken {
		automount = new(false)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: Namespace, Labels: map[string]string{"app": "actorlet-bench"}},
		Spec: v1.PodSpec{
			NodeName:                      t.node,
			RestartPolicy:                 v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  automount,
			Containers: []v1.Container{{
				Name: "main", Image: p.image, ImagePullPolicy: v1.PullIfNotPresent,
				Command: []string{"sleep", "3600"},
			}},
		},
	}
	got, err := t.cs.CoreV1().Pods(Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return created{}, fmt.Errorf("create pod %s: %w", p.name, err)
	}
	return created{name: got.Name, uid: string(got.UID), spec: p.name}, nil
}

func (t apiTarget) remove(ctx context.Context, c created) error {
	zero := int64(0)
	return t.cs.CoreV1().Pods(Namespace).Delete(ctx, c.name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}

// apfCounter counts the node's API requests by verb and resource through
// FlowSchemas that match only its user.
type apfCounter struct {
	cs    kubernetes.Interface
	node  string
	names map[string]string // FlowSchema name -> "verb resource"
}

var (
	apfVerbs     = []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	writeVerbs   = []string{"create", "update", "patch", "delete", "deletecollection"}
	apfResources = []string{"pods", "pods/status", "nodes", "nodes/status", "leases", "events",
		"serviceaccounts/token", "configmaps", "secrets", "services"}
)

const apfLabel = "actorlet.io/bench-node"

// apfOther is the key of the node's requests no (verb, resource) schema
// matched.
const apfOther = "other"

func (a *apfCounter) setup(ctx context.Context) error {
	a.teardown(ctx)
	a.names = map[string]string{}
	user := "system:node:" + a.node
	mk := func(name string, prec int32, level string, rule flowcontrolv1.PolicyRulesWithSubjects) *flowcontrolv1.FlowSchema {
		rule.Subjects = []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: user}}}
		return &flowcontrolv1.FlowSchema{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{apfLabel: a.node}},
			Spec: flowcontrolv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
				MatchingPrecedence:         prec,
				DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
				Rules:                      []flowcontrolv1.PolicyRulesWithSubjects{rule},
			},
		}
	}
	var schemas []*flowcontrolv1.FlowSchema
	for _, res := range apfResources {
		// The same priority levels as upstream's system-node-high and
		// system-nodes, so that the counting changes no queueing.
		level := "system"
		if strings.HasPrefix(res, "nodes") || res == "leases" {
			level = "node-high"
		}
		for _, verb := range apfVerbs {
			name := fmt.Sprintf("actorlet-bench-%s-%s-%s", a.node, verb, strings.ReplaceAll(res, "/", "-"))
			a.names[name] = verb + " " + res
			schemas = append(schemas, mk(name, 390, level, flowcontrolv1.PolicyRulesWithSubjects{
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{verb}, APIGroups: []string{"*"},
					Resources: []string{res}, ClusterScope: true, Namespaces: []string{"*"}}},
			}))
		}
	}
	other := fmt.Sprintf("actorlet-bench-%s-other", a.node)
	a.names[other] = apfOther
	schemas = append(schemas, mk(other, 391, "system", flowcontrolv1.PolicyRulesWithSubjects{
		ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"},
			Resources: []string{"*"}, ClusterScope: true, Namespaces: []string{"*"}}},
		NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
	}))
	var wg sync.WaitGroup
	errs := make([]error, len(schemas))
	for i, fs := range schemas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = a.cs.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster-sim: FlowSchemas to count the node's API requests: %w", err)
	}
	// Wait until the API server's APF controller has taken them (it sets
	// the Dangling condition on each).
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := a.cs.FlowcontrolV1().FlowSchemas().List(ctx, metav1.ListOptions{LabelSelector: apfLabel + "=" + a.node})
		if err == nil {
			done := 0
			for _, fs := range list.Items {
				for _, c := range fs.Status.Conditions {
					if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
						done++
						break
					}
				}
			}
			if done == len(schemas) {
				// The condition is written by the same controller that
				// installs the config; leave it a moment to apply it.
				time.Sleep(time.Second)
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster-sim: the API server did not take the counting FlowSchemas in 30 s (%v)", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (a *apfCounter) teardown(ctx context.Context) {
	err := a.cs.FlowcontrolV1().FlowSchemas().DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: apfLabel + "=" + a.node})
	if err != nil && !apierrors.IsNotFound(err) {
		_, _ = fmt.Fprintf(os.Stderr, "cluster-sim: delete the counting FlowSchemas: %v\n", err)
	}
}

// snapshot reads the API server's dispatched request counts of the node's
// FlowSchemas, keyed "verb resource".
func (a *apfCounter) snapshot(ctx context.Context) (map[string]float64, error) {
	b, err := a.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster-sim: GET /metrics of the API server: %w", err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "apiserver_flowcontrol_dispatched_requests_total{") {
			continue
		}
		_, labels, v, ok := parseSample(line)
		if !ok {
			continue
		}
		if key, ok := a.names[labels["flow_schema"]]; ok {
			out[key] += v
		}
	}
	return out, nil
}

// writes sums the write verbs of m.
func writes(m map[string]float64) float64 {
	var n float64
	for k, v := range m {
		if verb, _, _ := strings.Cut(k, " "); slices.Contains(writeVerbs, verb) {
			n += v
		}
	}
	return round3(n)
}

// settle snapshots every quiet/2 until the node's requests other than its
// periodic ones (Node status, Lease) have not changed for quiet, or max
// passed, and returns the last snapshot.
func (a *apfCounter) settle(ctx context.Context, last map[string]float64, quiet, limit time.Duration) map[string]float64 {
	podRelated := func(m map[string]float64) float64 {
		var n float64
		for k, v := range m {
			if !strings.HasSuffix(k, " leases") && !strings.Contains(k, " nodes") {
				n += v
			}
		}
		return n
	}
	deadline := time.Now().Add(limit)
	stableSince := time.Now()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return last
		case <-time.After(quiet / 2):
		}
		cur, err := a.snapshot(ctx)
		if err != nil {
			return last
		}
		if podRelated(cur) != podRelated(last) {
			stableSince = time.Now()
		}
		last = cur
		if time.Since(stableSince) >= quiet {
			break
		}
	}
	return last
}

// diffCounts is (after - before) / per, without zeros.
func diffCounts(after, before map[string]float64, per float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = round3(d / per)
		}
	}
	return out
}

// apiSummary is "verb resource n, ..." ordered by count.
func apiSummary(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.2f", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// agentHasFlag tells whether `binary --help` lists flag.
func agentHasFlag(ctx context.Context, binary, flag string) bool {
	if binary == "" {
		return false
	}
	out, _ := exec.CommandContext(ctx, binary, "--help").CombinedOutput()
	return strings.Contains(string(out), flag+" ") || strings.Contains(string(out), flag+"=")
}
