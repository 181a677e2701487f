package pod

import (
	"fmt"
	"hash/maphash"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Sandbox event reasons, as upstream.
const (
	ReasonFailedCreatePodSandBox = "FailedCreatePodSandBox"
	ReasonSandboxChanged         = "SandboxChanged"
)

// keySandbox is the event key of the pod's sandbox creation.
const keySandbox = "sandbox"

// Recorder records events (client-go's record.EventRecorder satisfies it).
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// eventLog records a pod's events once per key and message, so a state the
// actor sees again and again is reported once.
//
// It remembers a hash of the last message of each reason and key, in a
// slice: a pod has a few (Pulled, Created, Started per container), and a
// map of reason/key strings to messages cost ~700 B per pod, held for the
// pod's life.
type eventLog struct {
	rec  Recorder
	last []eventSeen
}

type eventSeen struct {
	reason, key string
	msg         uint64 // maphash of the message
}

var eventSeed = maphash.MakeSeed()

func (l *eventLog) find(reason, key string) int {
	for i := range l.last {
		if l.last[i].reason == reason && l.last[i].key == key {
			return i
		}
	}
	return -1
}

func (l *eventLog) record(pod *v1.Pod, eventtype, reason, key, format string, args ...any) {
	if l.rec == nil || pod == nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	sum := maphash.String(eventSeed, msg)
	switch i := l.find(reason, key); {
	case i < 0:
		l.last = append(l.last, eventSeen{reason: reason, key: key, msg: sum})
	case l.last[i].msg == sum:
		return
	default:
		l.last[i].msg = sum
	}
	l.rec.Eventf(pod, eventtype, reason, "%s", msg)
}

// forget lets the next event of reason and key be recorded even with the
// same message (a failure after a success is news again).
func (l *eventLog) forget(reason, key string) {
	if i := l.find(reason, key); i >= 0 {
		l.last = slices.Delete(l.last, i, i+1)
	}
}

// sandboxEvents reports a failed sandbox creation as upstream
// (FailedCreatePodSandBox, "Failed to create pod sandbox: <err>"); the
// retry back-off is the caller's. A success lets the next failure be
// reported again.
func (a *Actor) sandboxEvents(m *opDone) {
	if m.kind != actRunSandbox {
		return
	}
	if m.err == nil {
		a.events.forget(ReasonFailedCreatePodSandBox, keySandbox)
		return
	}
	a.event(v1.EventTypeWarning, ReasonFailedCreatePodSandBox, keySandbox, "Failed to create pod sandbox: %v", m.err)
}
