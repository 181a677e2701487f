package cgroup

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// Actor is the CgroupActor. Every Manager call runs off the mailbox
// (actorkit.Go), one at a time per pod (and one at a time for the QoS
// cgroups, and for the listing of the tree), in the order asked: a removal
// of an orphan decided before a pod asks for its cgroup runs before the
// pod's create, never after it.
//
// Its state is rebuilt at each start: the pod cgroups from the Manager
// (Children of kubepods and the QoS cgroups), the pods from what they ask
// and from the NodeActor's housekeeping (SweepPodCgroups).
type Actor struct {
	cfg  *Config
	log  *slog.Logger
	self actorkit.Self

	// pods are the pod cgroups known: found in the tree, or asked for by
	// their pod (pod set).
	pods map[types.UID]*podCgroup
	// active are the pods the burstable QoS shares are summed from: the
	// last housekeeping's, with the pods asked for since and less the
	// pods removed since.
	active map[types.UID]*v1.Pod
	// qosShares is the burstable cpu.shares last written (0: none yet).
	qosShares uint64
	// nodeOK: the node's cgroups were written by this incarnation.
	nodeOK bool
	// sweeps counts the SweepPodCgroups taken: a pod asked for after the
	// node's look is no orphan of it.
	sweeps uint64

	queues map[string][]work
	timer  actorkit.Timer
}

// podCgroup is one pod's cgroup.
type podCgroup struct {
	name podspec.CgroupName
	pod  *v1.Pod // nil: found in the tree, its pod not asked for yet
	// askedAt is sweeps when its pod last asked.
	askedAt uint64
	// logged: a failure of this pod's cgroup was logged (once per pod).
	logged bool
}

// work is one Manager job, run off the mailbox; the function it returns
// runs on the mailbox with its result (nil: nothing to do).
type work func() func(*Actor)

// Messages the actor sends itself.
type (
	workDone struct {
		actorkit.Tag
		key    string
		finish func(*Actor)
	}
	listed struct {
		actorkit.Tag
		found map[types.UID]podspec.CgroupName
		err   error
		// sweep: remove what no pod in keep owns (the sweeps-th).
		sweep bool
		seq   uint64
		keep  map[types.UID]bool
	}
)

// New returns the CgroupActor's producer; it panics on a Config without a
// Manager (a wiring error).
func New(cfg Config) actor.Producer {
	if cfg.Manager == nil {
		panic("cgroup.New: Manager is required")
	}
	if cfg.Period <= 0 {
		cfg.Period = defaultPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return func() actor.Actor { return &Actor{cfg: &cfg, log: cfg.Log.With("actor", "cgroups")} }
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.started(ctx)
	case *actor.Restarting, *actor.Stopping:
		a.timer.Stop()
	case *messages.EnsurePodCgroup:
		a.ensure(replyTo(ctx, m.ReplyTo), m)
	case *messages.ResizePodCgroup:
		a.resize(replyTo(ctx, m.ReplyTo), m)
	case *messages.GetPodCgroup:
		a.get(replyTo(ctx, m.ReplyTo), m.UID)
	case *messages.RemovePodCgroup:
		a.remove(replyTo(ctx, m.ReplyTo), m.UID)
	case *messages.SweepPodCgroups:
		a.sweep(m)
	case *workDone:
		switch {
		case a.self.Mine(m):
			a.done(m)
		case m.finish != nil:
			// A job of the incarnation before a restart: what it did is
			// true still, and its asker still waits for the answer.
			m.finish(a)
		}
	case *listed:
		if a.self.Mine(m) {
			a.handleListed(m)
		}
	case *actorkit.Fired:
		if a.timer.Fired(a.self, m) {
			a.periodic()
		}
	}
}

func replyTo(ctx actor.Context, to *actor.PID) *actor.PID {
	if to != nil {
		return to
	}
	return ctx.Sender()
}

func (a *Actor) started(ctx actor.Context) {
	a.self = actorkit.Start(ctx, a.cfg.Clock)
	a.timer = actorkit.NewTimer("cgroups")
	a.pods = map[types.UID]*podCgroup{}
	a.active = map[types.UID]*v1.Pod{}
	a.queues = map[string][]work{}
	a.nodeOK, a.qosShares = false, 0
	if !a.cfg.CgroupsPerQOS {
		a.log.Info("cgroupsPerQOS is off: no kubepods, QoS or pod cgroups; pods run under the cgroup root",
			"cgroupRoot", a.cfg.Root.Path(a.cfg.Manager.Driver()))
	}
	a.writeNode()
	a.list(false, nil)
	a.timer.Arm(a.self, a.cfg.Period)
}

