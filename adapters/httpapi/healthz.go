package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/messages"
)

// Defaults of /healthz.
const (
	DefaultHealthProbeTimeout = 5 * time.Second
	DefaultHealthCacheTTL     = time.Second
)

// Singleton is one long-lived actor of the tree (node, status, images,
// a pod source, ...) that /healthz probes: the wiring names them, the
// adapter knows nothing of the tree.
type Singleton struct {
	Name string // as in the tree: "node", "status", "source-file", ...
	PID  *actor.PID
}

// checkResult is one named check of a /healthz round; err nil: passed.
type checkResult struct {
	name string
	err  error
}

// health runs the checks of /healthz, as upstream's healthz handler lists
// them:
//   - pleg: the PLEG answers and relisted within its threshold;
//   - runtime: its last relist did not fail;
//   - actor-<name>: each singleton is running and its mailbox answers a
//     probe (protoactor's *actor.Touch, answered by the framework after
//     the actor's Receive, so no actor needs code for it and a busy or
//     suspended mailbox is seen as such) within the probe timeout.
//
// Every probe is a message with a timeout: nothing blocks an actor. A
// round's result is reused for the cache TTL, and concurrent requests
// share the round in flight.
type health struct {
	sys        *actor.ActorSystem
	pleg       *actor.PID
	singletons []Singleton
	timeout    time.Duration
	ttl        time.Duration
	clk        clock.PassiveClock
	log        *slog.Logger

	mu       sync.Mutex
	last     []checkResult
	at       time.Time
	inflight chan struct{} // closed when the round in flight ends
}

func newHealth(cfg Config) *health {
	return &health{
		sys: cfg.System, pleg: cfg.PLEG, singletons: cfg.Singletons,
		timeout: cfg.HealthProbeTimeout, ttl: cfg.HealthCacheTTL, clk: cfg.Clock, log: cfg.Logger,
	}
}

// results returns a fresh enough round: the cached one, the one in flight,
// or a new one. ctx only bounds this caller's wait.
func (h *health) results(ctx context.Context) ([]checkResult, error) {
	h.mu.Lock()
	if h.last != nil && h.clk.Since(h.at) < h.ttl {
		r := h.last
		h.mu.Unlock()
		return r, nil
	}
	if ch := h.inflight; ch != nil {
		h.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.last, nil
	}
	ch := make(chan struct{})
	h.inflight = ch
	h.mu.Unlock()

	r := h.round()
	var failed []string
	for _, c := range r {
		if c.err != nil {
			failed = append(failed, c.name+": "+c.err.Error())
		}
	}
	if len(failed) > 0 {
		h.log.Warn("healthz failed", "checks", failed) // once per round, not per request
	}

	h.mu.Lock()
	h.last, h.at, h.inflight = r, h.clk.Now(), nil
	h.mu.Unlock()
	close(ch)
	return r, nil
}

// round runs every check at once; it takes at most the probe timeout.
func (h *health) round() []checkResult {
	out := make([]checkResult, 2+len(h.singletons))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		out[0], out[1] = h.checkPLEG()
	}()
	for i, s := range h.singletons {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[2+i] = checkResult{name: "actor-" + s.Name, err: h.probe(s.PID)}
		}()
	}
	wg.Wait()
	return out
}

// checkPLEG is the PLEG's freshness and the runtime's last relist error.
func (h *health) checkPLEG() (pleg, runtime checkResult) {
	pleg, runtime = checkResult{name: "pleg"}, checkResult{name: "runtime"}
	res, err := h.sys.Root.RequestFuture(h.pleg, &messages.GetHealth{}, h.timeout).Result()
	if err != nil {
		pleg.err = askError("PLEG", h.pleg, h.timeout, err)
		runtime.err = errors.New("unknown: the PLEG did not answer")
		return pleg, runtime
	}
	var hl messages.Health
	switch m := res.(type) {
	case *messages.Health:
		if m != nil {
			hl = *m
		}
	case messages.Health:
		hl = m
	default:
		pleg.err = fmt.Errorf("unexpected answer %T", res)
		runtime.err = pleg.err
		return pleg, runtime
	}
	threshold := hl.Threshold
	if threshold <= 0 {
		threshold = DefaultHealthThreshold
	}
	switch {
	case hl.LastRelist.IsZero():
		pleg.err = errors.New("no successful relist yet")
	default:
		if age := h.clk.Since(hl.LastRelist); age > threshold {
			pleg.err = fmt.Errorf("last relist %s ago, threshold %s", age.Round(time.Second), threshold)
		}
	}
	if hl.RuntimeErr != "" {
		runtime.err = errors.New(hl.RuntimeErr)
	}
	return pleg, runtime
}

// probe sends the actor a Touch and waits for its Touched.
func (h *health) probe(pid *actor.PID) error {
	if pid == nil {
		return errors.New("no such actor")
	}
	res, err := h.sys.Root.RequestFuture(pid, &actor.Touch{}, h.timeout).Result()
	if err != nil {
		return askError("actor", pid, h.timeout, err)
	}
	if _, ok := res.(*actor.Touched); !ok {
		return fmt.Errorf("unexpected answer %T", res)
	}
	return nil
}

func askError(what string, pid *actor.PID, timeout time.Duration, err error) error {
	switch {
	case errors.Is(err, actor.ErrTimeout):
		return fmt.Errorf("%s (%s) did not answer within %s", what, pid.Id, timeout)
	case errors.Is(err, actor.ErrDeadLetter):
		return fmt.Errorf("%s (%s) is not running", what, pid.Id)
	default:
		return fmt.Errorf("%s (%s): %w", what, pid.Id, err)
	}
}

// handleHealthz answers as upstream's healthz does: "ok" when every check
// passes ("?verbose" lists them, "[+]name ok", then "healthz check
// passed"); else 500 with every check listed, the failed ones as
// "[-]name failed: reason", then "healthz check failed".
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	results, err := s.health.results(r.Context())
	if err != nil {
		httpError(w, http.StatusServiceUnavailable, "healthz: %v", err)
		return
	}
	var b strings.Builder
	failed := false
	for _, c := range results {
		if c.err != nil {
			fmt.Fprintf(&b, "[-]%s failed: %v\n", c.name, c.err)
			failed = true
			continue
		}
		fmt.Fprintf(&b, "[+]%s ok\n", c.name)
	}
	if failed {
		httpError(w, http.StatusInternalServerError, "%shealthz check failed", b.String())
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if _, verbose := r.URL.Query()["verbose"]; !verbose {
		_, _ = fmt.Fprint(w, "ok")
		return
	}
	_, _ = fmt.Fprintf(w, "%shealthz check passed\n", b.String())
}
