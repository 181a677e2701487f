package node

import (
	"fmt"
	"maps"
	goruntime "runtime"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// nodeStatus is the node-status part of the NodeActor: what the node
// offers pods, as far as admission asks: its name and labels (the
// configured ones, with the devices' under them, and in cluster mode the
// live Node object's under both), its taints and allocatable (the live
// Node's), the extended resources' allocatable (the DevicesActor's) and
// the pressure conditions (the EvictionActor's).
type nodeStatus struct {
	name       string
	configured map[string]string // Config.NodeLabels: read only
	// devLabels are the configured labels with the devices' (GPU feature
	// discovery's, which the Node object carries in cluster mode) under
	// them. Nil: the configured ones alone.
	devLabels   map[string]string
	allocatable map[v1.ResourceName]int64 // extended resources
	pressure    messages.NodePressure
	// live is the Node object as the API server has it (cluster mode:
	// messages.NodeObject), nil before the first one and after a delete.
	// Its labels are what `kubectl label node` changes: upstream's kubelet
	// admits against its node lister's Node.
	live *messages.NodeObject
	seen bool // a Node was seen (a delete since leaves it so, as upstream's node-synced check)
	// merged are the labels node selectors and affinity match: the live
	// Node's, then the devices', then the configured ones on top (the
	// NodeStatusActor writes those two onto the Node, so they agree once
	// it has). Nil: devLabels or configured alone.
	merged map[string]string
}

func newNodeStatus(name string, configured map[string]string) nodeStatus {
	return nodeStatus{name: name, configured: configured}
}

// labels are the labels pods' node selectors and affinity match.
func (n *nodeStatus) labels() map[string]string {
	if n.merged != nil {
		return n.merged
	}
	if n.devLabels != nil {
		return n.devLabels
	}
	return n.configured
}

// merge recomputes merged after the devices' labels or the live Node
// changed.
func (n *nodeStatus) merge() {
	n.merged = nil
	if n.live == nil || len(n.live.Labels) == 0 {
		return
	}
	n.merged = maps.Clone(n.live.Labels)
	if n.devLabels != nil {
		maps.Copy(n.merged, n.devLabels)
	} else {
		maps.Copy(n.merged, n.configured)
	}
}

// setNode records the live Node object (nil: none read yet; Deleted:
// none now, the configured labels and allocatable stand in, as upstream's
// getNodeAnyWay).
func (n *nodeStatus) setNode(m *messages.NodeObject) {
	if m == nil {
		return
	}
	n.seen = true
	n.live = m
	if m.Deleted {
		n.live = nil
	}
	n.merge()
}

// known: a Node object was seen (cluster mode).
func (n *nodeStatus) known() bool { return n.seen }

// admitAllocatable is what cpu, memory and ephemeral-storage requests are
// admitted against: the live Node's status.allocatable where it has the
// resource, else configured (Config.Allocatable), as upstream admits
// against its node lister's Node.
func (n *nodeStatus) admitAllocatable(configured v1.ResourceList) v1.ResourceList {
	if n.live == nil || len(n.live.Allocatable) == 0 {
		return configured
	}
	out := configured
	copied := false
	for _, name := range admittedResources {
		q, ok := n.live.Allocatable[name]
		if !ok {
			continue
		}
		if have, ok := configured[name]; ok && have.Cmp(q) == 0 {
			continue
		}
		if !copied {
			out, copied = maps.Clone(configured), true
			if out == nil {
				out = v1.ResourceList{}
			}
		}
		out[name] = q
	}
	return out
}

// maxPods is the live Node's allocatable pods where it has them, else
// configured (Config.MaxPods).
func (n *nodeStatus) maxPods(configured int) int {
	if n.live == nil {
		return configured
	}
	if q, ok := n.live.Allocatable[v1.ResourcePods]; ok && q.Value() > 0 {
		return int(q.Value())
	}
	return configured
}

// ReasonTaintToleration is upstream's admission reason for a pod that does
// not tolerate a NoExecute taint of the node.
const ReasonTaintToleration = "TaintToleration"

// admitTaints refuses a pod of the API server that does not tolerate one
// of the live Node's NoExecute taints, as upstream's predicate admit
// handler (static pods are not checked, as upstream's; NoSchedule taints
// are the scheduler's alone: a pod bound to the node despite one, by
// nodeName, is admitted, as upstream).
func (n *nodeStatus) admitTaints(p *v1.Pod, source string) (reason, msg string) {
	if n.live == nil || source != messages.SourceAPI {
		return "", ""
	}
	for i := range n.live.Taints {
		t := &n.live.Taints[i]
		if t.Effect != v1.TaintEffectNoExecute {
			continue
		}
		if !tolerated(p.Spec.Tolerations, t) {
			return ReasonTaintToleration, "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"
		}
	}
	return "", ""
}

// tolerated: one of the tolerations tolerates the taint (Gt and Lt never
// do: TaintTolerationComparisonOperators is alpha and off, as upstream's
// default).
func tolerated(tols []v1.Toleration, t *v1.Taint) bool {
	for i := range tols {
		if tols[i].ToleratesTaint(klog.Background(), t, false) {
			return true
		}
	}
	return false
}

// setDevices records the DevicesActor's capacity: the extended resources'
// allocatable and its labels (the configured ones win, as on the Node).
func (n *nodeStatus) setDevices(m *messages.DeviceCapacity) {
	n.allocatable = m.Allocatable
	n.devLabels = nil
	if len(m.Labels) > 0 {
		n.devLabels = maps.Clone(m.Labels)
		maps.Copy(n.devLabels, n.configured)
	}
	n.merge()
}

// setPressure records the EvictionActor's pressure; changed when a
// condition differs from the last one.
func (n *nodeStatus) setPressure(m *messages.NodePressure) (changed bool) {
	changed = n.pressure.Memory != m.Memory || n.pressure.Disk != m.Disk || n.pressure.PID != m.PID
	n.pressure = *m
	return changed
}

// selects checks the pod's OS field, its kubernetes.io/os selector, its
// node selector and its required node affinity against the node, as the
// upstream kubelet's predicate admit handler does.
func (n *nodeStatus) selects(p *v1.Pod) (reason, msg string) {
	if os := p.Spec.OS; os != nil && string(os.Name) != goruntime.GOOS {
		return ReasonOSNotSupported, fmt.Sprintf("Failed to admit pod as the OS field (%s) doesn't match node OS (%s)", os.Name, goruntime.GOOS)
	}
	if want, ok := p.Spec.NodeSelector[v1.LabelOSStable]; ok && want != n.labels()[v1.LabelOSStable] {
		return ReasonOSSelector, fmt.Sprintf("Failed to admit pod as the `%s` label (%s) doesn't match node label (%s)", v1.LabelOSStable, want, n.labels()[v1.LabelOSStable])
	}
	if !n.matchesNodeAffinity(p) {
		return ReasonNodeAffinity, "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
	}
	return "", ""
}

// matchesNodeAffinity: every nodeSelector label matches, and one of the
// required node affinity terms (if any) matches, as the scheduler's
// NodeAffinity filter decides.
func (n *nodeStatus) matchesNodeAffinity(p *v1.Pod) bool {
	for k, v := range p.Spec.NodeSelector {
		if have, ok := n.labels()[k]; !ok || have != v {
			return false
		}
	}
	aff := p.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if n.matchesTerm(term) {
			return true
		}
	}
	return false // no term matched (an empty list matches nothing, as upstream)
}

