package status

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The lanes of the write queue. When every write slot is taken, a pod
// waits in the lane of its next write; free slots take pods from the
// lanes in turn (lanes.pop), so a storm of pods the node rejects (each one
// a first status, Failed, to write) never holds the first Running status of
// a pod that runs behind thousands of its writes, and neither lane starves.
const (
	// laneFirst: a pod's first status (a mirror pod's creation), or the
	// first that says it runs or is ready: what users and controllers
	// wait on.
	laneFirst = iota
	// laneNormal: every other write (later changes, final deletes).
	laneNormal
	// laneLow: a first status that is already terminal (a pod rejected at
	// admission), and pods whose status the API server refuses (retried
	// with back-off).
	laneLow
	numLanes
)

// lowEvery: one slot in lowEvery goes to the lowest lane that waits,
// whatever waits above it: a rejection storm drains at that share of the
// write rate at least while pods start.
const lowEvery = 4

// lanes holds the queued pods, oldest first in each lane.
type lanes struct {
	q    [numLanes][]types.UID
	head [numLanes]int
	turn uint
}

func (l *lanes) push(lane int, uid types.UID) {
	l.q[lane] = append(l.q[lane], uid)
}

func (l *lanes) len(lane int) int { return len(l.q[lane]) - l.head[lane] }

// pop takes the next pod: from the highest lane that waits, but every
// lowEvery-th turn from the lowest one.
func (l *lanes) pop() (types.UID, int, bool) {
	l.turn++
	order := [numLanes]int{laneFirst, laneNormal, laneLow}
	if l.turn%lowEvery == 0 {
		order = [numLanes]int{laneLow, laneNormal, laneFirst}
	}
	for _, lane := range order {
		if l.len(lane) == 0 {
			continue
		}
		uid := l.q[lane][l.head[lane]]
		l.q[lane][l.head[lane]] = ""
		l.head[lane]++
		if l.head[lane] == len(l.q[lane]) {
			l.q[lane], l.head[lane] = l.q[lane][:0], 0
		} else if l.head[lane] >= 1024 && l.head[lane]*2 >= len(l.q[lane]) {
			// Drop the consumed half so a long storm does not keep it.
			n := copy(l.q[lane], l.q[lane][l.head[lane]:])
			clear(l.q[lane][n:])
			l.q[lane], l.head[lane] = l.q[lane][:n], 0
		}
		return uid, lane, true
	}
	return "", 0, false
}

// laneOf is the lane of a pod's next write op.
func (w *writer) laneOf(st *apiPod, op string) int {
	switch {
	case st.refused != nil:
		return laneLow
	case op == "create-mirror":
		return laneFirst
	case op != "patch" || st.desired == nil:
		return laneNormal
	case st.acked == nil && terminal(st.desired.Phase):
		return laneLow // rejected before it ran: nobody waits on it to start
	case st.acked == nil:
		return laneFirst
	case st.written != nil && st.written.Phase != v1.PodRunning && st.desired.Phase == v1.PodRunning,
		st.written != nil && !ready(st.written) && ready(st.desired):
		return laneFirst
	}
	return laneNormal
}

// ready: the status says Ready.
func ready(s *v1.PodStatus) bool {
	for _, c := range s.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
