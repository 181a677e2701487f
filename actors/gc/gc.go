// Package gc is the container garbage collector ("gc" in the actor tree),
// as the upstream kubelet's container GC (pkg/kubelet/kuberuntime/
// kuberuntime_gc.go) with its default policy: every minute, and when the
// EvictionActor asks (ReclaimContainers), it removes the dead containers of
// a pod's container beyond the newest MaxPerPodContainer (never the newest
// one of a pod still known: it holds the container's last status), every
// dead container and not-ready sandbox of pods that are gone, older
// not-ready sandboxes of pods still known, and the log files of the
// containers it removes.
//
// A pod is gone when the NodeActor's latest PodsKnown does not name it and
// the collector had already seen it in the runtime before that PodsKnown
// arrived (a pod started since the NodeActor made its list is not gone).
// Until the first PodsKnown every pod counts as known. Pods and containers
// are told apart by the upstream kubelet's CRI labels
// (io.kubernetes.pod.uid, io.kubernetes.container.name), as the PLEG reads
// them; what carries no pod UID is never touched. Every runtime call runs
// off the mailbox.
package gc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// Lister lists the runtime's containers and sandboxes.
type Lister interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
}

// ContainerRemover removes a container; its status tells its log path and
// whether it must be stopped first (state unknown).
type ContainerRemover interface {
	ContainerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error)
	StopContainer(ctx context.Context, id string, timeout int64) error
	RemoveContainer(ctx context.Context, id string) error
}

// SandboxRemover stops and removes a sandbox.
type SandboxRemover interface {
	StopPodSandbox(ctx context.Context, id string) error
	RemovePodSandbox(ctx context.Context, id string) error
}

// Runtime is what the collector needs of the CRI runtime service.
type Runtime interface {
	Lister
	ContainerRemover
	SandboxRemover
}

// LogRemover removes a removed container's log file and its rotated files
// (the runtime does not: containerd leaves them).
type LogRemover interface {
	RemoveContainerLog(ctx context.Context, path string) error
}

// Policy is upstream's container GC policy.
type Policy struct {
	// MinAge: a container created less than this ago is never removed
	// (--minimum-container-ttl-duration, 0).
	MinAge time.Duration
	// MaxPerPodContainer: dead containers kept per (pod, container name)
	// (--maximum-dead-containers-per-container, 1); < 0: no limit. The
	// newest dead container of a pod still known is kept even at 0.
	MaxPerPodContainer int
	// MaxContainers: dead containers kept on the node
	// (--maximum-dead-containers, -1); < 0: no limit.
	MaxContainers int
}

// DefaultPolicy is upstream's default policy.
func DefaultPolicy() Policy {
	return Policy{MinAge: 0, MaxPerPodContainer: 1, MaxContainers: -1}
}

// Config tunes the collector. Zero values take the defaults.
type Config struct {
	// Policy; the zero Policy is DefaultPolicy.
	Policy Policy
	// Period of the collection (upstream ContainerGCPeriod, 1m).
	Period time.Duration
	// Timeout bounds each runtime call (2m, the runtime request timeout).
	Timeout time.Duration
	// PodLogsDir is the root of the pods' logs (/var/log/pods): a removed
	// container's log is removed only under it.
	PodLogsDir string
	// Logs removes the logs; nil: OSLogs.
	Logs LogRemover
}

