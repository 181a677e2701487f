// Package probe is the ProbeActor: one probe (liveness, readiness or startup)
// of one running container, a child of its PodActor named
// "probe-<container>-<kind>".
//
// Timing is a timer armed on the injected clock: the first probe runs at the
// container's start plus initialDelaySeconds, then every periodSeconds on a
// fixed schedule (a slow probe skips ticks, it never shifts the schedule).
// One probe attempt runs off the mailbox and comes back as a message; the
// thresholds (successThreshold, failureThreshold) are applied as upstream and
// the parent hears only when the result changes (and once after a start).
package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// Execer runs a command in a container (CRI ExecSync); a non-zero exit code
// is not an error.
type Execer interface {
	ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (stdout, stderr []byte, exitCode int32, err error)
}

// HTTPGetter performs one HTTP GET probe: ok for a 2xx/3xx answer (redirects
// handled as upstream), output is a short description of a failure. A
// redirect that was not followed (to another host) succeeds with warning
// set, output then saying so.
type HTTPGetter interface {
	HTTPGet(ctx context.Context, u *url.URL, header http.Header, timeout time.Duration) (ok, warning bool, output string, err error)
}

// TCPChecker opens (and closes) a TCP connection.
type TCPChecker interface {
	TCPCheck(ctx context.Context, host string, port int, timeout time.Duration) (ok bool, output string, err error)
}

// GRPCChecker calls the standard gRPC health service.
type GRPCChecker interface {
	GRPCCheck(ctx context.Context, host string, port int, service string, timeout time.Duration) (ok bool, output string, err error)
}

// Handlers are the outbound handlers of the probe kinds; a nil handler makes
// probes of its kind fail with a clear message.
type Handlers struct {
	Exec Execer
	HTTP HTTPGetter
	TCP  TCPChecker
	GRPC GRPCChecker
}

// Metrics counts probe results (prober_probe_total,
// prober_probe_duration_seconds). May be nil.
type Metrics interface {
	ObserveProbe(probeType, result, container, pod, namespace, podUID string, d time.Duration)
}

// Deps are a ProbeActor's collaborators.
type Deps struct {
	Handlers Handlers
	Clock    clock.WithDelayedExecution
	Metrics  Metrics
	Log      *slog.Logger
}

// Target is what one ProbeActor probes.
type Target struct {
	Kind        messages.ProbeKind
	PodName     string
	Namespace   string
	PodUID      types.UID
	PodIP       string
	Container   *v1.Container // deep copy: ports and env for the handlers
	ContainerID string
	StartedAt   time.Time // the container's start: initialDelaySeconds counts from it
	Probe       *v1.Probe
}

// Name is the actor name of a probe: probe-<container>-<kind>.
func Name(container string, kind messages.ProbeKind) string {
	return "probe-" + container + "-" + string(kind)
}

// Probe of a container spec for a kind, or nil.
func Of(c *v1.Container, kind messages.ProbeKind) *v1.Probe {
	switch kind {
	case messages.ProbeLiveness:
		return c.LivenessProbe
	case messages.ProbeReadiness:
		return c.ReadinessProbe
	case messages.ProbeStartup:
		return c.StartupProbe
	}
	return nil
}

// New returns the producer of a ProbeActor. Clock is required.
func New(t Target, d Deps) actor.Producer {
	if d.Clock == nil || t.Probe == nil || t.Container == nil {
		panic("probe.New: Clock, Probe and Container are required")
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return func() actor.Actor {
		return &Actor{t: t, d: d, log: d.Log.With("pod", t.Namespace+"/"+t.PodName, "container", t.Container.Name, "probe", string(t.Kind))}
	}
}

// Actor is the ProbeActor.
type Actor struct {
	t   Target
	d   Deps
	log *slog.Logger

	self   actorkit.Self
	parent *actor.PID

	tick     actorkit.Timer
	nextAt   time.Time // the tick's place on the fixed schedule
	inFlight bool

	last      *bool  // last result reported to the parent; nil: none since start
	warned    string // last warning reported to the parent
	lastRun   bool   // result of the current run of equal results
	resultRun int
	onHold    bool // liveness/startup failed: no more probing for this container
}

// outcome is what one probe attempt says.
type outcome struct {
	ok      bool
	warning bool // succeeded with a warning (msg)
	msg     string
	err     error
}

// done is the outcome of one probe attempt.
type done struct {
	actorkit.Tag
	outcome
	took time.Duration
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.handleStarted(ctx)
	case *actor.Restarting, *actor.Stopping:
		a.tick.Stop()
	case *actorkit.Fired:
		if a.tick.Fired(a.self, m) {
			a.handleTick()
		}
	case *done:
		a.handleDone(ctx, m)
	}
}

