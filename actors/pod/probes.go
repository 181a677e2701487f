package pod

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/actors/probe"
	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// Reasons of probe-driven kills, as upstream.
const (
	ReasonUnhealthy         = "Unhealthy"
	ReasonKilling           = "Killing"
	ReasonFailedPostStart   = "FailedPostStartHook"
	ReasonPostStartHookErr  = "PostStartHookError"
	ReasonFailedPreStopHook = "FailedPreStopHook"
	ReasonDeadlineExceeded  = "DeadlineExceeded"
)

// probeChild is a running ProbeActor.
type probeChild struct {
	pid         *actor.PID
	containerID string
}

// ctrResult is what the probes said about one container (by ID). It is
// checkpointed, so a restarted PodActor or actorlet keeps a ready container
// ready, and a not-ready one not ready, until a probe says otherwise.
type ctrResult struct {
	Started *bool `json:"started,omitempty"`
	Ready   *bool `json:"ready,omitempty"`
}

// checkpoint is the file <ProbeCheckpointDir>/<pod-uid>.json.
type checkpoint struct {
	PodUID     string                `json:"podUID"`
	Containers map[string]*ctrResult `json:"containers"`
}

// killReq is a container to be killed because a probe failed.
type killReq struct {
	name    string
	message string
	grace   int64
}

// probeSet is the pod's probing: the running ProbeActors, what their
// results said (by container ID, checkpointed) and the containers a failed
// probe condemned.
type probeSet struct {
	children map[string]*probeChild // running ProbeActors by name
	stopping map[string]bool        // stopped, Terminated not yet seen (by PID id)
	results  map[string]*ctrResult  // by container ID
	kills    map[string]killReq     // by container ID
	loaded   bool                   // the checkpoint was read

	// down are the ProbeActors their supervisor stopped (they failed too
	// often), by name, until their respawn; closing: the PodActor stops or
	// restarts, its ProbeActors end with it.
	down    map[string]*probeDown
	closing bool
}

func newProbeSet() probeSet {
	return probeSet{children: map[string]*probeChild{}, stopping: map[string]bool{}, down: map[string]*probeDown{},
		results: map[string]*ctrResult{}, kills: map[string]killReq{}}
}

// stopped records a stopped ProbeActor; true when it was one of the pod's.
func (p *probeSet) stopped(who *actor.PID) bool {
	if who == nil || !p.stopping[who.Id] {
		return false
	}
	delete(p.stopping, who.Id)
	return true
}

// prune forgets containers that no longer run; true when something was
// forgotten.
func (p *probeSet) prune(snap *snapshot) bool {
	running := map[string]bool{}
	for _, cs := range snap.containers {
		for _, c := range cs {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				running[c.Id] = true
			}
		}
	}
	changed := false
	for id := range p.results {
		if !running[id] {
			delete(p.results, id)
			changed = true
		}
	}
	return changed
}

// encodeCheckpoint and decodeCheckpoint are the checkpoint's file format.
func encodeCheckpoint(uid types.UID, results map[string]*ctrResult) ([]byte, error) {
	return json.Marshal(checkpoint{PodUID: string(uid), Containers: results})
}

func decodeCheckpoint(uid types.UID, b []byte) (map[string]*ctrResult, error) {
	out := map[string]*ctrResult{}
	if len(b) == 0 {
		return out, nil
	}
	var cp checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return out, fmt.Errorf("probe checkpoint: %w", err)
	}
	if cp.PodUID != string(uid) {
		return out, fmt.Errorf("probe checkpoint of pod %q, not %q", cp.PodUID, uid)
	}
	for id, r := range cp.Containers {
		if r != nil {
			out[id] = r
		}
	}
	return out, nil
}

