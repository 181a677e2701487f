package pod

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
)

// readFinal reads what a kill stopped, before it is removed: every
// container of snap (exit codes, finish times) and its sandboxes. It is
// what the pod's final status is made of (upstream posts the terminal
// status of a deleted pod once its containers are stopped, and deletes it
// from the API only then: a pod held by a finalizer keeps that status).
// nil where the runtime could not be read.
func readFinal(ctx context.Context, rt Runtime, files TerminationReader, snap *snapshot) *delta {
	var ids []string
	for _, cs := range snap.containers {
		for _, c := range cs {
			ids = append(ids, c.Id)
		}
	}
	d := containersDelta(ctx, rt, files, ids, nil)
	if d.reread {
		return nil
	}
	for _, sb := range snap.sandboxes {
		if st, err := rt.PodSandboxStatus(ctx, sb.Id); err == nil {
			d.sandboxes = append(d.sandboxes, st)
		}
	}
	return d
}

// keepFinal keeps what a kill read before removing the pod (the first
// complete reading: a later round of the kill finds less).
func (a *Actor) keepFinal(d *delta) {
	if d != nil && d.final != nil && len(d.final.containers) > 0 && a.final == nil {
		a.final = d.final
	}
}

// publishFinal publishes the terminal status of a killed pod from what its
// kill read before removing it: containers terminated with their exit
// codes, the phase Succeeded when every container succeeded, else Failed
// (upstream's getPhase for a terminal pod). Evictions have their own.
func (a *Actor) publishFinal(now time.Time) {
	if a.pod == nil || a.final == nil || (a.kill != nil && a.kill.Evicted) {
		return
	}
	snap, _ := (*snapshot)(nil).apply(nil, a.final)
	st := computeStatus(statusInput{
		pod: a.pod, snap: snap, runtimeName: a.d.Config.RuntimeName,
		hostIP: a.d.Config.HostIP, startTime: a.startTime(), prev: a.status, now: now,
		deadlineExceeded: a.deadline.exceeded,
	})
	st = terminalStatus(st, a.status, now)
	if a.status != nil && st.Phase == a.status.Phase && st.Reason == "" {
		st.Reason, st.Message = a.status.Reason, a.status.Message
	}
	a.sendStatus(st)
}

// terminalStatus is st of a pod whose containers will never run again:
// the phase is terminal once no container runs or waits to run (Succeeded
// when all succeeded), Ready and ContainersReady are False (PodCompleted),
// and the pod IPs stay what they were.
func terminalStatus(st v1.PodStatus, prev *v1.PodStatus, now time.Time) v1.PodStatus {
	if st.PodIP == "" && prev != nil {
		st.PodIP, st.PodIPs = prev.PodIP, append([]v1.PodIP(nil), prev.PodIPs...)
	}
	if st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed {
		return st
	}
	stopped, succeeded := 0, 0
	for _, cs := range st.ContainerStatuses {
		t := cs.State.Terminated
		if t == nil {
			return st // a container never ran: not terminal by its containers
		}
		stopped++
		if t.ExitCode == 0 {
			succeeded++
		}
	}
	if stopped == 0 {
		return st
	}
	st.Phase = v1.PodFailed
	if stopped == succeeded {
		st.Phase = v1.PodSucceeded
	}
	for i, c := range st.Conditions {
		switch c.Type {
		case v1.PodReady, v1.ContainersReady:
			st.Conditions[i].Status, st.Conditions[i].Reason, st.Conditions[i].Message = v1.ConditionFalse, ReasonPodCompleted, ""
		case v1.PodReadyToStartContainers:
			st.Conditions[i].Status, st.Conditions[i].Reason, st.Conditions[i].Message = v1.ConditionFalse, "", ""
		}
	}
	st.Conditions = keepTransitionTimes(st.Conditions, prev, now)
	return st
}