func (a *Actor) handleStarted(ctx actor.Context) {
	a.self, a.parent = actorkit.Start(ctx, a.d.Clock), ctx.Parent()
	a.tick = actorkit.NewTimer("tick")
	now := a.d.Clock.Now()
	first := a.t.StartedAt.Add(time.Duration(a.t.Probe.InitialDelaySeconds) * time.Second)
	if first.After(now) {
		a.arm(first)
		return
	}
	// Due now: take the first step at once (a fake clock fires timers only
	// when stepped).
	a.nextAt = now
	a.handleTick()
}

// arm schedules the next tick at t.
func (a *Actor) arm(t time.Time) {
	a.nextAt = t
	a.tick.Arm(a.self, t.Sub(a.d.Clock.Now()))
}

func (a *Actor) period() time.Duration {
	p := time.Duration(a.t.Probe.PeriodSeconds) * time.Second
	if p <= 0 {
		p = 10 * time.Second
	}
	return p
}

func (a *Actor) timeout() time.Duration {
	t := time.Duration(a.t.Probe.TimeoutSeconds) * time.Second
	if t <= 0 {
		t = time.Second
	}
	return t
}

// handleTick is one step: start a probe unless one is in flight, and arm the
// next tick on the fixed schedule.
func (a *Actor) handleTick() {
	if a.onHold {
		return
	}
	now := a.d.Clock.Now()
	next := a.nextAt.Add(a.period())
	for !next.After(now) {
		next = next.Add(a.period())
	}
	a.arm(next)
	if a.inFlight {
		return // the previous attempt is still running: skip this tick
	}
	a.inFlight = true
	run, clk := a.runner(), a.d.Clock
	actorkit.Go(a.self, a.timeout()+time.Second, func(ctx context.Context) *done {
		start := clk.Now()
		o := run(ctx)
		return &done{outcome: o, took: clk.Since(start)}
	})
}

// handleDone takes the result of the attempt in flight (at most one is).
func (a *Actor) handleDone(ctx actor.Context, m *done) {
	if !a.self.Mine(m) {
		return
	}
	a.inFlight = false
	ok := m.ok && m.err == nil
	msg := m.msg
	if m.err != nil {
		msg = m.err.Error()
	}
	if a.d.Metrics != nil {
		res := "successful"
		switch {
		case m.err != nil:
			res = "unknown"
		case !m.ok:
			res = "failed"
		}
		a.d.Metrics.ObserveProbe(metricType(a.t.Kind), res, a.t.Container.Name, a.t.PodName, a.t.Namespace, string(a.t.PodUID), m.took)
	}
	if a.onHold {
		return
	}
	if ok && m.warning && msg != a.warned && a.parent != nil {
		// As upstream: the probe succeeds, and the warning is an event.
		a.warned = msg
		ctx.Send(a.parent, &messages.ProbeWarning{Container: a.t.Container.Name, ContainerID: a.t.ContainerID,
			Kind: a.t.Kind, Message: msg})
	}
	if m.err != nil && errdefs.IsUnavailable(m.err) {
		// As upstream (a prober error is thrown away): a probe the runtime
		// could not run, because it is down, says nothing about the
		// container; it neither counts towards a threshold nor resets one.
		return
	}
	if ok == a.lastRun && a.resultRun > 0 {
		a.resultRun++
	} else {
		a.lastRun, a.resultRun = ok, 1
	}
	threshold := int(a.t.Probe.FailureThreshold)
	if ok {
		threshold = int(a.t.Probe.SuccessThreshold)
	}
	if threshold <= 0 {
		threshold = map[bool]int{true: 1, false: 3}[ok]
	}
	if a.resultRun < threshold {
		return // keep the last result until the threshold is reached
	}
	if !ok {
		a.log.Info("probe failed", "output", msg)
	}
	if a.last == nil || *a.last != ok {
		a.last = &ok
		if a.parent != nil {
			ctx.Send(a.parent, &messages.ProbeResult{Container: a.t.Container.Name, ContainerID: a.t.ContainerID,
				Kind: a.t.Kind, Success: ok, Message: msg})
		}
	}
	if !ok && a.t.Kind != messages.ProbeReadiness {
		// The container is killed: nothing to probe until it is replaced
		// (a new container gets a new ProbeActor).
		a.onHold = true
		a.tick.Stop()
	}
	if ok && a.t.Kind == messages.ProbeStartup {
		a.onHold = true // started: the startup probe is done
		a.tick.Stop()
	}
}