// probeState says whether a running container has started (its startup
// probe succeeded, or it has none) and is ready (started, and its readiness
// probe succeeded or it has none).
func (a *Actor) probeState(c *v1.Container, id string) (started, ready bool) {
	r := a.probes.results[id]
	started = c.StartupProbe == nil || (r != nil && r.Started != nil && *r.Started)
	ready = started && (c.ReadinessProbe == nil || (r != nil && r.Ready != nil && *r.Ready))
	if _, dying := a.probes.kills[id]; dying || a.kill != nil {
		ready = false
	}
	return started, ready
}

// syncProbes makes the ProbeActors match the running containers: a startup
// probe until the container has started, then liveness and readiness; none
// for containers that do not run, and none once the pod is being killed.
func (a *Actor) syncProbes(ctx actor.Context) {
	want := map[string]probe.Target{}
	if a.kill == nil && a.pod != nil && a.snap != nil {
		if a.probes.prune(a.snap) {
			a.saveCheckpoint()
		}
		if sb := a.snap.latestSandbox(); sb != nil && sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			podIP := sb.GetNetwork().GetIp()
			if a.pod.Spec.HostNetwork || podIP == "" {
				podIP = a.d.Config.HostIP
			}
			for _, c := range podspec.Probed(a.pod) {
				cur := a.snap.inSandbox(c.Name, sb.Id, a.sboxOf)
				if cur == nil || cur.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
					continue
				}
				if _, dying := a.probes.kills[cur.Id]; dying {
					continue
				}
				started, _ := a.probeState(c, cur.Id)
				kinds := []messages.ProbeKind{messages.ProbeStartup}
				if started {
					kinds = []messages.ProbeKind{messages.ProbeLiveness, messages.ProbeReadiness}
				}
				for _, k := range kinds {
					p := probe.Of(c, k)
					if p == nil {
						continue
					}
					want[probe.Name(c.Name, k)] = probe.Target{
						Kind: k, PodName: a.pod.Name, Namespace: a.pod.Namespace, PodUID: a.pod.UID,
						PodIP: podIP, Container: c.DeepCopy(), ContainerID: cur.Id,
						StartedAt: time.Unix(0, cur.StartedAt), Probe: p.DeepCopy(),
					}
				}
			}
		}
	}
	for name, ch := range a.probes.children {
		if w, ok := want[name]; ok && w.ContainerID == ch.containerID {
			continue
		}
		ctx.Stop(ch.pid)
		a.probes.stopping[ch.pid.Id] = true
		delete(a.probes.children, name)
	}
	for name, t := range want {
		if _, ok := a.probes.children[name]; ok || a.probes.stopping[ctx.Self().Id+"/"+name] {
			continue // running, or its predecessor has not stopped yet
		}
		if d := a.probes.down[name]; d != nil && d.timer.Armed() {
			continue // stopped by its supervisor: back after its back-off
		}
		deps := probe.Deps{Handlers: a.d.Probes.Handlers, Clock: a.d.Clock, Metrics: a.d.Probes.Metrics, Log: a.d.Log}
		pid, err := ctx.SpawnNamed(a.d.Probes.Props(probe.New(t, deps)), name)
		if err != nil {
			a.log.Warn("spawn probe", "probe", name, "err", err)
			continue
		}
		a.probes.children[name] = &probeChild{pid: pid, containerID: t.ContainerID}
	}
}

