// Package nodestatus is the NodeStatusActor of cluster mode: it registers the
// Node, reports its status (capacity, allocatable, conditions, addresses,
// node info) and renews its Lease. It is a sibling of the NodeActor, not part
// of it, so that a crash of the pod router never stops the heartbeat and a
// slow API server never delays a pod.
package nodestatus

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// API is what the actor needs from the API server.
type API interface {
	GetNode(ctx context.Context, name string) (*v1.Node, error)
	CreateNode(ctx context.Context, node *v1.Node) (*v1.Node, error)
	PatchNodeStatus(ctx context.Context, name string, oldStatus, newStatus *v1.NodeStatus) (*v1.Node, error)
	// PatchNodeMeta merges labels and annotations into the Node.
	PatchNodeMeta(ctx context.Context, name string, labels, annotations map[string]string) (*v1.Node, error)
}

// Leaser renews the node's Lease.
type Leaser interface {
	RenewLease(ctx context.Context, node *v1.Node, durationSeconds int32, now time.Time) error
}

// Recorder records events (client-go's record.EventRecorder satisfies it).
type Recorder interface {
	Eventf(object kruntime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Machine gives the system info and the capacity (cpu, memory, storage).
type Machine interface {
	Info(ctx context.Context) (v1.NodeSystemInfo, v1.ResourceList, error)
}

// Config of the actor; defaults are upstream's.
type Config struct {
	NodeName       string
	NodeIP         string
	Hostname       string
	Labels         map[string]string // --node-labels, on top of the well-known ones
	MaxPods        int
	KubeReserved   v1.ResourceList
	SystemReserved v1.ResourceList
	// EvictionHard, when set, gives what the hard eviction thresholds keep
	// out of the given capacity; it is subtracted from the allocatable too,
	// as upstream (and as the NodeActor admits pods).
	EvictionHard    func(capacity v1.ResourceList) v1.ResourceList
	UpdateFrequency time.Duration // --node-status-update-frequency, 10 s
	ReportFrequency time.Duration // node-status-report-frequency, 5 m
	LeaseDuration   time.Duration // node-lease-duration-seconds, 40 s (renewed every quarter)
	KubeletVersion  string
	RuntimeVersion  string // "containerd://1.6.20"
	Port            int32
	Timeout         time.Duration
	// Status, when set, is told the Node's UID (mirror pods are owned by it).
	Status *actor.PID
	// Events, when set, records the Node's events (NodeReady, NodeNotReady).
	Events Recorder
	// Devices, when set, is the DevicesActor: its extended resources
	// (nvidia.com/gpu, device plugins') join the capacity (all devices) and
	// the allocatable (healthy ones), and its labels and annotations (GPU
	// feature discovery's) the Node's.
	Devices *actor.PID
	// Eviction, when set, is the EvictionActor: the MemoryPressure,
	// DiskPressure and PIDPressure conditions follow its NodePressure
	// (pressure.go); it is asked at start.
	Eviction *actor.PID
	// RegisterWithTaints are the Node's taints when it registers
	// (--register-with-taints); a Node that exists keeps its own, as
	// upstream.
	RegisterWithTaints []v1.Taint
	// Images, when set, lists the runtime's images for status.images
	// (images.go), read with the machine's facts, off the mailbox.
	Images ImageLister
	// MaxImages caps status.images (--node-status-max-images: 50
	// upstream; -1: no cap; 0: none).
	MaxImages int32
	// RetryBase is the first retry after a failed status patch or lease
	// renewal, doubling up to the update period (status) or a quarter of the
	// lease (lease); upstream's lease controller starts at 200 ms.
	RetryBase time.Duration
}

// New returns the producer. pleg answers GetHealth.
func New(cfg Config, api API, leaser Leaser, machine Machine, pleg *actor.PID, clk clock.WithDelayedExecution, log *slog.Logger) actor.Producer {
	if api == nil || leaser == nil || machine == nil || pleg == nil || clk == nil {
		panic("nodestatus.New: api, leaser, machine, pleg and clock are required")
	}
	if cfg.UpdateFrequency <= 0 {
		cfg.UpdateFrequency = 10 * time.Second
	}
	if cfg.ReportFrequency <= 0 {
		cfg.ReportFrequency = 5 * time.Minute
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = 40 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 200 * time.Millisecond
	}
	if log == nil {
		log = slog.Default()
	}
	return func() actor.Actor {
		return &Actor{cfg: cfg, api: api, leaser: leaser, machine: machine, pleg: pleg, clk: clk, log: log.With("actor", "nodestatus")}
	}
}

// Actor is the NodeStatusActor.
type Actor struct {
	cfg     Config
	api     API
	leaser  Leaser
	machine Machine
	pleg    *actor.PID
	clk     clock.WithDelayedExecution
	log     *slog.Logger

	self actorkit.Self

	node         *v1.Node // as the API server last returned it; nil until registered
	registering  bool
	patching     bool
	renewing     bool
	lastReport   time.Time
	health       *messages.Health
	info         v1.NodeSystemInfo // the machine, as last read (off the mailbox)
	capacity     v1.ResourceList
	infoErr      error
	machineKnown bool
	again        bool           // a report was asked while a call was in flight
	patchFails   int            // status patches failed in a row (the API server is unreachable)
	leaseFails   int            // lease renewals failed in a row
	statusTimer  actorkit.Timer // every UpdateFrequency: read the machine, ask PLEG's health
	leaseTimer   actorkit.Timer // every LeaseDuration/4: renew the Lease
	retryTimer   actorkit.Timer // after a failed registration
	devices      *messages.DeviceCapacity
	pressure     *messages.NodePressure // the EvictionActor's; nil: none known
	images       []v1.ContainerImage    // status.images, as last read (images.go)
	// metaStale: the devices' labels came while the Node was being
	// registered without them; registering again merges them.
	metaStale bool
}

type (
	registered struct {
		actorkit.Tag
		node *v1.Node
		err  error
	}
	patched struct {
		actorkit.Tag
		node *v1.Node
		err  error
		read bool // a GET, not a patch
	}
	renewed struct {
		actorkit.Tag
		err error
	}
	machineRead struct {
		actorkit.Tag
		info     v1.NodeSystemInfo
		capacity v1.ResourceList
		err      error
	}
)

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.handleStarted(ctx)
	case *actor.Restarting, *actor.Stopping:
		for _, t := range []*actorkit.Timer{&a.statusTimer, &a.leaseTimer, &a.retryTimer} {
			t.Stop()
		}
	case *registered:
		a.handleRegistered(ctx, m)
	case *actorkit.Fired:
		a.handleFired(ctx, m)
	case *machineRead:
		if a.self.Mine(m) {
			a.info, a.capacity, a.infoErr, a.machineKnown = m.info, m.capacity, m.err, true
			if a.health != nil {
				a.report(false)
			}
		}
	case *imagesRead:
		a.handleImagesRead(m)
	case *messages.Health:
		a.health = m
		a.report(false)
	case *messages.DeviceCapacity:
		a.handleDeviceCapacity(m)
	case *messages.NodePressure:
		a.handleNodePressure(m)
	case *patched:
		a.handlePatched(m)
	case *renewed:
		if a.self.Mine(m) {
			a.handleRenewed(m)
		}
	}
}

