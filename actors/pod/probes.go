package pod

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/actorlet/actorlet/actors/probe"
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

// probeState says whether a running container has started (its startup
// probe succeeded, or it has none) and is ready (started, and its readiness
// probe succeeded or it has none).
func (a *Actor) probeState(c *v1.Container, id string) (started, ready bool) {
	r := a.results[id]
	started = c.StartupProbe == nil || (r != nil && r.Started != nil && *r.Started)
	ready = started && (c.ReadinessProbe == nil || (r != nil && r.Ready != nil && *r.Ready))
	if _, dying := a.kills[id]; dying || a.kill != nil {
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
		a.pruneResults()
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
				if _, dying := a.kills[cur.Id]; dying {
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
	for name, ch := range a.probes {
		if w, ok := want[name]; ok && w.ContainerID == ch.containerID {
			continue
		}
		ctx.Stop(ch.pid)
		a.probeStopping[ch.pid.Id] = true
		delete(a.probes, name)
	}
	for name, t := range want {
		if _, ok := a.probes[name]; ok || a.probeStopping[ctx.Self().Id+"/"+name] {
			continue // running, or its predecessor has not stopped yet
		}
		deps := probe.Deps{Handlers: a.d.Probes.Handlers, Clock: a.d.Clock, Metrics: a.d.Probes.Metrics, Log: a.d.Log}
		pid, err := ctx.SpawnNamed(a.d.Probes.Props(probe.New(t, deps)), name)
		if err != nil {
			a.log.Warn("spawn probe", "probe", name, "err", err)
			continue
		}
		a.probes[name] = &probeChild{pid: pid, containerID: t.ContainerID}
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
	r := a.results[m.ContainerID]
	if r == nil {
		r = &ctrResult{}
		a.results[m.ContainerID] = r
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
		if _, ok := a.kills[m.ContainerID]; ok {
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
		a.kills[m.ContainerID] = killReq{name: m.Container, message: msg, grace: grace}
		a.syncProbes(ctx)
	}
	a.saveCheckpoint()
	a.syncProbes(ctx)
	a.status = nil
	a.requestInspect()
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
	for id, k := range a.kills {
		cur := a.snap.latest(k.name)
		if cur == nil || cur.Id != id || cur.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			delete(a.kills, id)
			continue
		}
		delete(a.kills, id)
		return action{kind: actStopContainers, ids: []string{id}, reason: k.message, grace: k.grace}, true
	}
	return action{}, false
}

// pruneResults forgets containers the runtime no longer holds.
func (a *Actor) pruneResults() {
	changed := false
	for id := range a.results {
		found := false
		for _, cs := range a.snap.containers {
			for _, c := range cs {
				if c.Id == id && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
					found = true
				}
			}
		}
		if !found {
			delete(a.results, id)
			changed = true
		}
	}
	if changed {
		a.saveCheckpoint()
	}
}

func (a *Actor) checkpointPath() string {
	if a.d.Config.ProbeCheckpointDir == "" {
		return ""
	}
	return filepath.Join(a.d.Config.ProbeCheckpointDir, string(a.uid)+".json")
}

// loadCheckpoint reads the last probe results of the pod, if any.
func (a *Actor) loadCheckpoint() map[string]*ctrResult {
	out := map[string]*ctrResult{}
	path := a.checkpointPath()
	if path == "" {
		return out
	}
	b, err := checkpoints.read(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			a.log.Warn("read probe checkpoint", "path", path, "err", err)
		}
		return out
	}
	var cp checkpoint
	if err := json.Unmarshal(b, &cp); err != nil || cp.PodUID != string(a.uid) {
		a.log.Warn("ignoring bad probe checkpoint", "path", path, "err", err)
		return out
	}
	for id, r := range cp.Containers {
		if r != nil {
			out[id] = r
		}
	}
	return out
}

// saveCheckpoint writes the results atomically (a temporary file renamed
// over the old one). It is small and local: written from the mailbox.
func (a *Actor) saveCheckpoint() {
	path := a.checkpointPath()
	if path == "" {
		return
	}
	b, err := json.Marshal(checkpoint{PodUID: string(a.uid), Containers: a.results})
	if err != nil {
		a.log.Warn("encode probe checkpoint", "err", err)
		return
	}
	checkpoints.put(path, b, a.log) // written off the mailbox, newest wins
}

func (a *Actor) removeCheckpoint() {
	if path := a.checkpointPath(); path != "" {
		checkpoints.put(path, nil, a.log)
	}
}

// checkpointWriter writes probe checkpoints off the actors' mailboxes: a
// file per pod, the newest content wins, and writes of one path never run
// out of order (not even across incarnations of a PodActor).
type checkpointWriter struct {
	mu      sync.Mutex
	pending map[string][]byte // path -> newest content not yet taken (nil: remove)
	writing map[string][]byte // path -> content being written now
	busy    map[string]bool   // a goroutine is writing this path
}

var checkpoints = &checkpointWriter{pending: map[string][]byte{}, writing: map[string][]byte{}, busy: map[string]bool{}}

func (w *checkpointWriter) put(path string, b []byte, log *slog.Logger) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending[path] = b
	if w.busy[path] {
		return // the running writer picks the newest content up
	}
	w.busy[path] = true
	go w.drain(path, log)
}

// read returns a path's newest content: one still waiting to be written,
// else the file's.
func (w *checkpointWriter) read(path string) ([]byte, error) {
	w.mu.Lock()
	b, ok := w.pending[path]
	if !ok {
		b, ok = w.writing[path]
	}
	w.mu.Unlock()
	if ok {
		if b == nil {
			return nil, fs.ErrNotExist
		}
		return b, nil
	}
	return os.ReadFile(path)
}

func (w *checkpointWriter) drain(path string, log *slog.Logger) {
	for {
		w.mu.Lock()
		delete(w.writing, path)
		b, ok := w.pending[path]
		if !ok {
			delete(w.busy, path)
			w.mu.Unlock()
			return
		}
		delete(w.pending, path)
		w.writing[path] = b
		w.mu.Unlock()
		var err error
		if b == nil {
			err = os.Remove(path)
			if errors.Is(err, fs.ErrNotExist) {
				err = nil
			}
		} else {
			err = writeAtomic(path, b)
		}
		if err != nil {
			log.Warn("probe checkpoint", "path", path, "err", err)
		}
	}
}

// writeAtomic writes b to path through a temporary file in the same
// directory and a rename.
func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	return nil
}