// handleProbeResult records a changed probe result: readiness and startup
// change the status (and start the gated probes); a failed liveness or
// startup probe kills the container, which restarts per restartPolicy.
func (a *Actor) handleProbeResult(ctx actor.Context, m *messages.ProbeResult) {
	if a.pod == nil || a.kill != nil || a.snap == nil {
		return
	}
	cur := a.snap.latest(m.Container)
	if cur == nil || cur.Id != m.ContainerID || cur.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return // a result about a container that is gone
	}
	c := podspec.FindContainer(a.pod, m.Container)
	if c == nil {
		return
	}
	r := a.probes.results[m.ContainerID]
	if r == nil {
		r = &ctrResult{}
		a.probes.results[m.ContainerID] = r
	}
	ok := m.Success
	switch {
	case m.Kind == messages.ProbeReadiness:
		if r.Ready != nil && *r.Ready == ok {
			return
		}
		r.Ready = &ok
		if !ok {
			a.log.Info("container not ready", "reason", ReasonUnhealthy, "container", m.Container, "message", "Readiness probe failed: "+m.Message)
			a.event(v1.EventTypeWarning, ReasonUnhealthy, m.ContainerID+"/readiness", "Readiness probe failed: %s", m.Message)
		}
	case m.Kind == messages.ProbeStartup && ok:
		if r.Started != nil && *r.Started {
			return
		}
		r.Started = &ok
	case m.Kind == messages.ProbeLiveness && ok:
		return
	default: // liveness or startup failed
		if _, ok := a.probes.kills[m.ContainerID]; ok {
			return
		}
		what := "liveness"
		if m.Kind == messages.ProbeStartup {
			what = "startup"
		}
		grace := podspec.GracePeriod(a.pod, nil)
		if p := probe.Of(c, m.Kind); p != nil && p.TerminationGracePeriodSeconds != nil {
			grace = max(*p.TerminationGracePeriodSeconds, 1)
		}
		a.log.Warn("probe failed", "reason", ReasonUnhealthy, "container", m.Container,
			"message", fmt.Sprintf("%s probe failed: %s", upperFirst(what), m.Message))
		a.event(v1.EventTypeWarning, ReasonUnhealthy, m.ContainerID+"/"+what, "%s probe failed: %s", upperFirst(what), m.Message)
		msg := fmt.Sprintf("Container %s failed %s probe", m.Container, what)
		if restartsAfterKill(c, &a.pod.Spec) {
			// As upstream: the message says so only when the container's
			// own restartPolicy (else the pod's) is not Never.
			msg += ", will be restarted"
		}
		a.log.Info("killing container", "reason", ReasonKilling, "container", m.Container, "message", msg)
		a.probes.kills[m.ContainerID] = killReq{name: m.Container, message: msg, grace: grace}
	}
	a.saveCheckpoint()
	a.syncProbes(ctx)
	a.status = nil
	a.kick(ctx)
}

// ReasonProbeWarning is the event reason of a probe that succeeded with a
// warning, as upstream.
const ReasonProbeWarning = "ProbeWarning"

// handleProbeWarning records a probe's warning as an event ("Liveness
// probe warning: ..."), as upstream's prober does.
func (a *Actor) handleProbeWarning(m *messages.ProbeWarning) {
	if a.pod == nil || a.snap == nil {
		return
	}
	if cur := a.snap.latest(m.Container); cur == nil || cur.Id != m.ContainerID {
		return // about a container that is gone
	}
	a.event(v1.EventTypeWarning, ReasonProbeWarning, m.ContainerID+"/"+string(m.Kind)+"/warning",
		"%s probe warning: %s", upperFirst(string(m.Kind)), m.Message)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// pendingKill returns the stop of a container a probe condemned, if it still
// runs.
func (a *Actor) pendingKill() (action, bool) {
	for id, k := range a.probes.kills {
		cur := a.snap.latest(k.name)
		if cur == nil || cur.Id != id || cur.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			delete(a.probes.kills, id)
			continue
		}
		delete(a.probes.kills, id)
		return action{kind: actStopContainers, ids: []string{id}, reason: k.message, grace: k.grace}, true
	}
	return action{}, false
}

// loadCheckpoint reads the pod's last probe results off the mailbox; the
// first plan waits for them, so a restarted PodActor keeps a ready
// container ready.
func (a *Actor) loadCheckpoint() {
	if a.d.Files == nil {
		a.probes.loaded = true
		return
	}
	files, uid := a.d.Files, a.uid
	actorkit.Go(a.self, a.d.Config.OpTimeout, func(context.Context) *checkpointLoaded {
		b, err := files.LoadCheckpoint(uid)
		if err != nil {
			return &checkpointLoaded{results: map[string]*ctrResult{}, err: err}
		}
		res, err := decodeCheckpoint(uid, b)
		return &checkpointLoaded{results: res, err: err}
	})
}