func (a *Actor) handleStarted(ctx actor.Context) {
	a.self = actorkit.Start(ctx, a.clk)
	a.statusTimer = actorkit.NewTimer("status")
	a.leaseTimer = actorkit.NewTimer("lease")
	a.retryTimer = actorkit.NewTimer("register")
	a.register()
	a.readMachine()
	if a.cfg.Devices != nil {
		ctx.Send(a.cfg.Devices, &messages.GetDeviceCapacity{ReplyTo: ctx.Self()})
	}
	a.askPressure(ctx)
	a.statusTimer.Arm(a.self, a.cfg.UpdateFrequency)
	a.leaseTimer.Arm(a.self, a.cfg.LeaseDuration/4)
}

// handleFired takes the actor's timers: the status period, the lease period
// and the registration retry.
func (a *Actor) handleFired(ctx actor.Context, m *actorkit.Fired) {
	switch {
	case a.statusTimer.Fired(a.self, m):
		a.statusTimer.Arm(a.self, a.cfg.UpdateFrequency)
		a.readMachine()
		ctx.Request(a.pleg, &messages.GetHealth{})
	case a.leaseTimer.Fired(a.self, m):
		a.leaseTimer.Arm(a.self, a.cfg.LeaseDuration/4)
		a.renew()
	case a.retryTimer.Fired(a.self, m):
		a.register()
	}
}

