package pod

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

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
