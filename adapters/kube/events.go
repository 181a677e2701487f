package kube

import (
	"context"
	"fmt"
	"log/slog"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// LogRecorder is the standalone mode's recorder: events go to the log.
type LogRecorder struct{ Log *slog.Logger }

// Event implements record.EventRecorder. A Warning is logged at Warn (the
// log is where a standalone node's user sees it), a Normal event at Debug
// (every pod start has three).
func (l LogRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	level := slog.LevelDebug
	if eventtype == v1.EventTypeWarning {
		level = slog.LevelWarn
	}
	l.log().Log(context.Background(), level, "event", "object", describe(object), "type", eventtype, "reason", reason, "message", message)
}

// Eventf implements record.EventRecorder.
func (l LogRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	l.Event(object, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// AnnotatedEventf implements record.EventRecorder.
func (l LogRecorder) AnnotatedEventf(object runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	l.Eventf(object, eventtype, reason, messageFmt, args...)
}

func (l LogRecorder) log() *slog.Logger {
	if l.Log == nil {
		return slog.Default()
	}
	return l.Log
}

func describe(o runtime.Object) string {
	if p, ok := o.(*v1.Pod); ok {
		return "pod/" + p.Namespace + "/" + p.Name
	}
	return fmt.Sprintf("%T", o)
}

var _ record.EventRecorder = LogRecorder{}
