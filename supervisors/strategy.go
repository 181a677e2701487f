package supervisors

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/internal/actorkit"
)

// StrategyConfig bounds restart intensity (OTP style) and paces restarts.
type StrategyConfig struct {
	// MaxRestarts is the number of restarts a child may have within Window;
	// one more failure escalates. Default 10.
	MaxRestarts int
	// Window is the sliding window failures are counted in. Default 60s.
	Window time.Duration
	// BackoffBase is the delay before the second restart in a window; each
	// further one doubles it. The first restart is immediate. Default 100ms.
	BackoffBase time.Duration
	// BackoffCap caps the delay. Default 10s.
	BackoffCap time.Duration
	// Contained are the kinds whose actors are stopped, never escalated,
	// when they fail too often: one per pod or probe, so one poison pod
	// stays a failure of that pod. Their parent sees them terminate and
	// spawns them again after a long back-off. Default DefaultContained;
	// every other kind (the singletons) escalates.
	Contained []string
	// OnGiveUp, when set, is called once the strategy stops an actor it
	// cannot escalate (the root, stopped by its guardian): the tree under
	// it is gone for good. It runs on a supervisor's goroutine.
	OnGiveUp func(GiveUp)
}

// GiveUp says which actor the top of the tree stopped, and why.
type GiveUp struct {
	PID      string
	Kind     string
	Reason   string // the last failure
	Failures int    // within Window
	Window   time.Duration
}

func (g GiveUp) String() string {
	return fmt.Sprintf("%s (%s) failed %d times within %s, last: %s", g.PID, g.Kind, g.Failures, g.Window, g.Reason)
}

// DefaultContained are the kinds stopped instead of escalated by default.
var DefaultContained = []string{KindPod, KindProbe}

// Defaults for StrategyConfig.
const (
	DefaultMaxRestarts = 10
	DefaultWindow      = 60 * time.Second
	DefaultBackoffBase = 100 * time.Millisecond
	DefaultBackoffCap  = 10 * time.Second
)

func (c StrategyConfig) withDefaults() StrategyConfig {
	if c.MaxRestarts <= 0 {
		c.MaxRestarts = DefaultMaxRestarts
	}
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffCap <= 0 {
		c.BackoffCap = DefaultBackoffCap
	}
	if c.BackoffCap < c.BackoffBase {
		c.BackoffCap = c.BackoffBase
	}
	if c.Contained == nil {
		c.Contained = DefaultContained
	}
	return c
}

// Backoff returns the delay before the restart that follows the n-th
// failure within the window (n >= 1): 0 for the first, then base*2^(n-2),
// capped.
func (c StrategyConfig) Backoff(n int) time.Duration {
	c = c.withDefaults()
	if n <= 1 {
		return 0
	}
	return actorkit.Backoff{Base: c.BackoffBase, Cap: c.BackoffCap}.Delay(n - 1)
}

type strategy struct {
	cfg       StrategyConfig
	clk       clock.Clock
	log       *slog.Logger
	onRestart func(kind string)

	mu        sync.Mutex
	history   map[string][]time.Time // child PID id -> failure times in the window
	lastSweep time.Time
}

var _ actor.SupervisorStrategy = (*strategy)(nil)

// NewStrategy returns a one-for-one supervisor strategy: each failure of a
// child is counted in a sliding window (per child, pruned as it slides);
// when the count exceeds MaxRestarts, a child of a Contained kind (a pod or
// probe actor) is stopped, and its parent sees it terminate; any other
// child's failure is escalated to the supervisor's own parent, or the
// child is stopped (and OnGiveUp called) when the supervisor is the top of
// the tree (a guardian or a parentless actor). Otherwise the
// child is restarted: at once after its first failure in the window, then
// after BackoffBase*2^(n-2), capped at BackoffCap, timed by clk (AfterFunc
// when clk has it, so a fake clock paces restarts in tests). onRestart (may
// be nil) is called with the child's kind when a restart is issued.
//
// The same strategy value may serve several supervisors and a guardian; it
// is safe for concurrent use.
func NewStrategy(cfg StrategyConfig, clk clock.Clock, log *slog.Logger, onRestart func(kind string)) actor.SupervisorStrategy {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if log == nil {
		log = slog.Default()
	}
	return &strategy{
		cfg:       cfg.withDefaults(),
		clk:       clk,
		log:       log,
		onRestart: onRestart,
		history:   make(map[string][]time.Time),
		lastSweep: clk.Now(),
	}
}