func (a *Actor) handleCheckpointLoaded(ctx actor.Context, m *checkpointLoaded) {
	if m.err != nil {
		a.log.Warn("ignoring probe checkpoint", "err", m.err)
	}
	for id, r := range m.results {
		if _, ok := a.probes.results[id]; !ok {
			a.probes.results[id] = r
		}
	}
	a.probes.loaded = true
	a.kick(ctx)
}

// saveCheckpoint hands the results to the Files adapter, which writes them
// off the mailbox (the newest wins).
func (a *Actor) saveCheckpoint() {
	if a.d.Files == nil {
		return
	}
	b, err := encodeCheckpoint(a.uid, a.probes.results)
	if err != nil {
		a.log.Warn("encode probe checkpoint", "err", err)
		return
	}
	a.d.Files.SaveCheckpoint(a.uid, b)
}

// probeDown is a ProbeActor its supervisor stopped, and its back-off.
type probeDown struct {
	timer     actorkit.Timer
	stops     int       // in a row: the back-off's exponent
	respawned time.Time // when it was last spawned again
}

const probeRespawnPrefix = "probe-respawn/"

// handleProbeTerminated handles the end of a ProbeActor: one the PodActor
// stopped lets syncProbes spawn its successor; one that ended unasked was
// stopped by its supervisor for failing too often: it is reported and
// spawned again after a long back-off, the pod and its other probes go on
// (its last result stands meanwhile).
func (a *Actor) handleProbeTerminated(ctx actor.Context, who *actor.PID) {
	if a.probes.stopped(who) {
		a.syncProbes(ctx)
		return
	}
	if a.probes.closing || who == nil {
		return
	}
	for name, ch := range a.probes.children {
		if ch.pid != who {
			continue
		}
		delete(a.probes.children, name)
		a.probeFailedTooOften(name)
		return
	}
}

func (a *Actor) probeFailedTooOften(name string) {
	base, capd := a.d.Probes.RespawnBackoff, a.d.Probes.RespawnBackoffMax
	if base <= 0 {
		base = time.Minute
	}
	if capd < base {
		capd = max(5*time.Minute, base)
	}
	d := a.probes.down[name]
	if d == nil {
		d = &probeDown{timer: actorkit.NewTimer(probeRespawnPrefix + name)}
		a.probes.down[name] = d
	}
	now := a.d.Clock.Now()
	if !d.respawned.IsZero() && now.Sub(d.respawned) >= 2*capd {
		d.stops = 0 // it ran long enough: a new series
	}
	d.stops++
	delay := actorkit.Backoff{Base: base, Cap: capd}.Delay(d.stops)
	d.timer.Arm(a.self, delay)
	a.log.Warn("probe actor failed too often and was stopped; spawning it again after a back-off",
		"probe", name, "stops", d.stops, "respawn_in", delay)
	a.event(v1.EventTypeWarning, ReasonProbeWorkerFailed, name+"/"+fmt.Sprint(d.stops),
		"Probe %s: its worker failed too often and was stopped (%d in a row); it is started again in %s", name, d.stops, delay)
}

// ReasonProbeWorkerFailed is the event reason of a ProbeActor stopped for
// failing too often.
const ReasonProbeWorkerFailed = "ProbeWorkerFailed"

// probeRespawnFired lets a stopped ProbeActor be spawned again once its
// back-off ended; false when m is no probe respawn timer's.
func (a *Actor) probeRespawnFired(ctx actor.Context, m *actorkit.Fired) bool {
	name, ok := strings.CutPrefix(m.Name, probeRespawnPrefix)
	if !ok {
		return false
	}
	if d := a.probes.down[name]; d != nil && d.timer.Fired(a.self, m) {
		d.respawned = a.d.Clock.Now()
		a.syncProbes(ctx)
	}
	return true
}
