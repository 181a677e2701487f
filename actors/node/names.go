package node

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ReasonDuplicatePodName rejects a pod whose namespace/name another admitted
// pod (another UID, from any source) already holds: one namespace/name runs
// once on a node. Upstream drops such a pod with a FailedValidation event
// "duplicate pod name"; here it is reported Failed like any other rejection.
const ReasonDuplicatePodName = "DuplicatePodName"

func podName(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// trackName makes the pod hold its namespace/name (sign 1) if the name is
// free, or frees it (-1) if the pod holds it. An admitted pod holds its
// name until it is killed, as its host ports.
func (a *Actor) trackName(p *v1.Pod, sign int) {
	key := podName(p)
	holder, held := a.names[key]
	switch {
	case sign > 0 && !held:
		if a.names == nil {
			a.names = map[string]types.UID{}
		}
		a.names[key] = p.UID
	case sign < 0 && held && holder == p.UID:
		delete(a.names, key)
	}
}

// nameConflict reports, for a pod whose namespace/name another admitted pod
// holds, the reason and a message naming that pod.
func (a *Actor) nameConflict(p *v1.Pod) (reason, msg string) {
	holder, held := a.names[podName(p)]
	if !held || holder == p.UID {
		return "", ""
	}
	from := ""
	if e, ok := a.pods[holder]; ok && e.source != "" {
		from = " from source " + e.source
	}
	return ReasonDuplicatePodName, fmt.Sprintf("Pod %s (UID %s%s) already runs on this node with this namespace/name; pod UID %s is not run",
		podName(p), holder, from, p.UID)
}