// register creates the Node, or adopts an existing one and merges labels.
func (a *Actor) register() {
	if a.registering {
		return
	}
	a.registering = true
	node, api := a.initialNode(), a.api
	actorkit.Go(a.self, a.cfg.Timeout, func(ctx context.Context) *registered {
		existing, err := api.GetNode(ctx, node.Name)
		if errdefs.IsNotFound(err) {
			created, err := api.CreateNode(ctx, node)
			if errdefs.IsAlreadyExists(err) {
				created, err = api.GetNode(ctx, node.Name)
			}
			return &registered{node: created, err: err}
		}
		if err != nil {
			return &registered{err: err}
		}
		if !hasLabels(existing.Labels, node.Labels) || !hasLabels(existing.Annotations, node.Annotations) {
			existing, err = api.PatchNodeMeta(ctx, node.Name, node.Labels, node.Annotations)
		}
		return &registered{node: existing, err: err}
	})
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func (a *Actor) handleRegistered(ctx actor.Context, m *registered) {
	if !a.self.Mine(m) {
		return
	}
	a.registering = false
	if m.err != nil {
		a.log.Error("node registration failed, retrying", "node", a.cfg.NodeName, "err", m.err)
		a.retryTimer.Arm(a.self, a.cfg.UpdateFrequency)
		return
	}
	a.log.Info("node registered", "node", m.node.Name, "uid", m.node.UID)
	a.node = m.node
	if a.metaStale {
		a.metaStale = false
		if want := a.initialNode(); !hasLabels(a.node.Labels, want.Labels) || !hasLabels(a.node.Annotations, want.Annotations) {
			a.register()
		}
	}
	if a.cfg.Status != nil {
		ctx.Send(a.cfg.Status, &messages.NodeRegistered{Name: m.node.Name, UID: m.node.UID})
	}
	a.lastReport = time.Time{}
	ctx.Request(a.pleg, &messages.GetHealth{})
	a.renew()
}

func (a *Actor) initialNode() *v1.Node {
	labels := Labels(a.cfg.Hostname, a.cfg.Labels)
	var annotations map[string]string
	if d := a.devices; d != nil {
		for k, v := range d.Labels {
			if _, set := a.cfg.Labels[k]; !set { // --node-labels win
				labels[k] = v
			}
		}
		if len(d.Annotations) > 0 {
			annotations = maps.Clone(d.Annotations)
		}
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.NodeName, Labels: labels, Annotations: annotations}}
	if len(a.cfg.RegisterWithTaints) > 0 {
		node.Spec.Taints = slices.Clone(a.cfg.RegisterWithTaints)
	}
	return node
}

// handleDeviceCapacity takes the DevicesActor's extended resources into
// the next report, and its labels and annotations into the Node's
// metadata (registering again merges them).
func (a *Actor) handleDeviceCapacity(m *messages.DeviceCapacity) {
	a.devices = m
	if a.node == nil {
		a.metaStale = true // the registration in flight has not got them
	} else {
		want := a.initialNode()
		if !hasLabels(a.node.Labels, want.Labels) || !hasLabels(a.node.Annotations, want.Annotations) {
			a.register()
			return // registered reports
		}
	}
	a.report(false)
}

// Labels are the labels a node registers with, as upstream: hostname, os
// and arch (also the beta keys), then extra (--node-labels) on top.
func Labels(hostname string, extra map[string]string) map[string]string {
	labels := map[string]string{
		"kubernetes.io/hostname":  hostname,
		"kubernetes.io/os":        runtime.GOOS,
		"kubernetes.io/arch":      runtime.GOARCH,
		"beta.kubernetes.io/arch": runtime.GOARCH,
		"beta.kubernetes.io/os":   runtime.GOOS,
	}
	for k, v := range extra {
		labels[k] = v
	}
	return labels
}

// report computes the status and patches it when it changed, or when the
// last report is older than the report frequency.
func (a *Actor) report(force bool) {
	if a.patching {
		a.again = true // reported when the call in flight returns
		return
	}
	if a.node == nil || !a.machineKnown {
		return // registration, or the machine's first read, reports when done
	}
	now := a.clk.Now()
	next, err := a.status(now)
	if err != nil {
		a.log.Warn("node status", "err", err)
	}
	changed := !apiequality.Semantic.DeepEqual(withoutHeartbeats(a.node.Status), withoutHeartbeats(*next))
	if !force && !changed && now.Sub(a.lastReport) < a.cfg.ReportFrequency {
		a.checkExists()
		return
	}
	a.patching = true
	old := a.node.Status.DeepCopy()
	api, name := a.api, a.node.Name
	actorkit.Go(a.self, a.cfg.Timeout, func(ctx context.Context) *patched {
		n, err := api.PatchNodeStatus(ctx, name, old, next)
		return &patched{node: n, err: err}
	})
}