// periodic writes the node's cgroups again if they failed, and the QoS
// shares (upstream's periodic QoS update).
func (a *Actor) periodic() {
	a.timer.Arm(a.self, a.cfg.Period)
	if !a.nodeOK {
		a.writeNode()
	}
	a.writeQOS(true)
}

// writeNode writes kubepods, the QoS and the reserved cgroups (Setup).
func (a *Actor) writeNode() {
	cfg := a.cfg
	a.enqueue(opNode, func() func(*Actor) {
		err := cfg.Setup()
		return func(a *Actor) {
			if err != nil {
				a.failed(opNode, "", "write the node's cgroups (retried every period)", err)
				return
			}
			a.nodeOK = true
		}
	})
}

// enqueue runs w after the jobs of key before it.
func (a *Actor) enqueue(key string, w work) {
	a.queues[key] = append(a.queues[key], w)
	if len(a.queues[key]) == 1 {
		a.run(key, w)
	}
}

func (a *Actor) run(key string, w work) {
	actorkit.Go(a.self, 0, func(context.Context) *workDone {
		return &workDone{key: key, finish: w()}
	})
}

func (a *Actor) done(m *workDone) {
	q := a.queues[m.key]
	if len(q) > 0 {
		q = q[1:]
	}
	if len(q) == 0 {
		delete(a.queues, m.key)
	} else {
		a.queues[m.key] = q
		a.run(m.key, q[0])
	}
	if m.finish != nil {
		m.finish(a)
	}
}

// failed is a refused cgroup operation: logged (once per pod and
// operation kind while it keeps failing) and counted.
func (a *Actor) failed(op string, uid types.UID, what string, err error) {
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.IncCgroupError(op)
	}
	if uid != "" {
		if p := a.pods[uid]; p != nil {
			if p.logged {
				return
			}
			p.logged = true
		}
		a.log.Warn("pod cgroup: "+what, "op", op, "pod_uid", string(uid), "err", err)
		return
	}
	a.log.Warn("cgroups: "+what, "op", op, "err", err)
}

// track records a pod that asked for its cgroup (active, its cgroup
// known) and returns the cgroup's name.
func (a *Actor) track(pod *v1.Pod) podspec.CgroupName {
	name := a.cfg.podName(pod)
	p := a.pods[pod.UID]
	if p == nil {
		p = &podCgroup{}
		a.pods[pod.UID] = p
	}
	p.name, p.pod, p.askedAt = name, pod, a.sweeps
	a.active[pod.UID] = pod
	return name
}

func (a *Actor) ensure(to *actor.PID, m *messages.EnsurePodCgroup) {
	pod := m.Pod
	if pod == nil {
		return
	}
	parent := a.cfg.Parent(pod)
	if !a.cfg.CgroupsPerQOS {
		a.reply(to, &messages.PodCgroup{UID: pod.UID, Parent: parent})
		return
	}
	name := a.track(pod)
	// The QoS shares first (upstream updates them before it makes a pod
	// cgroup), then the pod's own.
	a.writeQOS(false)
	mgr, values, uid := a.cfg.Manager, podspec.PodCgroupValues(pod, a.cfg.Pod), pod.UID
	a.enqueue(string(uid), func() func(*Actor) {
		err := mgr.Create(name, values)
		return func(a *Actor) {
			out := &messages.PodCgroup{UID: uid, Parent: parent}
			if err != nil {
				out.Err = fmt.Errorf("failed to ensure that the pod: %s cgroups exist and are correctly applied: %w", uid, err)
				a.failed(opEnsure, uid, "create", err)
			} else if p := a.pods[uid]; p != nil {
				p.logged = false
			}
			a.reply(to, out)
		}
	})
}

