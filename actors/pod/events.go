package pod

import (
	"fmt"

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
type eventLog struct {
	rec  Recorder
	last map[string]string
}

func (l *eventLog) record(pod *v1.Pod, eventtype, reason, key, format string, args ...any) {
	if l.rec == nil || pod == nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	k := reason + "/" + key
	if l.last[k] == msg {
		return
	}
	if l.last == nil {
		l.last = map[string]string{}
	}
	l.last[k] = msg
	l.rec.Eventf(pod, eventtype, reason, "%s", msg)
}

// forget lets the next event of reason and key be recorded even with the
// same message (a failure after a success is news again).
func (l *eventLog) forget(reason, key string) {
	delete(l.last, reason+"/"+key)
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