// checkExists reads the Node when there is nothing to patch, so a deleted
// Node object is noticed (and registered again) within one update period.
func (a *Actor) checkExists() {
	api, name := a.api, a.node.Name
	a.patching = true
	actorkit.Go(a.self, a.cfg.Timeout, func(ctx context.Context) *patched {
		n, err := api.GetNode(ctx, name)
		return &patched{node: n, err: err, read: true}
	})
}

func (a *Actor) handlePatched(m *patched) {
	if !a.self.Mine(m) {
		return
	}
	a.patching = false
	defer func() {
		if a.again && a.node != nil {
			a.again = false
			a.report(false)
		}
	}()
	switch {
	case errdefs.IsNotFound(m.err):
		a.log.Warn("node object gone, registering again", "node", a.cfg.NodeName)
		a.health = nil
		a.node = nil
		a.register()
	case m.err != nil:
		// Kept, and tried again sooner than the next period: the status
		// and its conditions reach the API server as soon as it answers.
		a.patchFails++
		d := min(actorkit.Backoff{Base: a.cfg.RetryBase, Cap: a.cfg.UpdateFrequency}.Delay(a.patchFails), a.cfg.UpdateFrequency)
		if a.patchFails == 1 {
			a.log.Warn("node status update failed, retrying", "retry_in", d, "err", m.err)
		} else {
			a.log.Debug("node status update failed, retrying", "failures", a.patchFails, "retry_in", d, "err", m.err)
		}
		a.statusTimer.Arm(a.self, d)
	default:
		if a.patchFails > 0 {
			a.log.Info("node status updated again", "after_failures", a.patchFails)
			a.patchFails = 0
		}
		if !m.read {
			a.lastReport = a.clk.Now()
			a.readyEvent(a.node, m.node)
		}
		a.node = m.node
	}
}

// readyEvent records NodeReady or NodeNotReady when a patch changed the
// Ready condition's status in the API server, as upstream.
func (a *Actor) readyEvent(before, after *v1.Node) {
	if a.cfg.Events == nil || after == nil {
		return
	}
	was, now := readyStatus(before), readyStatus(after)
	if was == now || now == "" {
		return
	}
	reason := "NodeNotReady"
	if now == v1.ConditionTrue {
		reason = "NodeReady"
	}
	ref := &v1.ObjectReference{Kind: "Node", Name: after.Name, UID: types.UID(after.Name)}
	a.cfg.Events.Eventf(ref, v1.EventTypeNormal, reason, "Node %s status is now: %s", after.Name, reason)
}

