package node

import (
	"fmt"
	goruntime "runtime"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Admission reasons of the upstream kubelet's predicate admit handler
// (pkg/kubelet/lifecycle/predicate.go) besides OutOf<resource>.
const (
	ReasonNodeAffinity   = "NodeAffinity"
	ReasonNodePorts      = "NodePorts"
	ReasonOSNotSupported = "PodOSNotSupported"
	ReasonOSSelector     = "PodOSSelectorNodeLabelDoesNotMatch"
)

// predicates checks what the upstream kubelet checks of any pod before it
// admits it, besides resources: the pod's OS, its node selector and
// required node affinity against this node's labels, and its host ports
// against the admitted pods'. A pod the scheduler placed passes them; a
// pod created with nodeName set, or a static pod, may not.
func (a *Actor) predicates(p *v1.Pod) (reason, msg string) {
	if os := p.Spec.OS; os != nil && string(os.Name) != goruntime.GOOS {
		return ReasonOSNotSupported, fmt.Sprintf("Failed to admit pod as the OS field (%s) doesn't match node OS (%s)", os.Name, goruntime.GOOS)
	}
	if want, ok := p.Spec.NodeSelector[v1.LabelOSStable]; ok && want != a.nodeLabels()[v1.LabelOSStable] {
		return ReasonOSSelector, fmt.Sprintf("Failed to admit pod as the `%s` label (%s) doesn't match node label (%s)", v1.LabelOSStable, want, a.nodeLabels()[v1.LabelOSStable])
	}
	if !a.matchesNodeAffinity(p) {
		return ReasonNodeAffinity, "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
	}
	if port, ok := a.hostPortConflict(p); !ok {
		return ReasonNodePorts, fmt.Sprintf("Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports (%s)", port)
	}
	return "", ""
}

// matchesNodeAffinity: every nodeSelector label matches, and one of the
// required node affinity terms (if any) matches, as the scheduler's
// NodeAffinity filter decides.
func (a *Actor) matchesNodeAffinity(p *v1.Pod) bool {
	for k, v := range p.Spec.NodeSelector {
		if have, ok := a.nodeLabels()[k]; !ok || have != v {
			return false
		}
	}
	aff := p.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if a.matchesTerm(term) {
			return true
		}
	}
	return false // no term matched (an empty list matches nothing, as upstream)
}

var operators = map[v1.NodeSelectorOperator]selection.Operator{
	v1.NodeSelectorOpIn: selection.In, v1.NodeSelectorOpNotIn: selection.NotIn,
	v1.NodeSelectorOpExists: selection.Exists, v1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	v1.NodeSelectorOpGt: selection.GreaterThan, v1.NodeSelectorOpLt: selection.LessThan,
}

// matchesTerm: all expressions and fields of the term match; a term with
// neither matches nothing, as upstream.
func (a *Actor) matchesTerm(term v1.NodeSelectorTerm) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	node := labels.Set(a.nodeLabels())
	for _, e := range term.MatchExpressions {
		if !matches(e, node) {
			return false
		}
	}
	fields := labels.Set{"metadata.name": a.cfg.NodeName}
	for _, e := range term.MatchFields {
		if e.Key != "metadata.name" || !matches(e, fields) {
			return false
		}
	}
	return true
}

// matches one requirement; an invalid one (unknown operator, bad values)
// matches nothing.
func matches(e v1.NodeSelectorRequirement, set labels.Set) bool {
	op, ok := operators[e.Operator]
	if !ok {
		return false
	}
	r, err := labels.NewRequirement(e.Key, op, e.Values)
	if err != nil {
		return false
	}
	return r.Matches(set)
}

// hostPortKey names a (protocol, port) pair; the IPs bound are its values.
func hostPortKey(proto v1.Protocol, port int32) string {
	if proto == "" {
		proto = v1.ProtocolTCP
	}
	return string(proto) + "/" + strconv.Itoa(int(port))
}

func wildcard(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }

// forHostPorts calls fn for each host port the pod asks for.
func forHostPorts(p *v1.Pod, fn func(key, ip string)) {
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, port := range c.Ports {
				if port.HostPort > 0 {
					ip := port.HostIP
					if wildcard(ip) {
						ip = "0.0.0.0"
					}
					fn(hostPortKey(port.Protocol, port.HostPort), ip)
				}
			}
		}
	}
}

// trackHostPorts adds (sign 1) or removes (-1) the pod's host ports.
func (a *Actor) trackHostPorts(p *v1.Pod, sign int) {
	forHostPorts(p, func(key, ip string) {
		if a.hostPorts == nil {
			a.hostPorts = map[string]map[string]int{}
		}
		ips := a.hostPorts[key]
		if ips == nil {
			ips = map[string]int{}
			a.hostPorts[key] = ips
		}
		ips[ip] += sign
		if ips[ip] <= 0 {
			delete(ips, ip)
		}
		if len(ips) == 0 {
			delete(a.hostPorts, key)
		}
	})
}

// hostPortConflict reports the first of the pod's host ports already taken
// (a wildcard address conflicts with every address of the same port).
func (a *Actor) hostPortConflict(p *v1.Pod) (string, bool) {
	conflict := ""
	forHostPorts(p, func(key, ip string) {
		if conflict != "" {
			return
		}
		used := a.hostPorts[key]
		if len(used) == 0 {
			return
		}
		if ip == "0.0.0.0" || used["0.0.0.0"] > 0 || used[ip] > 0 {
			conflict = ip + ":" + key
		}
	})
	return conflict, conflict == ""
}
