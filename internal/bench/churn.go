package bench

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/podspec"
)

// Chaos kinds the chaos scenario crashes (every kind of the tree).
const chaosKinds = "pod,pleg,image,status,node,source"

// churnMode says what runChurn adds to plain churn.
type churnMode struct {
	chaos bool
	// soak samples the agent's footprint every o.SampleEvery and fails
	// the run when a series grows (soak.go).
	soak bool
}

// runChurn keeps o.Pods callers busy for o.Duration: each creates a pod,
// waits until it is Running, deletes it and starts again; the last pod of
// each caller stays. With o.ChurnRate > 0 the callers are paced: each
// holds its Running pod until it gets one of ChurnRate tokens a second,
// then deletes it and creates the next (so about o.Pods pods live at any
// time). With chaos the agent also crashes random actors at
// o.ChaosKillRate for the same duration. Then it waits until the node
// converges (exactly the kept pods, Running, in the runtime and on /pods)
// and checks the invariants through the CRI.
func runChurn(ctx context.Context, o Options, r *Result, mode churnMode) error {
	chaos := mode.chaos
	var extra []string
	r.Churn = &Churn{ChurnRate: o.ChurnRate}
	if chaos {
		r.Churn.ChaosKillRate = o.ChaosKillRate
		extra = []string{
			"--chaos-kill-rate", strconv.FormatFloat(o.ChaosKillRate, 'f', -1, 64),
			"--chaos-duration", o.Duration.String(),
			"--chaos-seed", strconv.FormatInt(o.ChaosSeed, 10),
			"--chaos-kinds", chaosKinds,
		}
	}
	cfg := sessionConfig{runtime: "sim://" + simQuery(o.Sim), goal: GoalRunning, extra: extra}
	if mode.soak {
		cfg.pollEvery = soakPollEvery
	}
	s, err := openWith(ctx, o, cfg)
	if err != nil {
		return err
	}
	defer s.close(ctx, r)
	var soak *soakSampler
	if mode.soak {
		soak = s.startSoak(ctx, r)
	}

	type kept struct{ name, uid string }
	var (
		mu       sync.Mutex
		lat      []float64
		delLat   []float64
		creates  int
		deletes  int
		uids     = map[string]string{} // name -> uid, every pod created
		desired  []kept
		firstErr error
		delWG    sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	end := s.start.Add(o.Duration)
	endC := make(chan struct{})
	endTimer := time.AfterFunc(time.Until(end), func() { close(endC) })
	defer endTimer.Stop()
	var tokens chan struct{}
	if o.ChurnRate > 0 {
		tokens = make(chan struct{})
		go pace(ctx, tokens, endC, o.ChurnRate)
	}
	var wg sync.WaitGroup
	for w := range o.Pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				p := podSpec{name: fmt.Sprintf("churn-w%03d-%05d", w, k), image: o.Image}
				t0 := time.Now()
				c, err := s.target.create(ctx, p)
				if err != nil {
					fail(err)
					return
				}
				mu.Lock()
				creates++
				uids[c.name] = c.uid
				mu.Unlock()
				select {
				case t := <-s.obs.waitReached(c.name):
					mu.Lock()
					lat = append(lat, float64(t.Sub(t0))/float64(time.Millisecond))
					mu.Unlock()
				case <-time.After(o.Timeout):
					fail(fmt.Errorf("pod %s not Running after %s", p.name, o.Timeout))
					return
				case <-ctx.Done():
					return
				}
				keep := func() {
					mu.Lock()
					desired = append(desired, kept{c.name, c.uid})
					mu.Unlock()
				}
				if time.Now().After(end) {
					keep()
					return
				}
				if tokens != nil {
					select {
					case <-tokens:
					case <-endC:
						keep()
						return
					case <-ctx.Done():
						return
					}
				}
				gone := s.obs.markDeleted(c.name)
				d0 := time.Now()
				if err := s.target.remove(ctx, c); err != nil {
					fail(err)
					return
				}
				mu.Lock()
				deletes++
				mu.Unlock()
				delWG.Add(1)
				go func() {
					defer delWG.Done()
					select {
					case t := <-gone:
						mu.Lock()
						delLat = append(delLat, float64(t.Sub(d0))/float64(time.Millisecond))
						mu.Unlock()
					case <-time.After(3 * time.Minute):
					case <-ctx.Done():
					}
				}()
			}
		}()
	}
	wg.Wait()
	loadEnd := time.Now()
	if soak != nil {
		s.finishSoak(r, soak)
	}
	if chaos {
		// Converge from the end of chaos, which the agent logs.
		for !s.a.logContains("chaos injector stopped") && time.Since(loadEnd) < time.Minute && s.started {
			time.Sleep(50 * time.Millisecond)
		}
		loadEnd = time.Now()
		r.Churn.ChaosCrashes = s.a.chaosCrashes()
	}

	want := map[string]string{}
	for _, k := range desired {
		want[k.name] = k.uid
	}
	rt, err := s.runtime(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = rt.Close() }()
	var viol []string
	deadline := loadEnd.Add(min(o.Timeout, 5*time.Minute))
	for {
		viol = s.checkConverged(ctx, rt, want, uids)
		if len(viol) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	r.Churn.Converged = len(viol) == 0
	r.Churn.ConvergeSeconds = round3(time.Since(loadEnd).Seconds())
	delWG.Wait()

	mu.Lock()
	defer mu.Unlock()
	r.Pods = creates
	r.Churn.Creates, r.Churn.Deletes = creates, deletes
	r.Churn.DeleteLatencyMS = Summarize(delLat)
	r.Churn.HTTPRetries = int(s.push.retriesOrZero())
	finish(r, s, lat, time.Time{})
	r.Seconds = round3(loadEnd.Sub(s.start).Seconds() + r.Churn.ConvergeSeconds)
	if r.Seconds > 0 {
		r.PodsPerSecond = round(float64(creates) / loadEnd.Sub(s.start).Seconds())
	}
	r.Violations = len(viol)
	if len(viol) > 50 {
		viol = append(viol[:50], fmt.Sprintf("... and %d more", len(viol)-50))
	}
	r.ViolationDetails = viol
	if firstErr != nil {
		return firstErr
	}
	if r.Violations > 0 {
		return fmt.Errorf("node did not converge: %d invariant violations", r.Violations)
	}
	if r.Soak != nil {
		return r.Soak.leakErr()
	}
	return nil
}