func metricType(k messages.ProbeKind) string {
	switch k {
	case messages.ProbeLiveness:
		return "Liveness"
	case messages.ProbeReadiness:
		return "Readiness"
	}
	return "Startup"
}

// errNoHandler is a probe whose handler kind is not configured.
var errNoHandler = errors.New("probe handler not configured")

// runner returns one attempt of the probe, ready to run off the mailbox.
func (a *Actor) runner() func(ctx context.Context) outcome {
	p, h, t := a.t.Probe, a.d.Handlers, a.t
	timeout := a.timeout()
	switch {
	case p.Exec != nil:
		if h.Exec == nil {
			return noHandler("exec")
		}
		cmd := podspec.ExpandCommand(p.Exec.Command, t.Container.Env)
		id := t.ContainerID
		return func(ctx context.Context) outcome {
			stdout, stderr, code, err := h.Exec.ExecSync(ctx, id, cmd, timeout)
			if err != nil {
				return outcome{err: err}
			}
			out := truncate(string(stdout) + string(stderr))
			if code != 0 {
				return outcome{msg: fmt.Sprintf("command %q exited with %d: %s", cmd, code, out)}
			}
			return outcome{ok: true, msg: out}
		}
	case p.HTTPGet != nil:
		if h.HTTP == nil {
			return noHandler("httpGet")
		}
		u, header, err := podspec.HTTPTarget(p.HTTPGet, t.Container, t.PodIP)
		if err != nil {
			return failNow(err)
		}
		return func(ctx context.Context) outcome {
			ok, warning, msg, err := h.HTTP.HTTPGet(ctx, u, header, timeout)
			return outcome{ok: ok, warning: warning, msg: msg, err: err}
		}
	case p.TCPSocket != nil:
		if h.TCP == nil {
			return noHandler("tcpSocket")
		}
		port, err := podspec.ResolvePort(p.TCPSocket.Port, t.Container)
		if err != nil {
			return failNow(err)
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = t.PodIP
		}
		return func(ctx context.Context) outcome {
			ok, msg, err := h.TCP.TCPCheck(ctx, host, port, timeout)
			return outcome{ok: ok, msg: msg, err: err}
		}
	case p.GRPC != nil:
		if h.GRPC == nil {
			return noHandler("grpc")
		}
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		host, port := t.PodIP, int(p.GRPC.Port)
		return func(ctx context.Context) outcome {
			ok, msg, err := h.GRPC.GRPCCheck(ctx, host, port, service, timeout)
			return outcome{ok: ok, msg: msg, err: err}
		}
	}
	return failNow(errors.New("probe has no handler"))
}

func noHandler(kind string) func(context.Context) outcome {
	return failNow(fmt.Errorf("%s: %w", kind, errNoHandler))
}

func failNow(err error) func(context.Context) outcome {
	return func(context.Context) outcome { return outcome{err: err} }
}

func truncate(s string) string {
	const maxOutput = 10 * 1024
	if len(s) > maxOutput {
		return s[:maxOutput]
	}
	return s
}
