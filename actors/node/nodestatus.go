package node

import (
	"fmt"
	"maps"
	goruntime "runtime"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// nodeStatus is the node-status part of the NodeActor: what the node
// offers pods, as far as admission asks: its name and labels (the
// configured ones, with the devices' under them), the extended resources'
// allocatable (the DevicesActor's) and the pressure conditions (the
// EvictionActor's).
type nodeStatus struct {
	name       string
	configured map[string]string // Config.NodeLabels: read only
	// devLabels are the configured labels with the devices' (GPU feature
	// discovery's, which the Node object carries in cluster mode) under
	// them: what node selectors and affinity match. Nil: the configured
	// ones alone.
	devLabels   map[string]string
	allocatable map[v1.ResourceName]int64 // extended resources
	pressure    messages.NodePressure
}

func newNodeStatus(name string, configured map[string]string) nodeStatus {
	return nodeStatus{name: name, configured: configured}
}

// labels are the labels pods' node selectors and affinity match.
func (n *nodeStatus) labels() map[string]string {
	if n.devLabels != nil {
		return n.devLabels
	}
	return n.configured
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
