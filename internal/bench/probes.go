package bench

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/adapters/cri"
	"github.com/actorlet/actorlet/podspec"
)

// probePeriod is the probes scenario's readiness probe period, in seconds.
const probePeriod = 1

// runProbes starts o.Pods pods, each with an exec readiness probe every
// second whose command appends a line to a file in the container, waits
// until all are Ready, then counts each pod's probe executions through the
// runtime (ExecSync `cat`) at the start and the end of an o.Duration
// window: the mean period per pod, and its drift from the configured
// period, as the runtime saw them. The agent's CPU over the window (between
// the two counts, so neither count's ExecSyncs are in it) is logged as
// cores, and a CPU profile (--cpu-profile-seconds) is taken at the window's
// start, when every pod is Ready and only the probes run.
func runProbes(ctx context.Context, o Options, r *Result) error {
	r.Goal = GoalReady
	so := o
	so.ProfileCPU = 0 // taken in the window below, not while pods start
	s, err := open(ctx, so, "sim://"+simQuery(o.Sim), GoalReady)
	if err != nil {
		return err
	}
	defer s.close(ctx, r)
	specs := make([]podSpec, o.Pods)
	for i := range specs {
		specs[i] = podSpec{name: fmt.Sprintf("probe-%05d", i), image: o.Image, probe: true, probePeriod: probePeriod}
	}
	created, _, cerr := s.createAll(ctx, specs)
	r.CreatedSeconds = round3(time.Since(s.start).Seconds())
	lat, last := s.waitAll(ctx, created, o.Timeout)
	finish(r, s, lat, last)
	if err := goalErr(r, cerr); err != nil {
		return err
	}

	rt, err := s.runtime(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = rt.Close() }()
	ctrs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{podspec.LabelPodNamespace: Namespace},
	})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	first := countProbes(ctx, rt, ctrs)
	total := 0
	for _, c := range first {
		total += c.n
	}
	if total == 0 {
		return fmt.Errorf("%w: no exec probe ran in any of %d Ready pods (the runtime saw no execution of the probe command): exec probes are not in this actorlet yet", ErrNotYet, len(ctrs))
	}
	// Every pod is Ready: stop polling /pods (and sampling /metrics), so
	// the window measures the probes, not the bench. A 1,000-pod list
	// polled back to back cost the agent more than the probes did; close
	// takes the last CPU sample itself.
	s.cancel()
	if o.ProfileCPU > 0 && o.ProfileOut != "" {
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go profileTo(pctx, s.a, o.ProfileCPU, o.ProfileOut, &o)
	}
	cpu0, cerr0 := readProc(s.a.pid)
	t0 := time.Now()
	select {
	case <-time.After(o.Duration):
	case <-ctx.Done():
		return ctx.Err()
	}
	if cpu1, err := readProc(s.a.pid); err == nil && cerr0 == nil {
		secs := time.Since(t0).Seconds()
		o.Log.Info("probes window", "agent_cpu_seconds", round3(cpu1.cpu-cpu0.cpu), "seconds", round3(secs),
			"agent_cores", round3((cpu1.cpu-cpu0.cpu)/secs))
	}
	second := countProbes(ctx, rt, ctrs)
	pr := &Probes{PeriodSeconds: probePeriod, WindowSeconds: o.Duration.Seconds()}
	var periods, drifts []float64
	for id, a := range first {
		b, ok := second[id]
		if !ok || a.err != nil || b.err != nil {
			continue
		}
		n := b.n - a.n
		pr.Executions += n
		window := b.at.Sub(a.at)
		pr.Expected += int(window.Seconds() / probePeriod)
		if n <= 0 {
			pr.Missed++
			continue
		}
		p := float64(window) / float64(n) / float64(time.Millisecond)
		periods = append(periods, p)
		drifts = append(drifts, p-probePeriod*1000)
	}
	pr.PeriodMS, pr.DriftMS = Summarize(periods), Summarize(drifts)
	r.Probes = pr
	return nil
}

type probeCount struct {
	n   int
	at  time.Time
	err error
}

// countProbes reads every container's probe file through ExecSync, 16 at
// a time.
func countProbes(ctx context.Context, rt *cri.Client, ctrs []*runtimeapi.Container) map[string]probeCount {
	out := make(map[string]probeCount, len(ctrs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, c := range ctrs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			stdout, _, code, err := rt.ExecSync(ctx, c.Id, []string{"cat", probeFile}, 10*time.Second)
			at := time.Now()
			pc := probeCount{at: at, err: err}
			if err == nil && code == 0 {
				pc.n = bytes.Count(stdout, []byte("\n"))
			}
			mu.Lock()
			out[c.Id] = pc
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}
