package node

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// ReasonDuplicatePodName rejects a pod whose namespace/name another admitted
// pod (another UID, from any source) already holds: one namespace/name runs
// once on a node. Upstream drops such a pod with a FailedValidation event
// "duplicate pod name"; here it is reported Failed like any other rejection.
const ReasonDuplicatePodName = "DuplicatePodName"

func podName(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// nameConflict reports, for a pod whose namespace/name another admitted pod
// holds, the reason and a message naming that pod.
func (a *Actor) nameConflict(p *v1.Pod) (reason, msg string) {
	holder, held := a.admitted.nameHolder(p)
	if !held {
		return "", ""
	}
	from := ""
	if e, ok := a.table.get(holder); ok && e.source != "" {
		from = " from source " + e.source
	}
	return ReasonDuplicatePodName, fmt.Sprintf("Pod %s (UID %s%s) already runs on this node with this namespace/name; pod UID %s is not run",
		podName(p), holder, from, p.UID)
}