// HandleFailure implements actor.SupervisorStrategy. It runs on the
// supervisor's goroutine (or the failing child's, for a guardian).
func (s *strategy) HandleFailure(_ *actor.ActorSystem, supervisor actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason, message any) {
	kind := KindOf(child)
	now := s.clk.Now()
	n := s.recordFailure(child.Id, now)

	if n > s.cfg.MaxRestarts {
		s.forget(child.Id)
		if slices.Contains(s.cfg.Contained, kind) {
			// Contained: the parent respawns it later; the failure stays
			// inside this one pod.
			s.log.Error("actor failed too often, stopping it (its parent spawns it again later)",
				"kind", kind, "pid", child.Id, "reason", fmt.Sprint(reason),
				"failures", n, "window", s.cfg.Window, "message", typeName(message))
			supervisor.StopChildren(child)
			return
		}
		if isTop(supervisor) {
			g := GiveUp{PID: child.Id, Kind: kind, Reason: fmt.Sprint(reason), Failures: n, Window: s.cfg.Window}
			s.log.Error("actor failed too often, stopping it: the actor tree under it is gone",
				"kind", kind, "pid", child.Id, "reason", g.Reason,
				"failures", n, "window", s.cfg.Window, "message", typeName(message))
			supervisor.StopChildren(child)
			if s.cfg.OnGiveUp != nil {
				s.cfg.OnGiveUp(g)
			}
			return
		}
		s.log.Error("actor failed too often, escalating to its supervisor's parent",
			"kind", kind, "pid", child.Id, "reason", fmt.Sprint(reason),
			"failures", n, "window", s.cfg.Window, "message", typeName(message))
		supervisor.EscalateFailure(reason, message)
		return
	}

	delay := s.cfg.Backoff(n)
	s.log.Warn("actor failed, restarting it",
		"kind", kind, "pid", child.Id, "reason", fmt.Sprint(reason),
		"failures", n, "backoff", delay, "message", typeName(message))
	restart := func() {
		// Runs under a fake clock's lock in tests: must not call s.clk.
		supervisor.RestartChildren(child)
		if s.onRestart != nil {
			s.onRestart(kind)
		}
	}
	if delay <= 0 {
		restart()
		return
	}
	s.afterFunc(delay, restart)
}

// recordFailure appends a failure at now to the child's history, prunes
// what fell out of the window and returns the count within it. Now and
// then it drops the histories of children with no failure in the window
// (children that recovered or are gone).
func (s *strategy) recordFailure(id string, now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	cutoff := now.Add(-s.cfg.Window)
	if now.Sub(s.lastSweep) >= s.cfg.Window {
		for k, h := range s.history {
			if len(h) == 0 || !h[len(h)-1].After(cutoff) {
				delete(s.history, k)
			}
		}
		s.lastSweep = now
	}
	h := s.history[id]
	i := 0
	for i < len(h) && !h[i].After(cutoff) {
		i++
	}
	h = append(h[i:], now)
	s.history[id] = h
	return len(h)
}

func (s *strategy) forget(id string) {
	s.mu.Lock()
	delete(s.history, id)
	s.mu.Unlock()
}

// tracked is the number of children with a failure history (for tests).
func (s *strategy) tracked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.history)
}

func (s *strategy) afterFunc(d time.Duration, f func()) {
	if c, ok := s.clk.(clock.WithDelayedExecution); ok {
		c.AfterFunc(d, f)
		return
	}
	t := s.clk.NewTimer(d)
	go func() {
		<-t.C()
		f()
	}()
}

// isTop reports whether supervisor cannot escalate: a guardian (not an
// actor) or an actor without a parent (spawned from Root without guardian,
// whose escalation would go to protoactor's default strategy).
func isTop(supervisor actor.Supervisor) bool {
	c, ok := supervisor.(interface{ Parent() *actor.PID })
	return !ok || c.Parent() == nil
}

func typeName(m any) string {
	if m == nil {
		return ""
	}
	if e, ok := m.(*actor.MessageEnvelope); ok {
		m = e.Message
	}
	return fmt.Sprintf("%T", m)
}