func (c Config) withDefaults() Config {
	if c.Policy == (Policy{}) {
		c.Policy = DefaultPolicy()
	}
	if c.Policy.MinAge < 0 {
		c.Policy.MinAge = 0
	}
	if c.Period <= 0 {
		c.Period = time.Minute
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.PodLogsDir == "" {
		c.PodLogsDir = "/var/log/pods"
	}
	if c.Logs == nil {
		c.Logs = OSLogs{}
	}
	return c
}

// OSLogs removes log files from the host's filesystem: the file and its
// rotated files (the same name followed by a dot and a suffix, as the
// kubelet's log rotation names them).
type OSLogs struct{}

// RemoveContainerLog implements LogRemover.
func (OSLogs) RemoveContainerLog(_ context.Context, path string) error {
	var errs []error
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove container log %s: %w", path, err))
	}
	dir, base := filepath.Split(path)
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("read log directory %s: %w", dir, err))
	}
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), base+".") {
			p := filepath.Join(dir, e.Name())
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove rotated container log %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Actor is the container garbage collector.
type Actor struct {
	rt  Runtime
	clk clock.WithDelayedExecution
	cfg Config
	log *slog.Logger

	self     actorkit.Self
	timer    actorkit.Timer
	callsCtx context.Context
	cancel   context.CancelFunc

	known     map[types.UID]bool // the latest PodsKnown
	haveKnown bool
	sweeps    int               // PodsKnown received
	firstSeen map[types.UID]int // pods in the runtime: sweeps when first seen

	running bool
	again   bool         // a collection is asked for after the one running
	waiters []*actor.PID // ReclaimContainers answered by the next collection to start
	current []*actor.PID // those the running one answers
}

// New returns the collector's producer.
func New(rt Runtime, clk clock.WithDelayedExecution, cfg Config, log *slog.Logger) actor.Producer {
	if rt == nil || clk == nil {
		panic("gc: runtime and clock are required")
	}
	if log == nil {
		log = slog.Default()
	}
	cfg = cfg.withDefaults()
	return func() actor.Actor {
		return &Actor{rt: rt, clk: clk, cfg: cfg, log: log}
	}
}

// collected is a collection's result.
type collected struct {
	actorkit.Tag
	seen       []types.UID // pods in the runtime; nil when listing failed
	containers int
	sandboxes  int
	err        error
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.handleStarted(ctx)
	case *actor.Restarting:
		a.handleStop(ctx, "container garbage collector restarted")
	case *actor.Stopping:
		a.handleStop(ctx, "container garbage collector stopped")
	case *messages.PodsKnown:
		a.handlePodsKnown(m)
	case *messages.ReclaimContainers:
		a.handleReclaim(ctx, m)
	case *actorkit.Fired:
		a.handleFired(m)
	case *collected:
		a.handleCollected(ctx, m)
	}
}

func (a *Actor) handleStarted(ctx actor.Context) {
	a.self = actorkit.Start(ctx, a.clk)
	a.timer = actorkit.NewTimer("container-gc")
	a.firstSeen = map[types.UID]int{}
	a.callsCtx, a.cancel = context.WithCancel(context.Background())
	// A restart forgets the NodeActor's list: nothing is gone until the
	// next one. The first collection runs at once, as upstream's.
	a.known, a.haveKnown, a.sweeps = nil, false, 0
	a.collect()
}

func (a *Actor) handleStop(ctx actor.Context, why string) {
	if a.cancel != nil {
		a.cancel()
	}
	a.timer.Stop()
	for _, w := range append(a.current, a.waiters...) {
		ctx.Send(w, &messages.ContainersReclaimed{Err: why})
	}
	a.current, a.waiters = nil, nil
	a.self = actorkit.Self{}
}

func (a *Actor) handlePodsKnown(m *messages.PodsKnown) {
	a.known, a.haveKnown = m.UIDs, true
	a.sweeps++
}

func (a *Actor) handleReclaim(ctx actor.Context, m *messages.ReclaimContainers) {
	to := m.ReplyTo
	if to == nil {
		to = ctx.Sender()
	}
	if to != nil {
		a.waiters = append(a.waiters, to)
	}
	a.collect()
}

func (a *Actor) handleFired(m *actorkit.Fired) {
	if a.timer.Fired(a.self, m) {
		a.collect()
	}
}

