package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ScenarioStatusStorm: a rejection storm against the pods that run. On a
// real control plane with the sim runtime (as cluster-sim), --pods normal
// pods start twice: once on a quiet node (calm), once while pods the node
// rejects at admission (a nodeSelector on a label it does not have) are
// created at --churn-rate per second (default 20) for --duration (default
// 5 min), the normal pods created once two thirds of the storm have passed
// (thousands of rejected pods on the node, their writes in the queue). Each phase measures every normal pod's time from its create
// to Running in the API server (a watch); the storm's own pods are counted
// as their Failed status reaches the API server. Issue 38's goal: the
// stormy latencies within twice the calm ones.
const ScenarioStatusStorm = "status-storm"

// Defaults of the status-storm scenario.
const (
	stormDefaultPods     = 50
	stormDefaultRate     = 20
	stormDefaultDuration = 5 * time.Minute
	// stormLabel is the label the rejected pods select on: the bench
	// node never has it.
	stormLabel = "actorlet.io/bench-storm"
)

func init() { Scenarios = append(Scenarios, ScenarioStatusStorm) }

// Storm is the status-storm scenario's result.
type Storm struct {
	RejectRate   float64 `json:"reject_rate_per_second"`
	StormSeconds float64 `json:"storm_seconds"`
	// WarmupSeconds: how long the storm ran before the normal pods were
	// created.
	WarmupSeconds float64 `json:"warmup_seconds"`
	// RejectedCreated pods were created during the storm (CreateErrors
	// creates failed); RejectedFailedInAPI of them showed Failed in the
	// API server by the end of the storm.
	RejectedCreated     int `json:"rejected_created"`
	CreateErrors        int `json:"create_errors,omitempty"`
	RejectedFailedInAPI int `json:"rejected_failed_in_api"`
	// Calm and Stormy: the normal pods' create-to-Running in the API (ms)
	// without and with the storm; CalmRunning and StormyRunning how many
	// got there.
	Calm          Latency `json:"calm_ms"`
	CalmRunning   int     `json:"calm_running"`
	Stormy        Latency `json:"stormy_ms"`
	StormyRunning int     `json:"stormy_running"`
	// Ratios stormy/calm (the goal: 2 or less).
	RatioP50 float64 `json:"ratio_p50"`
	RatioP99 float64 `json:"ratio_p99"`
	RatioMax float64 `json:"ratio_max"`
}

// stormDefaults fills in the scenario's own defaults, before the generic
// ones (Options.defaults) would.
func (o *Options) stormDefaults() {
	if o.Scenario != ScenarioStatusStorm {
		return
	}
	if o.Pods <= 0 {
		o.Pods = stormDefaultPods
	}
	if o.ChurnRate <= 0 {
		o.ChurnRate = stormDefaultRate
	}
	if o.Duration <= 0 {
		o.Duration = stormDefaultDuration
	}
}

// stormWarmup is how long the storm runs before the normal pods start.
func stormWarmup(d time.Duration) time.Duration { return d * 2 / 3 }