func (a *Actor) resize(to *actor.PID, m *messages.ResizePodCgroup) {
	pod := m.Pod
	if pod == nil {
		return
	}
	parent := a.cfg.Parent(pod)
	if !a.cfg.CgroupsPerQOS {
		a.reply(to, &messages.PodCgroup{UID: pod.UID, Parent: parent})
		return
	}
	name := a.track(pod)
	all := podspec.PodCgroupValues(pod, a.cfg.Pod)
	values := &podspec.CgroupResources{}
	for _, r := range m.Resources {
		switch r {
		case v1.ResourceCPU:
			values.CPUShares, values.CPUQuota, values.CPUPeriod = all.CPUShares, all.CPUQuota, all.CPUPeriod
			if values.CPUQuota == nil {
				noQuota := int64(-1) // a CPU limit removed: no quota
				values.CPUQuota = &noQuota
			}
		case v1.ResourceMemory:
			values.Memory = all.Memory
			if values.Memory == nil {
				unlimited := int64(-1) // a limit removed: none
				values.Memory = &unlimited
			}
		}
	}
	if slices.Contains(m.Resources, v1.ResourceCPU) {
		a.writeQOS(false)
	}
	mgr, uid := a.cfg.Manager, pod.UID
	a.enqueue(string(uid), func() func(*Actor) {
		err := mgr.Update(name, values)
		return func(a *Actor) {
			out := &messages.PodCgroup{UID: uid, Parent: parent}
			if err != nil {
				out.Err = fmt.Errorf("resize pod %s cgroup %s: %w", uid, name.Path(mgr.Driver()), err)
				a.failed(opResize, uid, "resize", err)
			}
			a.reply(to, out)
		}
	})
}

func (a *Actor) get(to *actor.PID, uid types.UID) {
	p := a.pods[uid]
	if p == nil || !a.cfg.CgroupsPerQOS {
		a.reply(to, &messages.PodCgroupValues{UID: uid, Err: errdefs.Wrap(errdefs.ErrNotFound, fmt.Errorf("no cgroup of pod %s", uid))})
		return
	}
	mgr, name := a.cfg.Manager, p.name
	a.enqueue(string(uid), func() func(*Actor) {
		r, err := mgr.Read(name)
		return func(a *Actor) {
			out := &messages.PodCgroupValues{UID: uid, Err: err}
			if err == nil && r != nil {
				out.CPUShares, out.CPUQuota, out.CPUPeriod, out.Memory, out.PidsLimit = r.CPUShares, r.CPUQuota, r.CPUPeriod, r.Memory, r.PidsLimit
			}
			if err != nil && !errdefs.IsNotFound(err) {
				a.failed(opRead, uid, "read", err)
			}
			a.reply(to, out)
		}
	})
}

func (a *Actor) remove(to *actor.PID, uid types.UID) {
	if !a.cfg.CgroupsPerQOS {
		a.reply(to, &messages.PodCgroupRemoved{UID: uid})
		return
	}
	var names []podspec.CgroupName
	if p := a.pods[uid]; p != nil {
		names = append(names, p.name)
	}
	for _, parent := range a.cfg.podParents() {
		n := parent.Child(podPrefix + string(uid))
		if !slices.ContainsFunc(names, func(o podspec.CgroupName) bool { return slices.Equal(o, n) }) {
			names = append(names, n)
		}
	}
	if _, ok := a.active[uid]; ok {
		delete(a.active, uid)
		a.writeQOS(false)
	}
	mgr := a.cfg.Manager
	a.enqueue(string(uid), func() func(*Actor) {
		err := destroyAll(mgr, names)
		return func(a *Actor) {
			if err != nil {
				a.failed(opRemove, uid, "remove (the garbage collector tries again)", err)
			} else {
				delete(a.pods, uid)
			}
			a.reply(to, &messages.PodCgroupRemoved{UID: uid, Err: err})
		}
	})
}

// destroyAll removes those of names that exist.
func destroyAll(mgr Manager, names []podspec.CgroupName) error {
	for _, n := range names {
		if !mgr.Exists(n) {
			continue
		}
		if err := mgr.Destroy(n); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("remove %s: %w", n.Path(mgr.Driver()), err)
		}
	}
	return nil
}

func (a *Actor) reply(to *actor.PID, msg any) {
	if to != nil {
		a.self.SendTo(to, msg)
	}
}