// collect starts a collection now, or after the one running: a
// ReclaimContainers is answered by a collection that listed the runtime
// after it came.
func (a *Actor) collect() {
	if a.running {
		a.again = true
		return
	}
	if !a.self.Started() {
		return
	}
	a.running, a.again = true, false
	a.current, a.waiters = a.waiters, nil
	a.timer.Stop()
	gone := a.gone()
	rt, cfg, now, log := a.rt, a.cfg, a.clk.Now(), a.log
	actorkit.GoIn(a.self, a.callsCtx, 0, func(ctx context.Context) *collected {
		return run(ctx, rt, cfg, log, gone, now)
	})
}

// gone is the pods gone: not in the latest PodsKnown and seen in the
// runtime before it came.
func (a *Actor) gone() map[types.UID]bool {
	gone := map[types.UID]bool{}
	if !a.haveKnown {
		return gone
	}
	for uid, seen := range a.firstSeen {
		if !a.known[uid] && seen < a.sweeps {
			gone[uid] = true
		}
	}
	return gone
}

func (a *Actor) handleCollected(ctx actor.Context, m *collected) {
	if !a.self.Mine(m) || !a.running {
		return
	}
	a.running = false
	if m.seen != nil {
		seen := make(map[types.UID]int, len(m.seen))
		for _, uid := range m.seen {
			if s, ok := a.firstSeen[uid]; ok {
				seen[uid] = s
			} else {
				seen[uid] = a.sweeps
			}
		}
		a.firstSeen = seen
	}
	if m.containers > 0 || m.sandboxes > 0 {
		a.log.Info("containers garbage-collected", "containers", m.containers, "sandboxes", m.sandboxes)
	}
	if m.err != nil {
		a.log.Warn("container garbage collection", "err", m.err)
	}
	r := messages.ContainersReclaimed{Containers: m.containers, Sandboxes: m.sandboxes}
	if m.err != nil {
		r.Err = m.err.Error()
	}
	for _, w := range a.current {
		reply := r
		ctx.Send(w, &reply)
	}
	a.current = nil
	if a.again || len(a.waiters) > 0 {
		a.collect()
		return
	}
	a.timer.Arm(a.self, a.cfg.Period)
}

// ctrInfo is a dead container the collector may remove.
type ctrInfo struct {
	id        string
	sandboxID string
	uid       types.UID
	name      string
	attempt   uint32
	created   int64
}

// unit is the dead containers of one container of one pod.
type unit struct {
	uid  types.UID
	name string
}

// newestFirst orders by attempt, then creation, newest first.
func newestFirst(a, b ctrInfo) bool {
	if a.attempt != b.attempt {
		return a.attempt > b.attempt
	}
	if a.created != b.created {
		return a.created > b.created
	}
	return a.id > b.id
}

// planContainers is the dead containers to remove, as upstream's
// evictContainers: of pods gone, all; of pods known, those beyond the
// newest MaxPerPodContainer of each container (the newest always kept);
// then, beyond MaxContainers on the node, an equal share per container,
// then the oldest.
func planContainers(ctrs []*runtimeapi.Container, gone map[types.UID]bool, p Policy, now time.Time) []ctrInfo {
	units := map[unit][]ctrInfo{}
	newestGC := now.Add(-p.MinAge).UnixNano()
	for _, c := range ctrs {
		uid := podspec.PodUIDOf(c.GetLabels())
		if uid == "" || c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING || c.GetCreatedAt() > newestGC {
			continue
		}
		name := podspec.ContainerNameOf(c.GetLabels())
		if name == "" {
			name = c.GetMetadata().GetName()
		}
		ci := ctrInfo{id: c.GetId(), sandboxID: c.GetPodSandboxId(), uid: uid, name: name,
			attempt: c.GetMetadata().GetAttempt(), created: c.GetCreatedAt()}
		u := unit{uid: uid, name: name}
		units[u] = append(units[u], ci)
	}
	var remove []ctrInfo
	for u, cs := range units {
		sort.Slice(cs, func(i, j int) bool { return newestFirst(cs[i], cs[j]) })
		if gone[u.uid] {
			remove = append(remove, cs...)
			delete(units, u)
		}
	}
	// keepN removes all but the newest n of each unit (at least one).
	keepN := func(n int) {
		n = max(n, 1)
		for u, cs := range units {
			if len(cs) > n {
				remove = append(remove, cs[n:]...)
				units[u] = cs[:n]
			}
		}
	}
	if p.MaxPerPodContainer >= 0 {
		keepN(p.MaxPerPodContainer)
	}
	if p.MaxContainers >= 0 {
		total := 0
		for _, cs := range units {
			total += len(cs)
		}
		if total > p.MaxContainers && len(units) > 0 {
			keepN(p.MaxContainers / len(units))
			// Still too many: the oldest go, but never a unit's newest.
			var rest []ctrInfo
			total = 0
			for _, cs := range units {
				total += len(cs)
				rest = append(rest, cs[1:]...)
			}
			sort.Slice(rest, func(i, j int) bool {
				if rest[i].created != rest[j].created {
					return rest[i].created < rest[j].created
				}
				return rest[i].id < rest[j].id
			})
			for i := 0; i < len(rest) && total > p.MaxContainers; i++ {
				remove = append(remove, rest[i])
				total--
			}
		}
	}
	sort.Slice(remove, func(i, j int) bool { return newestFirst(remove[j], remove[i]) })
	return remove
}

