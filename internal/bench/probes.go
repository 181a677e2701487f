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
// period, as the runtime saw them.
func runProbes(ctx context.Context, o Options, r *Result) error {
	r.Goal = GoalReady
	s, err := open(ctx, o, "sim://"+simQuery(o.Sim), GoalReady)
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
	select {
	case <-time.After(o.Duration):
	case <-ctx.Done():
		return ctx.Err()
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