// writeQOS writes the burstable QoS cgroup's shares from the active pods
// when they changed (force: even if not, the periodic refresh), and
// besteffort's MinShares with the first write.
func (a *Actor) writeQOS(force bool) {
	if !a.cfg.CgroupsPerQOS {
		return
	}
	burstable, besteffort := podspec.QOSCgroupValues(slices.Collect(maps.Values(a.active)))
	if !force && *burstable.CPUShares == a.qosShares {
		return
	}
	shares := *burstable.CPUShares
	a.qosShares = shares
	mgr := a.cfg.Manager
	bn, ben := a.cfg.qos(v1.PodQOSBurstable), a.cfg.qos(v1.PodQOSBestEffort)
	a.enqueue(opQOS, func() func(*Actor) {
		err := mgr.Update(bn, burstable)
		if err == nil {
			err = mgr.Update(ben, besteffort)
		}
		return func(a *Actor) {
			if err != nil {
				a.qosShares = 0 // written again next time
				a.failed(opQOS, "", "update the QoS cgroups' CPU shares", err)
			}
		}
	})
}

// sweep takes the NodeActor's housekeeping: the active pods (QoS shares),
// then the pod cgroups of pods not kept are removed.
func (a *Actor) sweep(m *messages.SweepPodCgroups) {
	if !a.cfg.CgroupsPerQOS {
		return
	}
	a.active = make(map[types.UID]*v1.Pod, len(m.Active))
	for _, p := range m.Active {
		a.active[p.UID] = p
	}
	for uid, p := range a.pods {
		if p.pod != nil && p.askedAt == a.sweeps && m.Keep[uid] {
			a.active[uid] = p.pod // asked for since the node looked
		}
	}
	a.sweeps++
	a.writeQOS(false)
	a.list(true, m.Keep)
}

// list reads the pod cgroups in the tree (off the mailbox, after the
// jobs listing before it); sweep: then removes those of pods not in keep.
func (a *Actor) list(sweep bool, keep map[types.UID]bool) {
	if !a.cfg.CgroupsPerQOS {
		return
	}
	mgr, parents, seq := a.cfg.Manager, a.cfg.podParents(), a.sweeps
	actorkit.Go(a.self, 0, func(context.Context) *listed {
		found := map[types.UID]podspec.CgroupName{}
		var firstErr error
		for _, parent := range parents {
			children, err := mgr.Children(parent)
			if err != nil {
				if !errdefs.IsNotFound(err) && firstErr == nil {
					firstErr = err
				}
				continue
			}
			for _, c := range children {
				if uid, ok := podUID(c); ok {
					found[uid] = c
				}
			}
		}
		return &listed{found: found, err: firstErr, sweep: sweep, seq: seq, keep: keep}
	})
}

func (a *Actor) handleListed(m *listed) {
	if m.err != nil {
		a.failed(opSweep, "", "list the pod cgroups", m.err)
	}
	for uid, name := range m.found {
		if a.pods[uid] == nil {
			a.pods[uid] = &podCgroup{name: name}
		}
	}
	if !m.sweep {
		return
	}
	mgr := a.cfg.Manager
	for _, uid := range slices.Sorted(maps.Keys(m.found)) {
		if m.keep[uid] {
			continue
		}
		if p := a.pods[uid]; p != nil && p.pod != nil && p.askedAt >= m.seq {
			// Asked for since the node looked (a pod admitted meanwhile):
			// not an orphan.
			continue
		}
		name := m.found[uid]
		a.enqueue(string(uid), func() func(*Actor) {
			pids, err := mgr.Pids(name)
			if err == nil && len(pids) > 0 {
				return func(a *Actor) {
					a.log.Info("pod cgroup of a pod gone still holds processes: left", "pod_uid", string(uid), "cgroup", name.Path(mgr.Driver()), "pids", len(pids))
				}
			}
			if err == nil {
				err = mgr.Destroy(name)
			}
			return func(a *Actor) {
				switch {
				case err == nil || errdefs.IsNotFound(err):
					a.log.Info("removed orphaned pod cgroup", "pod_uid", string(uid), "cgroup", name.Path(mgr.Driver()))
					if p := a.pods[uid]; p != nil && p.pod == nil {
						delete(a.pods, uid)
					}
				default:
					a.failed(opSweep, uid, "remove orphaned pod cgroup", err)
				}
			}
		})
	}
}