// planSandboxes is the sandboxes to remove, as upstream's evictSandboxes:
// those not ready and without containers (left), of pods gone all of them,
// of pods known all but the newest.
func planSandboxes(sbs []*runtimeapi.PodSandbox, ctrs []*runtimeapi.Container, removed map[string]bool, gone map[types.UID]bool) []string {
	hasContainers := map[string]bool{}
	for _, c := range ctrs {
		if !removed[c.GetId()] {
			hasContainers[c.GetPodSandboxId()] = true
		}
	}
	byPod := map[types.UID][]*runtimeapi.PodSandbox{}
	for _, sb := range sbs {
		if uid := podspec.PodUIDOf(sb.GetLabels()); uid != "" {
			byPod[uid] = append(byPod[uid], sb)
		}
	}
	var remove []string
	for uid, list := range byPod {
		sort.Slice(list, func(i, j int) bool {
			a, b := list[i], list[j]
			if a.GetMetadata().GetAttempt() != b.GetMetadata().GetAttempt() {
				return a.GetMetadata().GetAttempt() > b.GetMetadata().GetAttempt()
			}
			if a.GetCreatedAt() != b.GetCreatedAt() {
				return a.GetCreatedAt() > b.GetCreatedAt()
			}
			return a.GetId() > b.GetId()
		})
		if !gone[uid] {
			list = list[1:] // the newest sandbox of a pod known stays
		}
		for _, sb := range list {
			if sb.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY && !hasContainers[sb.GetId()] {
				remove = append(remove, sb.GetId())
			}
		}
	}
	sort.Strings(remove)
	return remove
}

// run is one collection, off the mailbox.
func run(ctx context.Context, rt Runtime, cfg Config, log *slog.Logger, gone map[types.UID]bool, now time.Time) *collected {
	ctrs, err := call(ctx, cfg.Timeout, func(ctx context.Context) ([]*runtimeapi.Container, error) {
		return rt.ListContainers(ctx, nil)
	})
	if err != nil {
		return &collected{err: fmt.Errorf("list containers: %w", err)}
	}
	sbs, err := call(ctx, cfg.Timeout, func(ctx context.Context) ([]*runtimeapi.PodSandbox, error) {
		return rt.ListPodSandbox(ctx, nil)
	})
	if err != nil {
		return &collected{err: fmt.Errorf("list pod sandboxes: %w", err)}
	}
	res := &collected{seen: []types.UID{}}
	seen := map[types.UID]bool{}
	for _, c := range ctrs {
		seen[podspec.PodUIDOf(c.GetLabels())] = true
	}
	for _, sb := range sbs {
		seen[podspec.PodUIDOf(sb.GetLabels())] = true
	}
	delete(seen, "")
	for uid := range seen {
		res.seen = append(res.seen, uid)
	}

	var errs []error
	removed := map[string]bool{}
	for _, c := range planContainers(ctrs, gone, cfg.Policy, now) {
		isGone, byUs, err := removeContainer(ctx, rt, cfg, log, c.id)
		if err != nil {
			errs = append(errs, err)
		}
		if isGone {
			removed[c.id] = true
		}
		if byUs {
			res.containers++
		}
	}
	for _, id := range planSandboxes(sbs, ctrs, removed, gone) {
		if err := removeSandbox(ctx, rt, cfg, id); err != nil {
			errs = append(errs, err)
			continue
		}
		res.sandboxes++
	}
	res.err = errors.Join(errs...)
	return res
}

