package podspec

import v1 "k8s.io/api/core/v1"

// ReadinessGateConditions are the conditions of p's status that its
// readiness gates name (set by someone other than the node), in the order
// of the gates; a gate without its condition gives nothing.
func ReadinessGateConditions(p *v1.Pod) []v1.PodCondition {
	if p == nil || len(p.Spec.ReadinessGates) == 0 {
		return nil
	}
	var out []v1.PodCondition
	for _, g := range p.Spec.ReadinessGates {
		for _, c := range p.Status.Conditions {
			if c.Type == g.ConditionType {
				out = append(out, c)
				break
			}
		}
	}
	return out
}