// pace sends rate tokens a second on tokens until end or ctx is done; a
// token no caller is ready for is dropped.
func pace(ctx context.Context, tokens chan<- struct{}, end <-chan struct{}, rate float64) {
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-end:
			return
		case <-ctx.Done():
			return
		}
		select {
		case tokens <- struct{}{}:
		default:
		}
	}
}

func (c *pushClient) retriesOrZero() int64 {
	if c == nil {
		return 0
	}
	return c.retries.Load()
}

// checkConverged compares the node with the desired pods (name -> uid):
// through the CRI, each desired pod has exactly one sandbox (ready,
// attempt 0) and one container (running, attempt 0), no (pod, container,
// attempt) appears twice and nothing is left of deleted pods; on /pods,
// each desired pod is Running with no restart and nothing else is listed.
// It returns the violations (empty when converged).
func (s *session) checkConverged(ctx context.Context, rt runtimeLister, want, all map[string]string) []string {
	var v []string
	wantUID := map[string]string{} // uid -> name
	for n, u := range want {
		wantUID[u] = n
	}
	nameOf := map[string]string{}
	for n, u := range all {
		nameOf[u] = n
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ctrs, err := rt.ListContainers(cctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{podspec.LabelPodNamespace: Namespace}})
	if err != nil {
		return []string{"list containers: " + err.Error()}
	}
	sbs, err := rt.ListPodSandbox(cctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{podspec.LabelPodNamespace: Namespace}})
	if err != nil {
		return []string{"list sandboxes: " + err.Error()}
	}
	seen := map[string]bool{}
	running := map[string]int{}
	for _, c := range ctrs {
		uid := c.Labels[podspec.LabelPodUID]
		key := fmt.Sprintf("%s/%s/%d", uid, c.GetMetadata().GetName(), c.GetMetadata().GetAttempt())
		if seen[key] {
			v = append(v, "duplicate container "+key+" ("+nameOf[uid]+")")
		}
		seen[key] = true
		name, ok := wantUID[uid]
		switch {
		case !ok:
			v = append(v, fmt.Sprintf("leaked container %s of deleted pod %s", c.Id, nameOf[uid]))
		case c.GetMetadata().GetAttempt() != 0:
			v = append(v, fmt.Sprintf("pod %s container at attempt %d (restarted although it never exited)", name, c.GetMetadata().GetAttempt()))
		case c.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
			running[uid]++
		default:
			v = append(v, fmt.Sprintf("pod %s container %s is %s", name, c.Id, c.State))
		}
	}
	ready := map[string]int{}
	for _, sb := range sbs {
		uid := sb.GetMetadata().GetUid()
		name, ok := wantUID[uid]
		switch {
		case !ok:
			v = append(v, fmt.Sprintf("leaked sandbox %s of deleted pod %s", sb.Id, nameOf[uid]))
		case sb.State != runtimeapi.PodSandboxState_SANDBOX_READY || sb.GetMetadata().GetAttempt() != 0:
			v = append(v, fmt.Sprintf("pod %s sandbox %s is %s at attempt %d", name, sb.Id, sb.State, sb.GetMetadata().GetAttempt()))
		default:
			ready[uid]++
		}
	}
	listed := s.obs.listed()
	for name, uid := range want {
		if running[uid] != 1 || ready[uid] != 1 {
			v = append(v, fmt.Sprintf("lost pod %s: %d running containers, %d ready sandboxes in the runtime", name, running[uid], ready[uid]))
		}
		p, ok := listed[name]
		switch {
		case !ok:
			v = append(v, "lost pod "+name+": not on /pods")
		case !reached(&p, GoalRunning):
			v = append(v, fmt.Sprintf("wrong status of %s on /pods: phase %q", name, p.Status.Phase))
		default:
			for _, cs := range p.Status.ContainerStatuses {
				if cs.RestartCount != 0 {
					v = append(v, fmt.Sprintf("wrong status of %s on /pods: restartCount %d", name, cs.RestartCount))
				}
			}
		}
	}
	for name := range listed {
		if _, ok := want[name]; !ok {
			v = append(v, "deleted pod "+name+" still on /pods")
		}
	}
	sort.Strings(v)
	return v
}

// runtimeLister is the part of the CRI the checks use.
type runtimeLister interface {
	ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
}