// removeContainer removes a dead container and its log: gone when the
// container no longer exists, byUs when this call removed it.
func removeContainer(ctx context.Context, rt Runtime, cfg Config, log *slog.Logger, id string) (gone, byUs bool, err error) {
	st, err := call(ctx, cfg.Timeout, func(ctx context.Context) (*runtimeapi.ContainerStatus, error) {
		return rt.ContainerStatus(ctx, id)
	})
	switch {
	case errdefs.IsNotFound(err):
		return true, false, nil
	case err != nil:
		return false, false, fmt.Errorf("container status %s: %w", id, err)
	}
	switch st.GetState() {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return false, false, nil // started since the listing: not dead
	case runtimeapi.ContainerState_CONTAINER_UNKNOWN:
		// It could be running: stop it first, as upstream.
		if err := ignoreNotFound(do(ctx, cfg.Timeout, func(ctx context.Context) error { return rt.StopContainer(ctx, id, 0) })); err != nil {
			return false, false, fmt.Errorf("stop container %s in unknown state: %w", id, err)
		}
	}
	if err := ignoreNotFound(do(ctx, cfg.Timeout, func(ctx context.Context) error { return rt.RemoveContainer(ctx, id) })); err != nil {
		return false, false, fmt.Errorf("remove container %s: %w", id, err)
	}
	path := st.GetLogPath()
	switch {
	case path == "":
	case !under(path, cfg.PodLogsDir):
		log.Warn("log of a removed container not under the pod logs directory: left in place",
			"container", id, "path", path, "podLogsDir", cfg.PodLogsDir)
	default:
		if err := do(ctx, cfg.Timeout, func(ctx context.Context) error { return cfg.Logs.RemoveContainerLog(ctx, path) }); err != nil {
			return true, true, fmt.Errorf("container %s: %w", id, err)
		}
	}
	return true, true, nil
}

// removeSandbox stops (network and all, in case it was not) and removes a
// sandbox.
func removeSandbox(ctx context.Context, rt Runtime, cfg Config, id string) error {
	if err := ignoreNotFound(do(ctx, cfg.Timeout, func(ctx context.Context) error { return rt.StopPodSandbox(ctx, id) })); err != nil {
		return fmt.Errorf("stop pod sandbox %s before removing it: %w", id, err)
	}
	if err := ignoreNotFound(do(ctx, cfg.Timeout, func(ctx context.Context) error { return rt.RemovePodSandbox(ctx, id) })); err != nil {
		return fmt.Errorf("remove pod sandbox %s: %w", id, err)
	}
	return nil
}

// under reports whether path is strictly inside dir, both absolute, after
// cleaning ("/var/log/pods/../x" is not).
func under(path, dir string) bool {
	if !filepath.IsAbs(path) || !filepath.IsAbs(dir) {
		return false
	}
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(path))
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func ignoreNotFound(err error) error {
	if errdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// call runs f with a context bounded by timeout.
func call[T any](parent context.Context, timeout time.Duration, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	return f(ctx)
}

func do(parent context.Context, timeout time.Duration, f func(context.Context) error) error {
	_, err := call(parent, timeout, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) })
	return err
}
