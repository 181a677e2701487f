package kube

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLogRecorderWarningsAtWarnNormalAtDebug(t *testing.T) {
	var buf bytes.Buffer
	r := LogRecorder{Log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"}}
	r.Eventf(pod, v1.EventTypeNormal, "Started", "Started container %s", "c")
	r.Eventf(pod, v1.EventTypeWarning, "MissingClusterDNS", "pod: %s", "no cluster DNS")
	out := buf.String()
	if strings.Contains(out, "Started") {
		t.Errorf("a Normal event was logged at Info or above:\n%s", out)
	}
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "reason=MissingClusterDNS") || !strings.Contains(out, `message="pod: no cluster DNS"`) {
		t.Errorf("the Warning event is not in the log at Warn:\n%s", out)
	}
}