func readyStatus(n *v1.Node) v1.ConditionStatus {
	if n == nil {
		return ""
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// handleRenewed takes a lease renewal's result: a failure is tried again
// with a back-off (200 ms doubling, at most the renewal period), so the
// Lease is renewed soon after the API server is back.
func (a *Actor) handleRenewed(m *renewed) {
	a.renewing = false
	if m.err == nil {
		if a.leaseFails > 0 {
			a.log.Info("lease renewed again", "after_failures", a.leaseFails)
			a.leaseFails = 0
		}
		return
	}
	a.leaseFails++
	period := a.cfg.LeaseDuration / 4
	d := min(actorkit.Backoff{Base: a.cfg.RetryBase, Cap: period}.Delay(a.leaseFails), period)
	if a.leaseFails == 1 {
		a.log.Warn("lease renewal failed, retrying", "retry_in", d, "err", m.err)
	} else {
		a.log.Debug("lease renewal failed, retrying", "failures", a.leaseFails, "retry_in", d, "err", m.err)
	}
	a.leaseTimer.Arm(a.self, d)
}

func (a *Actor) renew() {
	if a.node == nil || a.renewing {
		return
	}
	a.renewing = true
	node, leaser, now := a.node.DeepCopy(), a.leaser, a.clk.Now()
	secs := int32(a.cfg.LeaseDuration / time.Second)
	actorkit.Go(a.self, a.cfg.Timeout, func(ctx context.Context) *renewed {
		return &renewed{err: leaser.RenewLease(ctx, node, secs, now)}
	})
}

func withoutHeartbeats(s v1.NodeStatus) v1.NodeStatus {
	out := *s.DeepCopy()
	for i := range out.Conditions {
		out.Conditions[i].LastHeartbeatTime = metav1.Time{}
	}
	return out
}

// status builds the Node status: capacity from the machine, allocatable
// minus the reservations, conditions from the runtime and PLEG health.
// readMachine reads the machine's facts off the mailbox (proc files and a
// statfs of the root dir); the next report uses them.
func (a *Actor) readMachine() {
	a.readImages()
	m := a.machine
	actorkit.Go(a.self, a.cfg.Timeout, func(ctx context.Context) *machineRead {
		info, capacity, err := m.Info(ctx)
		return &machineRead{info: info, capacity: capacity, err: err}
	})
}

func (a *Actor) status(now time.Time) (*v1.NodeStatus, error) {
	info, err := a.info, a.infoErr
	capacity := v1.ResourceList{}
	for k, v := range a.capacity {
		capacity[k] = v.DeepCopy()
	}
	capacity[v1.ResourcePods] = *resource.NewQuantity(int64(a.cfg.MaxPods), resource.DecimalSI)
	var devAllocatable map[v1.ResourceName]int64
	if d := a.devices; d != nil {
		for name, n := range d.Capacity {
			capacity[name] = *resource.NewQuantity(n, resource.DecimalSI)
		}
		devAllocatable = d.Allocatable
	}
	var eviction v1.ResourceList
	if a.cfg.EvictionHard != nil {
		eviction = a.cfg.EvictionHard(capacity)
	}
	allocatable := v1.ResourceList{}
	for name, q := range capacity {
		q = q.DeepCopy()
		for _, reserved := range []v1.ResourceList{a.cfg.KubeReserved, a.cfg.SystemReserved, eviction} {
			if r, ok := reserved[name]; ok {
				q.Sub(r)
			}
		}
		if q.Sign() < 0 {
			q = *resource.NewQuantity(0, q.Format)
		}
		allocatable[name] = q
	}
	if a.devices != nil {
		for name := range a.devices.Capacity {
			// The healthy devices, as upstream's device manager reports them.
			allocatable[name] = *resource.NewQuantity(devAllocatable[name], resource.DecimalSI)
		}
	}
	info.KubeletVersion = a.cfg.KubeletVersion
	info.ContainerRuntimeVersion = a.cfg.RuntimeVersion
	st := &v1.NodeStatus{
		Capacity:    capacity,
		Allocatable: allocatable,
		NodeInfo:    info,
		Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: a.cfg.NodeIP},
			{Type: v1.NodeHostName, Address: a.cfg.Hostname},
		},
		DaemonEndpoints:  v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: a.cfg.Port}},
		Phase:            a.node.Status.Phase,
		Images:           a.images,
		DeclaredFeatures: DeclaredFeatures(),
	}
	st.Conditions = a.conditions(now)
	return st, err
}

func (a *Actor) conditions(now time.Time) []v1.NodeCondition {
	t := metav1.NewTime(now)
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "actorlet is posting ready status"}
	switch h := a.health; {
	case h == nil:
		ready.Status, ready.Reason, ready.Message = v1.ConditionFalse, "KubeletNotReady", "container runtime status check may not have completed yet"
	case h.RuntimeErr != "":
		ready.Status, ready.Reason, ready.Message = v1.ConditionFalse, "KubeletNotReady", "container runtime is down: "+h.RuntimeErr
	case h.LastRelist.IsZero() || now.Sub(h.LastRelist) > h.Threshold:
		ready.Status, ready.Reason = v1.ConditionFalse, "KubeletNotReady"
		ready.Message = fmt.Sprintf("PLEG is not healthy: pleg was last seen active %s ago; threshold is %s",
			now.Sub(h.LastRelist).Round(time.Second), h.Threshold)
	}
	conds := append(pressureConditions(a.pressure), ready)
	for i := range conds {
		conds[i].LastHeartbeatTime = t
		conds[i].LastTransitionTime = t
		for _, old := range a.node.Status.Conditions {
			if old.Type == conds[i].Type && old.Status == conds[i].Status {
				conds[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	return conds
}