func runStatusStorm(ctx context.Context, o Options, r *Result) error {
	r.Goal = GoalRunning
	c, nodeKubeconfig, err := openCluster(ctx, &o, "status-storm", true)
	if err != nil {
		return err
	}
	defer c.cleanup(context.WithoutCancel(ctx))
	cs, node := c.cs, c.node
	target := apiTarget{cs: cs, node: node}
	s, err := openWith(ctx, o, sessionConfig{
		runtime: "sim://" + simQuery(o.Sim),
		goal:    GoalRunning,
		node:    node,
		maxPods: o.Pods + 10,
		extra: []string{"--kubeconfig", nodeKubeconfig,
			"--kube-api-qps", "50", "--kube-api-burst", "100"},
		ready:  func(ctx context.Context) error { return c.waitNodeReady(ctx, 2*time.Minute) },
		target: target,
		feed:   c.watch,
	})
	if err != nil {
		return err
	}
	st := &Storm{RejectRate: o.ChurnRate, StormSeconds: o.Duration.Seconds()}
	r.Storm = st

	// Calm: the normal pods on a quiet node, then gone again.
	o.Log.Info("calm: creating pods", "pods", o.Pods)
	calmLat, _, cerr := s.startPhase(ctx, "calm", o.Pods, o.Timeout)
	st.Calm, st.CalmRunning = Summarize(calmLat), len(calmLat)
	if cerr != nil {
		s.close(ctx, r)
		return fmt.Errorf("calm phase: %w", cerr)
	}

	// Stormy: the same while pods the node rejects pour in.
	sctx, stop := context.WithTimeout(ctx, o.Duration)
	defer stop()
	var created, failedCreates atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); storm(sctx, cs, node, o, &created, &failedCreates) }()
	warm := stormWarmup(o.Duration)
	st.WarmupSeconds = warm.Seconds()
	o.Log.Info("storm: rejected pods pouring in", "rate", o.ChurnRate, "for", o.Duration, "normal pods after", warm)
	select {
	case <-time.After(warm): // the scenario's shape: the normal pods come into a storm under way
	case <-ctx.Done():
	}
	o.Log.Info("stormy: creating pods", "pods", o.Pods, "rejected so far", created.Load())
	stormLat, last, serr := s.startPhase(ctx, "stormy", o.Pods, o.Timeout)
	st.Stormy, st.StormyRunning = Summarize(stormLat), len(stormLat)
	<-sctx.Done()
	wg.Wait()
	st.RejectedCreated, st.CreateErrors = int(created.Load()), int(failedCreates.Load())
	for name, p := range s.obs.listed() {
		if len(name) > 6 && name[:6] == "storm-" && p.Status.Phase == string(v1.PodFailed) {
			st.RejectedFailedInAPI++
		}
	}
	st.RatioP50 = ratio(st.Stormy.P50, st.Calm.P50)
	st.RatioP99 = ratio(st.Stormy.P99, st.Calm.P99)
	st.RatioMax = ratio(st.Stormy.Max, st.Calm.Max)
	finish(r, s, stormLat, last)
	o.Log.Info("status-storm done", "calm_p50_ms", st.Calm.P50, "stormy_p50_ms", st.Stormy.P50,
		"calm_max_ms", st.Calm.Max, "stormy_max_ms", st.Stormy.Max, "rejected", st.RejectedCreated, "rejected_failed_in_api", st.RejectedFailedInAPI)
	s.close(ctx, r)
	if serr != nil {
		return fmt.Errorf("stormy phase: %w", serr)
	}
	return goalErr(r, nil)
}

// startPhase creates n normal pods named <phase>-NNN, waits until each is
// Running in the API server, then deletes them and waits until they are
// gone: the create-to-Running latencies (ms) and when the last got there.
func (s *session) startPhase(ctx context.Context, phase string, n int, timeout time.Duration) ([]float64, time.Time, error) {
	specs := make([]podSpec, n)
	for i := range specs {
		specs[i] = podSpec{name: fmt.Sprintf("%s-%03d", phase, i), image: s.o.Image, noToken: true}
	}
	at, created, cerr := s.createAll(ctx, specs)
	lat, last := s.waitAll(ctx, at, timeout)
	if cerr != nil {
		return lat, last, cerr
	}
	if len(lat) < n {
		return lat, last, fmt.Errorf("only %d of %d pods Running in the API within %s", len(lat), n, timeout)
	}
	for _, c := range created {
		gone := s.obs.markDeleted(c.name)
		if err := s.target.remove(ctx, c); err != nil {
			return lat, last, fmt.Errorf("delete %s: %w", c.name, err)
		}
		select {
		case <-gone:
		case <-time.After(timeout):
			return lat, last, fmt.Errorf("%s not gone from the API within %s", c.name, timeout)
		case <-ctx.Done():
			return lat, last, ctx.Err()
		}
	}
	return lat, last, nil
}

// storm creates pods the node rejects at rate per second until ctx ends.
func storm(ctx context.Context, cs kubernetes.Interface, node string, o Options, created, failed *atomic.Int64) {
	grace := int64(0)
	tick := time.NewTicker(time.Duration(float64(time.Second) / o.ChurnRate))
	defer tick.Stop()
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("storm-%05d", i), Namespace: Namespace,
				Labels: map[string]string{"app": "actorlet-bench-storm"}},
			Spec: v1.PodSpec{
				NodeName:                      node,
				NodeSelector:                  map[string]string{stormLabel: "absent"},
				RestartPolicy:                 v1.RestartPolicyAlways,
				TerminationGracePeriodSeconds: &grace,
				AutomountServiceAccountToken:  new(false),
				Containers:                    []v1.Container{{Name: "main", Image: o.Image, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sleep", "3600"}}},
			},
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if _, err := cs.CoreV1().Pods(Namespace).Create(context.WithoutCancel(ctx), pod, metav1.CreateOptions{}); err != nil {
				failed.Add(1)
				return
			}
			created.Add(1)
		}()
	}
}

// ratio is a/b rounded to 0.01 (0 when b is 0).
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return float64(int(a/b*100+0.5)) / 100
}
