package pod

import (
	"context"
	"encoding/json"
	"fmt"
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
}

func newProbeSet() probeSet {
	return probeSet{children: map[string]*probeChild{}, stopping: map[string]bool{}, results: map[string]*ctrResult{}, kills: map[string]killReq{}}
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
	c := containerSpec(a.pod, m.Container)
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
		msg := fmt.Sprintf("Container %s failed %s probe, will be restarted", m.Container, what)
		a.log.Info("killing container", "reason", ReasonKilling, "container", m.Container, "message", msg)
		a.probes.kills[m.ContainerID] = killReq{name: m.Container, message: msg, grace: grace}
	}
	a.saveCheckpoint()
	a.syncProbes(ctx)
	a.status = nil
	a.kick(ctx)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func containerSpec(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
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
