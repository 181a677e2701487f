package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// podLite is the part of a v1.Pod the observer decodes (much cheaper than
// the whole object at 10,000 pods).
type podLite struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		UID       string `json:"uid"`
	} `json:"metadata"`
	Status struct {
		Phase      string `json:"phase"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
		ContainerStatuses []struct {
			RestartCount int32 `json:"restartCount"`
			State        struct {
				Running *struct{} `json:"running"`
			} `json:"state"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

type podListLite struct {
	Items []podLite `json:"items"`
}

// Goals a pod can be waited for.
const (
	GoalRunning = "Running" // phase Running and every container running
	GoalReady   = "Ready"   // condition Ready=True
)

func reached(p *podLite, goal string) bool {
	if goal == GoalReady {
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" {
				return c.Status == "True"
			}
		}
		return false
	}
	if p.Status.Phase != "Running" || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return true
}

// podView is what the observer knows about one pod name.
type podView struct {
	seen     bool
	reached  time.Time // first poll that showed the goal
	gone     time.Time // first poll after a deletion that did not list it
	deleted  bool      // the bench asked for its deletion
	waiters  []chan time.Time
	goners   []chan time.Time
	last     podLite
	listed   bool // listed in the newest poll
	restarts int32
	ready    bool // Ready=True in the newest event (watch only)
}

// observer polls GET /pods and records, per pod name, when it first
// reached the goal and when it disappeared after a deletion. It waits as
// long as the last poll took before the next one, so it spends at most
// half the time polling (each poll of 10,000 pods costs the agent a full
// PodList), and polls at most every minInterval. A pod's latency is thus
// late by up to one poll period (reported as poll_mean_ms).
type observer struct {
	url         string
	goal        string
	start       time.Time
	minInterval time.Duration
	client      *http.Client

	mu       sync.Mutex
	pods     map[string]*podView
	polls    int
	pollTime time.Duration
	series   []Sample
	nReached int
	lastErr  error
	flaps    int // Ready True -> not True transitions seen by the watch
}

func newObserver(url, goal string, start time.Time, client *http.Client) *observer {
	return &observer{
		url: url, goal: goal, start: start, minInterval: 20 * time.Millisecond,
		client: client,
		pods:   map[string]*podView{},
	}
}

func (o *observer) view(name string) *podView {
	v := o.pods[name]
	if v == nil {
		v = &podView{}
		o.pods[name] = v
	}
	return v
}

// run polls until ctx is done.
func (o *observer) run(ctx context.Context) {
	for ctx.Err() == nil {
		t0 := time.Now()
		err := o.poll(ctx)
		d := time.Since(t0)
		o.mu.Lock()
		if err != nil {
			o.lastErr = err
		}
		o.mu.Unlock()
		wait := max(o.minInterval, d)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

func (o *observer) poll(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.url+"/pods", nil)
	if err != nil {
		return err
	}
	t0 := time.Now()
	resp, err := o.client.Do(req)
	if err != nil {
		return err
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /pods: %d", resp.StatusCode)
	}
	var list podListLite
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return fmt.Errorf("decode /pods: %w", err)
	}
	now := time.Now() // what a user sees: the answer has arrived
	o.apply(list.Items, now, now.Sub(t0))
	return nil
}

// apply records one full view of the node's pods taken at now (a poll of
// /pods; a watch-based source for cluster mode would call it too).
func (o *observer) apply(items []podLite, now time.Time, took time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.polls++
	o.pollTime += took
	list := podListLite{Items: items}
	listed := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		name := p.Metadata.Name
		listed[name] = true
		v := o.view(name)
		v.seen, v.listed, v.last = true, true, *p
		for _, cs := range p.Status.ContainerStatuses {
			v.restarts = max(v.restarts, cs.RestartCount)
		}
		if v.reached.IsZero() && reached(p, o.goal) {
			v.reached = now
			o.nReached++
			for _, w := range v.waiters {
				w <- now
			}
			v.waiters = nil
		}
	}
	for name, v := range o.pods {
		if listed[name] {
			continue
		}
		v.listed = false
		if v.deleted && v.gone.IsZero() {
			v.gone = now
			for _, w := range v.goners {
				w <- now
			}
			v.goners = nil
		}
	}
	o.series = append(o.series, Sample{T: round3(now.Sub(o.start).Seconds()), Value: float64(o.nReached)})
}

// waitReached returns a channel that gets the time name first reached the
// goal (at once if it already has).
func (o *observer) waitReached(name string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	o.mu.Lock()
	defer o.mu.Unlock()
	v := o.view(name)
	if !v.reached.IsZero() {
		ch <- v.reached
		return ch
	}
	v.waiters = append(v.waiters, ch)
	return ch
}

// markDeleted notes that name was deleted; the returned channel gets the
// time it was first no longer listed.
func (o *observer) markDeleted(name string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	o.mu.Lock()
	defer o.mu.Unlock()
	v := o.view(name)
	v.deleted = true
	v.goners = append(v.goners, ch)
	return ch
}

// readyFlaps is the number of Ready True -> not True transitions the watch
// has seen (applyEvent only; a deletion is not one).
func (o *observer) readyFlaps() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.flaps
}

// reachedAt returns when name reached the goal (zero if it has not).
func (o *observer) reachedAt(name string) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	if v := o.pods[name]; v != nil {
		return v.reached
	}
	return time.Time{}
}

// snapshot returns a copy of the newest poll's view of listed pods.
func (o *observer) listed() map[string]podLite {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]podLite{}
	for n, v := range o.pods {
		if v.listed {
			out[n] = v.last
		}
	}
	return out
}

func (o *observer) stats() (polls int, mean time.Duration, series []Sample, lastErr error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.polls > 0 {
		mean = o.pollTime / time.Duration(o.polls)
	}
	return o.polls, mean, append([]Sample(nil), o.series...), o.lastErr
}

// applyEvent records one pod's state as a watch delivered it at now
// (cluster mode: the API server's view, not the agent's). gone is a
// deletion. Each event counts as one observation in polls.
func (o *observer) applyEvent(p podLite, gone bool, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.polls++
	name := p.Metadata.Name
	v := o.view(name)
	if gone {
		v.listed = false
		if v.gone.IsZero() && v.seen {
			v.gone = now
			for _, w := range v.goners {
				w <- now
			}
			v.goners = nil
		}
		return
	}
	v.seen, v.listed, v.last = true, true, p
	for _, cs := range p.Status.ContainerStatuses {
		v.restarts = max(v.restarts, cs.RestartCount)
	}
	ready := reached(&p, GoalReady)
	if v.ready && !ready {
		o.flaps++
	}
	v.ready = ready
	if v.reached.IsZero() && reached(&p, o.goal) {
		v.reached = now
		o.nReached++
		for _, w := range v.waiters {
			w <- now
		}
		v.waiters = nil
		o.series = append(o.series, Sample{T: round3(now.Sub(o.start).Seconds()), Value: float64(o.nReached)})
	}
}
