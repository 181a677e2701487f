package nodestatus

import (
	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/messages"
)

// The pressure conditions follow the EvictionActor's NodePressure (which
// holds them for --eviction-pressure-transition-period), with upstream's
// reasons; a change is recorded as the Node's event, as upstream
// (NodeHasInsufficientMemory, NodeHasSufficientMemory, ...). The node
// lifecycle controller taints the Node from them; actorlet does not.

// pressureCondition is one condition's two faces.
type pressureCondition struct {
	typ                       v1.NodeConditionType
	okReason, okMessage       string
	underReason, underMessage string
	okEvent, underEvent       string
}

var pressureConditionsOf = []pressureCondition{
	{typ: v1.NodeMemoryPressure,
		okReason: "KubeletHasSufficientMemory", okMessage: "actorlet has sufficient memory available",
		underReason: "KubeletHasInsufficientMemory", underMessage: "actorlet has insufficient memory available",
		okEvent: "NodeHasSufficientMemory", underEvent: "NodeHasInsufficientMemory"},
	{typ: v1.NodeDiskPressure,
		okReason: "KubeletHasNoDiskPressure", okMessage: "actorlet has no disk pressure",
		underReason: "KubeletHasDiskPressure", underMessage: "actorlet has disk pressure",
		okEvent: "NodeHasNoDiskPressure", underEvent: "NodeHasDiskPressure"},
	{typ: v1.NodePIDPressure,
		okReason: "KubeletHasSufficientPID", okMessage: "actorlet has sufficient PID available",
		underReason: "KubeletHasInsufficientPID", underMessage: "actorlet has insufficient PID available",
		okEvent: "NodeHasSufficientPID", underEvent: "NodeHasInsufficientPID"},
}

func under(p *messages.NodePressure, t v1.NodeConditionType) bool {
	if p == nil {
		return false
	}
	switch t {
	case v1.NodeMemoryPressure:
		return p.Memory
	case v1.NodeDiskPressure:
		return p.Disk
	case v1.NodePIDPressure:
		return p.PID
	}
	return false
}

// pressureConditions are MemoryPressure, DiskPressure and PIDPressure
// under p (nil: no pressure known).
func pressureConditions(p *messages.NodePressure) []v1.NodeCondition {
	out := make([]v1.NodeCondition, 0, len(pressureConditionsOf))
	for _, c := range pressureConditionsOf {
		if under(p, c.typ) {
			out = append(out, v1.NodeCondition{Type: c.typ, Status: v1.ConditionTrue, Reason: c.underReason, Message: c.underMessage})
		} else {
			out = append(out, v1.NodeCondition{Type: c.typ, Status: v1.ConditionFalse, Reason: c.okReason, Message: c.okMessage})
		}
	}
	return out
}

// askPressure asks the EvictionActor for the pressure (a restarted
// NodeStatusActor is not told again otherwise).
func (a *Actor) askPressure(ctx actor.Context) {
	if a.cfg.Eviction != nil {
		ctx.Send(a.cfg.Eviction, &messages.GetNodePressure{ReplyTo: ctx.Self()})
	}
}

// handleNodePressure takes the EvictionActor's pressure into the next
// report (at once when it changed) and records the changes as events.
func (a *Actor) handleNodePressure(m *messages.NodePressure) {
	prev := a.pressure
	a.pressure = m
	changed := false
	for _, c := range pressureConditionsOf {
		was, now := under(prev, c.typ), under(m, c.typ)
		if was == now {
			continue
		}
		changed = true
		reason := c.okEvent
		if now {
			reason = c.underEvent
		}
		a.log.Info("node condition changed", "condition", c.typ, "status", now)
		if a.cfg.Events != nil {
			ref := &v1.ObjectReference{Kind: "Node", Name: a.cfg.NodeName, UID: types.UID(a.cfg.NodeName)}
			a.cfg.Events.Eventf(ref, v1.EventTypeNormal, reason, "Node %s status is now: %s", a.cfg.NodeName, reason)
		}
	}
	if changed {
		a.report(false)
	}
}
