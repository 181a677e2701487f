package node

import (
	"fmt"
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
// required node affinity against this node's labels, its host ports
// against the admitted pods', and (a pod of the API server) the live
// Node's NoExecute taints against its tolerations. A pod the scheduler
// placed passes them; a pod created with nodeName set, or a static pod,
// may not.
func (a *Actor) predicates(p *v1.Pod, source string) (reason, msg string) {
	if reason, msg := a.node.selects(p); reason != "" {
		return reason, msg
	}
	if port, ok := a.admitted.hostPortConflict(p); !ok {
		return ReasonNodePorts, fmt.Sprintf("Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports (%s)", port)
	}
	return a.node.admitTaints(p, source)
}

var operators = map[v1.NodeSelectorOperator]selection.Operator{
	v1.NodeSelectorOpIn: selection.In, v1.NodeSelectorOpNotIn: selection.NotIn,
	v1.NodeSelectorOpExists: selection.Exists, v1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	v1.NodeSelectorOpGt: selection.GreaterThan, v1.NodeSelectorOpLt: selection.LessThan,
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