// matchesTerm: all expressions and fields of the term match; a term with
// neither matches nothing, as upstream.
func (n *nodeStatus) matchesTerm(term v1.NodeSelectorTerm) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	node := labels.Set(n.labels())
	for _, e := range term.MatchExpressions {
		if !matches(e, node) {
			return false
		}
	}
	fields := labels.Set{"metadata.name": n.name}
	for _, e := range term.MatchFields {
		if e.Key != "metadata.name" || !matches(e, fields) {
			return false
		}
	}
	return true
}

// admitPressure refuses a pod as upstream's eviction admit handler does
// under the node's pressure conditions (evict.go).
func (n *nodeStatus) admitPressure(p *v1.Pod, source string) (reason, msg string) {
	conds := n.pressureConditions()
	// Static pods are critical (podspec.IsCriticalPod): pods of the API
	// server and pushed pods are the ones refused.
	if len(conds) == 0 || (source != messages.SourceAPI && source != messages.SourcePush) || podspec.IsCriticalPod(p) {
		return "", ""
	}
	if len(conds) == 1 && conds[0] == v1.NodeMemoryPressure {
		if podspec.QOSClass(p) != v1.PodQOSBestEffort || toleratesMemoryPressure(p) {
			return "", ""
		}
	}
	names := make([]string, len(conds))
	for i, c := range conds {
		names[i] = string(c)
	}
	return messages.ReasonEvicted, fmt.Sprintf("The node had condition: [%s]. ", strings.Join(names, " "))
}

func (n *nodeStatus) pressureConditions() []v1.NodeConditionType {
	var out []v1.NodeConditionType
	if n.pressure.Memory {
		out = append(out, v1.NodeMemoryPressure)
	}
	if n.pressure.Disk {
		out = append(out, v1.NodeDiskPressure)
	}
	if n.pressure.PID {
		out = append(out, v1.NodePIDPressure)
	}
	return out
}

// handleNodeObject records the live Node; the first one admits the pods
// of the API server held until then (upsert), oldest first.
func (a *Actor) handleNodeObject(ctx actor.Context, m *messages.NodeObject) {
	first := !a.node.known()
	a.node.setNode(m)
	if !first || a.cfg.LiveNode == nil {
		return
	}
	pods := make([]*v1.Pod, 0, len(a.sources.of(messages.SourceAPI)))
	for _, p := range a.sources.of(messages.SourceAPI) {
		pods = append(pods, p)
	}
	for _, p := range admissionOrder(pods) {
		a.upsert(ctx, p, messages.SourceAPI)
	}
	a.reportDesired()
	a.compact()
}
